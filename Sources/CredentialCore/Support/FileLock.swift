import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The per-profile lock across processes: `flock(2)` on a 0600 lock file. Refreshes hold it
/// exclusively; callers that find a refresh under way wait for a shared lock and then read what
/// it stored, all at once rather than one by one. The kernel drops a lock when its holder dies
/// (even by SIGKILL), so a crashed refresh never wedges the profile.
public final class FileLock {
    public enum Mode { case shared, exclusive }

    private var fd: Int32
    private let path: String

    private init(fd: Int32, path: String) { self.fd = fd; self.path = path }

    /// Opens (creating) the lock file without locking it. Throws `storeFailure` when it cannot be
    /// used: a FIFO, a symlink, a directory, no permission.
    public static func open(path: String) throws -> FileLock {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        try AtomicFile.checkDirectory(dir, create: true)
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            throw CredentialError.storeFailure("cannot open the lock file \(path): \(FileSystem.errorText(errno))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw CredentialError.storeFailure("the lock file \(path) is not a regular file; remove it")
        }
        if st.st_mode & 0o077 != 0 { fchmod(fd, 0o600) }
        return FileLock(fd: fd, path: path)
    }

    /// Opens the lock file and waits up to `timeout` seconds for the exclusive lock.
    public static func acquire(path: String, profile: Profile, timeout: Double) throws -> FileLock {
        let lock = try open(path: path)
        do { try lock.lock(.exclusive, profile: profile, timeout: timeout) } catch { lock.release(); throw error }
        return lock
    }

    /// One attempt; false when another holder is in the way.
    public func tryLock(_ mode: Mode) throws -> Bool {
        while true {
            if flock(fd, (mode == .exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 { return true }
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { return false }
            throw CredentialError.storeFailure("cannot lock \(path): \(FileSystem.errorText(errno))")
        }
    }

    /// Waits up to `timeout` seconds (NaN or negative: none); `lockTimeout` (exit 4) after that.
    /// Polls with short jittered pauses, so waiters notice a release within milliseconds.
    public func lock(_ mode: Mode, profile: Profile, timeout: Double) throws {
        // Int64(_:) traps on NaN and on huge values (CHATGPT_CREDENTIAL_LOCK_TIMEOUT=nan got here).
        let bounded = timeout.isNaN ? 0 : min(max(timeout, 0), 3600)
        let deadline = Clock.monotonicMillis() + Int64(bounded * 1000)
        var pause: UInt32 = 1_000
        while try !tryLock(mode) {
            if Clock.monotonicMillis() >= deadline { throw CredentialError.lockTimeout(profile: profile.name) }
            usleep(pause + UInt32.random(in: 0...pause))
            pause = min(pause * 2, 8_000)
        }
    }

    public func unlock() {
        if fd >= 0 { flock(fd, LOCK_UN) }
    }

    public func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
