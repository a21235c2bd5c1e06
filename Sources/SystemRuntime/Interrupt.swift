import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Ctrl-C during a sign-in, as a readable file descriptor (the self-pipe trick): the SIGINT
/// handler writes one byte, and every wait of the login flows polls this descriptor next to what
/// it is waiting for. The first Ctrl-C cancels the sign-in cleanly (nothing stored); the handler
/// then restores the default action, so a second Ctrl-C ends the process even while a request to
/// the issuer is still in flight.
public final class InterruptWatch {
    /// The read end; readable once SIGINT has arrived.
    public let fd: Int32
    private let writeFD: Int32
    private var previous: sighandler_t?
    private var previousMask = sigset_t()

    /// The write end for the signal handler (a plain global: set before the handler is installed).
    nonisolated(unsafe) fileprivate static var handlerFD: Int32 = -1

    private init(read: Int32, write: Int32) {
        fd = read
        writeFD = write
    }

    /// Installs the SIGINT handler; nil when no pipe can be made (then Ctrl-C keeps its default).
    public static func install() -> InterruptWatch? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for f in fds {
            _ = fcntl(f, F_SETFD, FD_CLOEXEC)
            _ = fcntl(f, F_SETFL, fcntl(f, F_GETFL) | O_NONBLOCK)
        }
        let watch = InterruptWatch(read: fds[0], write: fds[1])
        handlerFD = fds[1]
        watch.previous = signal(SIGINT, interruptHandler)
        // A parent may have started us with SIGINT blocked (some process launchers do); the
        // person asked for an interactive sign-in, so Ctrl-C must reach the handler.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &unblock, &watch.previousMask)
        return watch
    }

    /// Whether Ctrl-C has been pressed (does not consume it).
    public var fired: Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    /// Puts the previous SIGINT disposition back and closes the pipe.
    public func restore() {
        pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        if let previous { signal(SIGINT, previous) } else { signal(SIGINT, SIG_DFL) }
        previous = nil
        InterruptWatch.handlerFD = -1
        close(fd)
        close(writeFD)
    }

    public static let cancelled = CredentialError.interrupted("sign-in cancelled (Ctrl-C); nothing was stored")
}

private func interruptHandler(_ signo: Int32) {
    // Only async-signal-safe calls here.
    var byte: UInt8 = 1
    let fd = InterruptWatch.handlerFD
    if fd >= 0 { _ = write(fd, &byte, 1) }
    signal(SIGINT, SIG_DFL)
}

/// poll(2) over a few descriptors with a deadline, retrying on EINTR.
public enum Waiter {
    /// What woke the wait.
    public enum Wake: Equatable { case ready(Int32), interrupted, timedOut }

    /// Waits until one of `fds` is readable, `interrupt` fires, or `timeoutMillis` passes.
    /// Returns the first readable descriptor in `fds` order. A hang-up or error counts as readable.
    public static func readable(_ fds: [Int32], interrupt: InterruptWatch?, timeoutMillis: Int64) -> Wake {
        let start = Clock.monotonicMillis()
        var set = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if let interrupt { set.append(pollfd(fd: interrupt.fd, events: Int16(POLLIN), revents: 0)) }
        while true {
            let left = max(0, timeoutMillis - (Clock.monotonicMillis() - start))
            for i in set.indices { set[i].revents = 0 }
            let n = poll(&set, nfds_t(set.count), Int32(min(left, Int64(Int32.max))))
            if n < 0 {
                if errno == EINTR { if interrupt?.fired == true { return .interrupted }; continue }
                return .timedOut
            }
            if n == 0 { return .timedOut }
            if interrupt != nil, set[set.count - 1].revents != 0 { return .interrupted }
            for (i, p) in set.enumerated() where i < fds.count && p.revents != 0 { return .ready(p.fd) }
        }
    }

    /// Sleeps `seconds`, returning false early when interrupted.
    public static func sleep(_ seconds: Double, interrupt: InterruptWatch?) -> Bool {
        readable([], interrupt: interrupt, timeoutMillis: Int64(seconds * 1000)) != .interrupted
    }
}
