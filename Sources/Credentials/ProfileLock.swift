import CredentialCore
import SystemRuntime
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A profile's lock, with one discipline for every caller (man page FILES, "Locks"): inside a
/// process callers queue on a mutex per profile; across processes on flock(2) of two files, always
/// taken in this order — `NAME.lock` in the user's lock directory (`Paths.lockDirectory`: chosen by
/// the uid alone; checked by `LockDirectory`), then `NAME.lock` beside the encrypted file, in its
/// real directory (`FileLock.openBesideStore`). The first serves the keyring and the back-off; the
/// second is found from the file store itself, so a process in another user namespace, or one that
/// sees the data directory through a bind mount at another path, takes the same lock as the host's
/// processes, whatever uid it sees. Every change to a credential holds both exclusively, so `auto`'s
/// moves between the stores are covered in the same fixed order. A store directory whose lock cannot
/// be made (read-only) is never changed: an exclusive hold throws `storeReadOnly`. The kernel drops
/// a flock when its holder dies (even by SIGKILL), so a crashed writer never wedges the profile.
package final class ProfileLock {
    package let profile: Profile
    /// The lock in the user's lock directory. nil only in unit tests that want the in-process mutex alone.
    /// Found when first asked for: an answer from the access cache takes no lock, and finding
    /// the lock directory costs a `stat` (the broker answers many such requests a second).
    package private(set) lazy var path: String? = findPath()
    private let findPath: () -> String?
    /// The encrypted file store's directory, whose lock is taken second (nil: no file store here).
    package let storeDirectory: String?
    /// Seconds to wait for another holder before `lockTimeout` (exit 4).
    package let timeout: Double

    package init(profile: Profile, path: @autoclosure @escaping () -> String?, storeDirectory: String? = nil, timeout: Double) {
        self.profile = profile
        self.findPath = path
        self.storeDirectory = storeDirectory
        self.timeout = timeout
    }

    /// Runs `body` holding the lock exclusively.
    package func exclusive<T>(_ body: () throws -> T) throws -> T {
        try holding(.exclusive, body)
    }

    /// Runs `body` holding the lock in `mode` (shared: readers that must not overlap a change,
    /// but may overlap each other).
    package func holding<T>(_ mode: FileLock.Mode, _ body: () throws -> T) throws -> T {
        try ProfileMutex.shared.withLock(profile.name) {
            let locks = try open(mode)
            defer { locks.forEach { $0.release() } }
            let deadline = LockWait(timeout)
            for lock in locks { try lock.lock(mode, profile: profile, timeout: deadline.remaining) }
            return try body()
        }
    }

    /// For a refresh. When the lock is free, takes it exclusively and runs `owner`. When another
    /// process holds it (a refresh under way), waits for it SHARED, so every waiter wakes and
    /// reads what that process stored at once, and runs `waiter`; only when `waiter` returns nil
    /// (nothing usable was left) does it take the lock exclusively and run `owner`.
    package func exclusiveUnlessAnswered<T>(waiter: () throws -> T?, owner: () throws -> T) throws -> T {
        try ProfileMutex.shared.withLock(profile.name) {
            guard path != nil || storeDirectory != nil else { return try owner() }
            let locks = try open(.exclusive)
            defer { locks.forEach { $0.release() } }
            let deadline = LockWait(timeout)
            if try !tryAll(locks) {
                for lock in locks { try lock.lock(.shared, profile: profile, timeout: deadline.remaining) }
                if let answer = try waiter() { return answer }
                locks.forEach { $0.unlock() }
                for lock in locks { try lock.lock(.exclusive, profile: profile, timeout: deadline.remaining) }
            }
            return try owner()
        }
    }

    /// Every lock exclusively at once, or none (false: someone else holds one).
    private func tryAll(_ locks: [FileLock]) throws -> Bool {
        for (i, lock) in locks.enumerated() where try !lock.tryLock(.exclusive) {
            locks[..<i].forEach { $0.unlock() }
            return false
        }
        return true
    }

    /// The lock files, in the order they are taken. A store directory whose lock file cannot be
    /// made is skipped for a shared hold (nothing is changed under it) and refused for an exclusive one.
    private func open(_ mode: FileLock.Mode) throws -> [FileLock] {
        var locks: [FileLock] = []
        do {
            if let path { locks.append(try FileLock.open(path: path)) }
            if let storeDirectory {
                switch try FileLock.openBesideStore(directory: storeDirectory, name: profile.name + ".lock", create: mode == .exclusive) {
                case .opened(let lock): locks.append(lock)
                case .noDirectory: break
                case .cannotCreate(let directory, let reason):
                    if mode == .exclusive { throw CredentialError.storeReadOnly(directory: directory, reason: reason) }
                }
            }
        } catch {
            locks.forEach { $0.release() }
            throw error
        }
        return locks
    }
}

/// Seconds left of one wait shared by the locks taken one after the other.
private struct LockWait {
    let total: Double
    let started = Clock.monotonicMillis()
    init(_ total: Double) { self.total = total }
    var remaining: Double { total.isNaN ? total : total - Double(Clock.monotonicMillis() - started) / 1000 }
}

/// One mutex per profile inside this process: the in-process half of `ProfileLock`.
final class ProfileMutex: Sendable {
    static let shared = ProfileMutex()

    /// One profile's mutex; made on first use and kept for the life of the process.
    private final class Slot: Sendable {
        let mutex = Mutex(())
    }

    private let slots = Mutex<[String: Slot]>([:])

    init() {}

    func withLock<T>(_ key: String, _ body: () throws -> sending T) throws -> sending T {
        let slot = slots.withLock { slots in
            if let existing = slots[key] { return existing }
            let made = Slot()
            slots[key] = made
            return made
        }
        return try slot.mutex.withLock { _ in try body() }
    }
}
