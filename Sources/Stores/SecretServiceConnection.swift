internal import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// The process's SecretService: one proxy on a connection of its own to the bus found
/// (`SessionBus.find`), opened on first use and kept, as libsecret keeps its default one, until
/// the daemon or the bus behind it is found gone (`forget`); then the next operation opens a
/// fresh one (man page STORES, "Finding the Secret Service"). Opening happens outside the lock,
/// so no caller waits on another's connect beyond its own deadline.
final class SecretServiceConnection: @unchecked Sendable {
    static let shared = SecretServiceConnection()

    private var mutex = pthread_mutex_t()
    private var address: String?
    private var current: UnsafeMutablePointer<SecretService>?

    private init() { pthread_mutex_init(&mutex, nil) }

    /// A new reference to the service on `address` (the caller unrefs it), opened now if there
    /// is none for that address. Throws `storeUnavailable` (the bus did not answer), or
    /// `SecretServiceStore.Cancelled` when the deadline cancelled the connect.
    func service(at address: String, _ cancellable: UnsafeMutablePointer<GCancellable>) throws -> UnsafeMutablePointer<SecretService> {
        if let kept = withLock({ () -> UnsafeMutablePointer<SecretService>? in
            guard self.address == address, let current else { return nil }
            _ = ccred_g_object_ref(current)
            return current
        }) { return kept }
        var error: UnsafeMutablePointer<GError>?
        guard let opened = ccred_secret_service_open_at(address, cancellable, &error) else {
            throw SecretServiceStore.connectFailure(error, address: address)
        }
        // Another thread may have opened one meanwhile: the first kept wins, the other is closed.
        let (winner, loser) = withLock { () -> (UnsafeMutablePointer<SecretService>, UnsafeMutablePointer<SecretService>?) in
            if self.address == address, let current {
                _ = ccred_g_object_ref(current)
                return (current, opened)
            }
            let replaced = current
            self.address = address
            current = opened
            _ = ccred_g_object_ref(opened) // the one kept here
            return (opened, replaced)
        }
        if let loser {
            ccred_secret_service_close(loser)
            ccred_g_object_unref(loser)
        }
        return winner
    }

    /// Drops `service` if it is the one kept (a caller found its daemon or bus gone), closing its
    /// connection; the next `service(at:)` opens afresh. A service already replaced is left alone.
    func forget(_ service: UnsafeMutablePointer<SecretService>) {
        let dropped = withLock { () -> UnsafeMutablePointer<SecretService>? in
            guard current == service else { return nil }
            current = nil
            address = nil
            return service
        }
        if let dropped {
            ccred_secret_service_close(dropped)
            ccred_g_object_unref(dropped)
        }
    }

    private func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }
}
