internal import CLibSecret
import Synchronization

/// The process's SecretService: one proxy on a connection of its own to the bus found
/// (`SessionBus.find`), opened on first use and kept, as libsecret keeps its default one, until
/// the daemon or the bus behind it is found gone (`forget`); then the next operation opens a
/// fresh one (man page STORES, "Finding the Secret Service"). Opening happens outside the lock,
/// so no caller waits on another's connect beyond its own deadline.
final class SecretServiceConnection: Sendable {
    static let shared = SecretServiceConnection()

    /// A reference to a SecretService proxy held by the kept state. Sendable: GObject's reference
    /// counting is atomic and libsecret's calls on a service may be made from any thread (the
    /// store calls it from whichever thread runs the operation), so the pointer may cross threads.
    private struct Service: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<SecretService>
    }

    private struct Kept {
        var address: String?
        var current: Service?
        /// The last call that ran out of its deadline: its address and when (monotonic ms).
        var silentAddress: String?
        var silentAt: Int64 = 0
    }

    private let kept = Mutex(Kept())

    private init() {}

    /// A new reference to the service on `address` (the caller unrefs it), opened now if there
    /// is none for that address. Throws `storeUnavailable` (the bus did not answer), or
    /// `SecretServiceStore.Cancelled` when the deadline cancelled the connect.
    func service(at address: String, _ cancellable: UnsafeMutablePointer<GCancellable>) throws -> UnsafeMutablePointer<SecretService> {
        if let reused = kept.withLock({ kept -> Service? in
            guard kept.address == address, let current = kept.current else { return nil }
            _ = ccred_g_object_ref(current.pointer)
            return current
        }) { return reused.pointer }
        var error: UnsafeMutablePointer<GError>?
        guard let pointer = ccred_secret_service_open_at(address, cancellable, &error) else {
            throw SecretServiceStore.connectFailure(error, address: address)
        }
        let opened = Service(pointer: pointer)
        // Another thread may have opened one meanwhile: the first kept wins, the other is closed.
        let (winner, loser) = kept.withLock { kept -> (Service, Service?) in
            if kept.address == address, let current = kept.current {
                _ = ccred_g_object_ref(current.pointer)
                return (current, opened)
            }
            let replaced = kept.current
            kept.address = address
            kept.current = opened
            _ = ccred_g_object_ref(opened.pointer) // the one kept here
            return (opened, replaced)
        }
        if let loser {
            ccred_secret_service_close(loser.pointer)
            ccred_g_object_unref(loser.pointer)
        }
        return winner.pointer
    }

    /// Whether a call to `address` ran out of its deadline after `begun` and less than `within`
    /// ms before `now`. The work begun before it — the requests a long-lived process (`serve`)
    /// queued behind that call on the profile's lock, one after another — then gets the same
    /// "did not answer" at once instead of a deadline more each (man page STORES): a hung daemon
    /// answers a crowd in one deadline, not one each. Work begun after it asks the service again.
    func wentSilent(_ address: String, after begun: Int64, now: Int64, within: Int64) -> Bool {
        kept.withLock { $0.silentAddress == address && $0.silentAt >= begun && now < $0.silentAt + within }
    }

    /// A call to `address` ran out of its deadline at `moment`.
    func recordSilence(_ address: String, at moment: Int64) {
        kept.withLock { kept in
            kept.silentAddress = address
            kept.silentAt = moment
        }
    }

    /// Drops `service` if it is the one kept (a caller found its daemon or bus gone), closing its
    /// connection; the next `service(at:)` opens afresh. A service already replaced is left alone.
    func forget(_ service: UnsafeMutablePointer<SecretService>) {
        let dropped = kept.withLock { kept -> Bool in
            guard kept.current?.pointer == service else { return false }
            kept.current = nil
            kept.address = nil
            return true
        }
        if dropped {
            ccred_secret_service_close(service)
            ccred_g_object_unref(service)
        }
    }
}
