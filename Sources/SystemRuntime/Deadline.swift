import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking work with a wall-clock deadline, without Foundation or Dispatch: the work runs
/// on the calling thread while a watchdog thread waits on a POSIX semaphore with a timeout; when
/// the deadline passes the watchdog runs `onTimeout` (e.g. to cancel a GCancellable so the work
/// unwinds).
public enum Deadline {
    /// The deadline for Secret Service calls, in seconds (man page STORES): 30 s when stdin or
    /// stderr is a terminal (a person may be answering an unlock prompt), 3 s otherwise (gh's
    /// value: scripts must not hang on a D-Bus activation that never completes). The store takes
    /// `CHATGPT_CREDENTIAL_DBUS_TIMEOUT` instead when it is set (`CLI/Settings.swift` reads it).
    public static func secretServiceSeconds() -> Double {
        (isatty(0) == 1 || isatty(2) == 1) ? 30 : 3
    }

    /// `3` -> "3 s", `1.5` -> "1.5 s", `0.25` -> "0.25 s".
    public static func describe(_ seconds: Double) -> String {
        let millis = Int64((seconds * 1000).rounded())
        var text = String(millis / 1000)
        var rest = millis % 1000
        if rest != 0 {
            var frac = ""
            var div: Int64 = 100
            while rest != 0 && div > 0 { frac.append(Character(Unicode.Scalar(UInt8(48 + rest / div)))); rest %= div; div /= 10 }
            text += "." + frac
        }
        return text + " s"
    }
}

extension Deadline {
    /// Runs `work` on the calling thread while a watchdog thread waits out `seconds`; if `work`
    /// has not returned by then the watchdog calls `onTimeout` (from its own thread), which must
    /// make `work` return promptly, e.g. by cancelling the GCancellable it waits on (`work` then
    /// reports the cancellation itself). The result needs no hand-off from a worker thread: on the
    /// hot path the calling thread is woken by the D-Bus thread directly, as in a C program. When
    /// no watchdog thread can be created, `work` runs without one: GDBus needs a thread of its own
    /// too, so such a process fails to reach D-Bus at once rather than hanging.
    public static func watch<T: ~Copyable>(seconds: Double, onTimeout: @escaping () -> Void, _ work: () -> T) -> T {
        let watchdog = Watchdog(seconds: seconds, onTimeout: onTimeout)
        let retained = Unmanaged.passRetained(watchdog).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let watchdog = Unmanaged<Watchdog>.fromOpaque(raw!).takeRetainedValue()
            watchdog.wait()
            return nil
        }, retained)
        guard rc == 0 else {
            Unmanaged<Watchdog>.fromOpaque(retained).release()
            return work()
        }
        pthread_detach(thread)
        let result = work()
        watchdog.finished()
        return result
    }
}

/// The watchdog of `Deadline.watch`: calls `onTimeout` unless `finished()` comes first.
final class Watchdog {
    private let seconds: Double
    private let onTimeout: () -> Void
    private let semaphore: UnsafeMutablePointer<sem_t>

    init(seconds: Double, onTimeout: @escaping () -> Void) {
        self.seconds = seconds
        self.onTimeout = onTimeout
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func finished() { sem_post(semaphore) }

    /// On the watchdog thread: waits for `finished()` until the deadline, else calls `onTimeout`.
    func wait() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let whole = seconds.rounded(.down)
        var nanos = Int(now.tv_nsec) + Int((seconds - whole) * 1_000_000_000)
        var secs = Int(now.tv_sec) + Int(whole)
        if nanos >= 1_000_000_000 { secs += 1; nanos -= 1_000_000_000 }
        var until = timespec(tv_sec: secs, tv_nsec: nanos)
        while true {
            if sem_timedwait(semaphore, &until) == 0 { return }
            if errno == EINTR { continue }
            // A finish that landed just as the clock ran out still counts.
            if sem_trywait(semaphore) != 0 { onTimeout() }
            return
        }
    }
}
