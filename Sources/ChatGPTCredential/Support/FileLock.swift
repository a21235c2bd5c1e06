#if canImport(Glibc)
import Glibc
#endif

/// An exclusive per-profile lock across processes: `flock(2)` on a 0600 lock file. The kernel
/// drops it when the holder dies (even by SIGKILL), so a crashed refresh never wedges the profile.
public final class FileLock {
    private var fd: Int32

    private init(fd: Int32) { self.fd = fd }

    /// Waits up to `timeout` seconds; throws `lockTimeout` after that, `storeFailure` when the
    /// lock file cannot be opened (a FIFO, a symlink, a directory, no permission).
    public static func acquire(path: String, profile: Profile, timeout: Double) throws -> FileLock {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        try AtomicFile.checkDirectory(dir, create: true)
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            throw CredentialError.storeFailure("cannot open the lock file \(path): \(FileSystem.errorText(errno))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw CredentialError.storeFailure("the lock file \(path) is not a regular file; remove it")
        }
        if st.st_mode & 0o077 != 0 { fchmod(fd, 0o600) }
        // Int64(_:) traps on NaN and on huge values (CHATGPT_CREDENTIAL_LOCK_TIMEOUT=nan got here).
        let wait = timeout.isNaN ? 0 : min(max(timeout, 0), 86_400)
        let deadline = Clock.monotonicMillis() + Int64(wait * 1000)
        var pause: UInt32 = 5_000
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let e = errno
                close(fd)
                throw CredentialError.storeFailure("cannot lock \(path): \(FileSystem.errorText(e))")
            }
            if Clock.monotonicMillis() >= deadline {
                close(fd)
                throw CredentialError.lockTimeout(profile: profile.name)
            }
            usleep(pause + UInt32.random(in: 0...pause))
            pause = min(pause * 2, 50_000)
        }
        return FileLock(fd: fd)
    }

    public func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}

/// Small file-system helpers shared by the stores and the lock.
public enum FileSystem {
    public static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// Reads a small file (at most `limit` bytes; more is `badInput`), refusing symlinks-to-devices
    /// and anything that is not a regular file.
    public static func readSmallFile(_ path: String, limit: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw CredentialError.badInput("cannot read \(path): \(errorText(errno))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw CredentialError.badInput("\(path) is not a regular file") }
        guard Int(st.st_size) <= limit else { throw CredentialError.badInput("\(path) is larger than \(limit / 1024) KiB") }
        var data = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total <= limit {
            let n = data.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 { if errno == EINTR { continue }; throw CredentialError.badInput("cannot read \(path): \(errorText(errno))") }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw CredentialError.badInput("\(path) is larger than \(limit / 1024) KiB") }
        return Array(data[0..<total])
    }
}
