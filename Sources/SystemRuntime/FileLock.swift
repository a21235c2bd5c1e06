import CredentialCore
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

    /// Opens (creating) the lock file without locking it. Its directory is checked (and created)
    /// by `LockDirectory.open`; the file is opened relative to that checked directory, so nothing
    /// can be swapped in between. Throws `storeFailure` when it cannot be used: a FIFO, a
    /// symlink, a directory, no permission.
    public static func open(path: String) throws -> FileLock {
        let (dir, name) = AtomicFile.split(path)
        let dirFD = try LockDirectory.open(dir)
        defer { close(dirFD) }
        let fd = openat(dirFD, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
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

    /// What opening the file store's lock found (`openBesideStore`).
    public enum StoreLock {
        case opened(FileLock)
        /// The store's directory does not exist (and was not to be made): nothing is stored there.
        case noDirectory
        /// The lock file is not there and cannot be made (a read-only mount, a directory this
        /// process cannot write): `reason` is the system's word for it.
        case cannotCreate(directory: String, reason: String)
    }

    /// The file store's lock (man page FILES): `NAME.lock` in the real directory of the encrypted
    /// file, found from the directory itself — its real path, its inode — never from the uid, so
    /// every process that can change the file, in any user namespace and through any bind mount
    /// of the directory, locks the same file. `create`: make the store's directory (0700) when
    /// missing, as the store would. The directory must be a directory of this user (as this process
    /// sees it) that nobody else can write; the lock file a regular file of this user, never
    /// followed. An existing lock file is opened read-only where it cannot be written (flock(2)
    /// does not need write access), so a read-only mount of the directory still shares the lock.
    public static func openBesideStore(directory: String, name: String, create: Bool) throws -> StoreLock {
        var real = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        if realpath(directory, &real) == nil {
            guard errno == ENOENT else {
                throw CredentialError.storeFailure("cannot resolve \(directory): \(FileSystem.errorText(errno))")
            }
            guard create, (try? AtomicFile.checkDirectory(directory, create: true)) == true,
                  realpath(directory, &real) != nil else { return .noDirectory }
        }
        let dir = String(decoding: real.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let dirFD = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else {
            throw CredentialError.storeFailure("cannot open \(dir): \(FileSystem.errorText(errno))")
        }
        defer { close(dirFD) }
        var st = stat()
        guard fstat(dirFD, &st) == 0 else {
            throw CredentialError.storeFailure("cannot stat \(dir): \(FileSystem.errorText(errno))")
        }
        guard st.st_uid == ProcessUser.effectiveID else {
            throw CredentialError.storeFailure(
                "\(dir)/ belongs to another user (uid \(st.st_uid)); refusing to use it: remove it, or run as its owner")
        }
        // Whoever else may write the directory could swap the lock file.
        guard st.st_mode & 0o022 == 0 else { throw CredentialError.permissionsTooOpen(path: dir + "/") }
        let path = dir + "/" + name
        // A directory its owner made read-only is left as it is (root would otherwise write it).
        let writable = st.st_mode & 0o200 != 0
        var fd: Int32 = -1
        var why = EACCES
        if writable {
            fd = openat(dirFD, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
            if fd < 0 { why = errno }
        }
        if fd < 0 {
            guard why == EACCES || why == EROFS || why == EPERM || why == EDQUOT || why == ENOSPC else {
                throw CredentialError.storeFailure("cannot open the lock file \(path): \(FileSystem.errorText(why))")
            }
            fd = openat(dirFD, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            if fd < 0 {
                if errno == ENOENT { return .cannotCreate(directory: dir, reason: FileSystem.errorText(why)) }
                throw CredentialError.storeFailure("cannot open the lock file \(path): \(FileSystem.errorText(errno))")
            }
        }
        var lst = stat()
        guard fstat(fd, &lst) == 0, lst.st_mode & S_IFMT == S_IFREG, lst.st_uid == ProcessUser.effectiveID else {
            close(fd)
            throw CredentialError.storeFailure("the lock file \(path) is not a regular file of this user; remove it")
        }
        return .opened(FileLock(fd: fd, path: path))
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

/// The directory of the profile locks (man page FILES): `Paths.lockDirectory`. Its parent is
/// `/run/user/UID` or the shared, sticky `/tmp`, where another user may have created the name
/// first: so it is looked at with lstat (a symlink is never followed), must be a directory of
/// this user with no group or other permission bits, and anything else is refused (exit 5, one
/// line), never repaired: a chmod or a chown of something another user made would hand them the
/// lock. Only a directory this process has just created is set to 0700 (against a umask).
public enum LockDirectory {
    /// Creates `dir` (0700, the last component only) when missing, checks it, and returns an
    /// O_DIRECTORY descriptor of exactly what was checked.
    public static func open(_ dir: String) throws -> Int32 {
        if mkdir(dir, 0o700) == 0 {
            // Ours alone: created just now, in a parent where nobody else can replace it.
            chmod(dir, 0o700)
        } else if errno != EEXIST {
            throw CredentialError.storeFailure("cannot create the lock directory \(dir): \(FileSystem.errorText(errno))")
        }
        let fd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            if e == ELOOP || e == ENOTDIR {
                throw CredentialError.storeFailure("the lock directory \(dir) is not a directory (a symbolic link or a file); refusing to use it: remove it")
            }
            throw CredentialError.storeFailure("cannot open the lock directory \(dir): \(FileSystem.errorText(e))")
        }
        var st = stat()
        do {
            guard fstat(fd, &st) == 0 else {
                throw CredentialError.storeFailure("cannot stat the lock directory \(dir): \(FileSystem.errorText(errno))")
            }
            try check(st, dir)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Why a directory's stat fails the lock directory's rule (a directory, this user's, no
    /// group/other bits); `check` refuses it and `doctor` reports it.
    public enum Problem: Equatable, Sendable {
        case notADirectory
        case otherOwner(uid_t)
        case openToOthers(mode_t)
    }

    /// The rule alone: nil when `st` passes it.
    public static func problem(_ st: stat) -> Problem? {
        if st.st_mode & S_IFMT != S_IFDIR { return .notADirectory }
        if st.st_uid != ProcessUser.effectiveID { return .otherOwner(st.st_uid) }
        if st.st_mode & 0o077 != 0 { return .openToOthers(st.st_mode & 0o777) }
        return nil
    }

    static func check(_ st: stat, _ dir: String) throws {
        switch problem(st) {
        case nil: return
        case .notADirectory:
            throw CredentialError.storeFailure("the lock directory \(dir) is not a directory; refusing to use it: remove it")
        case .otherOwner(let uid):
            throw CredentialError.storeFailure(
                "the lock directory \(dir) belongs to another user (uid \(uid)); refusing to use it: have it removed, or run as its owner")
        case .openToOthers(let mode):
            throw CredentialError.storeFailure(
                "the lock directory \(dir) may be used by other users (mode \(String(mode, radix: 8))); refusing to use it: remove it")
        }
    }
}
