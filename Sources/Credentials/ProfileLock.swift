import CredentialCore
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// A profile's lock, with one discipline for every caller: inside a process callers queue on a
/// mutex per profile, across processes on flock(2) of `NAME.lock` in the user's lock directory
/// (`Paths.lockDirectory`: chosen by the uid alone, so every process of the user meets on the
/// same file whatever its environment; checked by `LockDirectory`). One lock per user and profile
/// covers every store: `auto` writes one store and deletes the other's copy under it. Every
/// change to a credential holds it exclusively. The kernel drops a flock when its holder dies
/// (even by SIGKILL), so a crashed writer never wedges the profile.
package final class ProfileLock {
    package let profile: Profile
    /// nil only in unit tests that want the in-process mutex alone.
    package let path: String?
    /// Seconds to wait for another holder before `lockTimeout` (exit 4).
    package let timeout: Double

    package init(profile: Profile, path: String?, timeout: Double) {
        self.profile = profile
        self.path = path
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
            let lock = try path.map { try FileLock.open(path: $0) }
            defer { lock?.release() }
            try lock?.lock(mode, profile: profile, timeout: timeout)
            return try body()
        }
    }

    /// For a refresh. When the lock is free, takes it exclusively and runs `owner`. When another
    /// process holds it (a refresh under way), waits for it SHARED, so every waiter wakes and
    /// reads what that process stored at once, and runs `waiter`; only when `waiter` returns nil
    /// (nothing usable was left) does it take the lock exclusively and run `owner`.
    package func exclusiveUnlessAnswered<T>(waiter: () throws -> T?, owner: () throws -> T) throws -> T {
        try ProfileMutex.shared.withLock(profile.name) {
            guard let path else { return try owner() }
            let lock = try FileLock.open(path: path)
            defer { lock.release() }
            let started = Clock.monotonicMillis()
            func remaining() -> Double { timeout - Double(Clock.monotonicMillis() - started) / 1000 }
            if try !lock.tryLock(.exclusive) {
                try lock.lock(.shared, profile: profile, timeout: remaining())
                if let answer = try waiter() { return answer }
                lock.unlock()
                try lock.lock(.exclusive, profile: profile, timeout: remaining())
            }
            return try owner()
        }
    }
}

/// One mutex per profile inside this process: the in-process half of `ProfileLock`.
final class ProfileMutex: @unchecked Sendable {
    static let shared = ProfileMutex()
    private var guardMutex = pthread_mutex_t()
    private var mutexes: [String: UnsafeMutablePointer<pthread_mutex_t>] = [:]

    init() { pthread_mutex_init(&guardMutex, nil) }

    func withLock<T>(_ key: String, _ body: () throws -> T) throws -> T {
        pthread_mutex_lock(&guardMutex)
        let m: UnsafeMutablePointer<pthread_mutex_t>
        if let existing = mutexes[key] { m = existing } else {
            m = .allocate(capacity: 1)
            pthread_mutex_init(m, nil)
            mutexes[key] = m
        }
        pthread_mutex_unlock(&guardMutex)
        pthread_mutex_lock(m)
        defer { pthread_mutex_unlock(m) }
        return try body()
    }
}
