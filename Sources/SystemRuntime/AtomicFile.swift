import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// File primitives for secrets: reads that never follow a symlink and refuse loose permissions,
/// atomic replacement (temp file in the same directory, fsync, rename, fsync the directory) and
/// exclusive creation. Errors are `CredentialError`s of the store class (exit 5).
public enum AtomicFile {
    /// True when `mode` grants anything to group or others.
    static func isLoose(_ mode: mode_t) -> Bool { mode & 0o077 != 0 }

    /// The contents of the regular file at `path`, or nil when there is none. Refuses a symlink
    /// (unless `followSymlinks`), anything but a regular file, a file group/others may access, and
    /// a file longer than `maxBytes`. For contents that are not secret (age ciphertext).
    public static func read(_ path: String, maxBytes: Int, followSymlinks: Bool = false) throws -> [UInt8]? {
        var ignored = stat()
        return try read(path, maxBytes: maxBytes, followSymlinks: followSymlinks, stat: &ignored)
    }

    /// `read`, and the `fstat` of the very descriptor the contents came from in `st` (what a
    /// version of those bytes is made of: man page, THE ONE OWNER).
    public static func read(_ path: String, maxBytes: Int, followSymlinks: Bool = false, stat st: inout stat) throws -> [UInt8]? {
        try read(path, maxBytes: maxBytes, followSymlinks: followSymlinks, stat: &st) { size in
            var bytes: [UInt8] = []
            bytes.reserveCapacity(size)
            return bytes
        }
    }

    /// `read` for a file that holds a secret (the age identity, a passphrase): the contents go
    /// straight into `SecretBytes`, with no copy outside it.
    public static func readSecret(_ path: String, maxBytes: Int, followSymlinks: Bool = false) throws -> SecretBytes? {
        var ignored = stat()
        return try read(path, maxBytes: maxBytes, followSymlinks: followSymlinks, stat: &ignored) { SecretBytes(capacity: $0) }
    }

    /// Opens and checks the file, then reads it into the buffer `make` returns for the size fstat
    /// gave (plus one byte, so the end of file is seen without growing).
    private static func read<B: ReadBuffer & ~Copyable>(_ path: String, maxBytes: Int, followSymlinks: Bool,
                                                        stat st: inout stat, buffer make: (Int) -> B) throws -> B? {
        var flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK
        if !followSymlinks { flags |= O_NOFOLLOW }
        let fd = open(path, flags)
        if fd < 0 {
            let e = errno
            if e == ENOENT { return nil }
            if e == ELOOP { throw CredentialError.storeFailure("\(path) is a symbolic link; refusing to follow it (replace it with the file itself)") }
            throw CredentialError.storeFailure("cannot open \(path): \(FileSystem.errorText(e))")
        }
        defer { close(fd) }
        guard fstat(fd, &st) == 0 else { throw CredentialError.storeFailure("cannot stat \(path): \(FileSystem.errorText())") }
        try checkFile(st, path, owner: !followSymlinks)
        var out = make(min(max(Int(st.st_size), 0), maxBytes) + 1)
        let complete = try FileSystem.readToEnd(fd, into: &out, limit: maxBytes) {
            .storeFailure("cannot read \(path): \(FileSystem.errorText($0))")
        }
        guard complete else {
            throw CredentialError.storeCorrupt("\(path) is larger than any credential file (over \(maxBytes) bytes); remove it and sign in again")
        }
        return consume out
    }

    /// The checks of a file about to be read, on its status (fstat of the opened file in `read`;
    /// lstat in `checkFile(_:)`): a regular file, this user's when `owner` (another user's file is
    /// not ours to trust, whatever its mode; a symlink target of the passphrase file is the
    /// caller's choice, so only files read without following are checked), that group and others
    /// cannot access. The owner is asked before the mode, so that a foreign file is always refused
    /// as foreign (erase removes our own too-open file, never another user's).
    static func checkFile(_ st: stat, _ path: String, owner: Bool) throws {
        guard st.st_mode & S_IFMT == S_IFREG else { throw CredentialError.storeFailure("\(path) is not a regular file; remove it") }
        if owner { try checkOwner(st, path) }
        if isLoose(st.st_mode) { throw CredentialError.permissionsTooOpen(path: path) }
    }

    /// `read`'s checks without opening or reading the file (lstat: a symlink is refused as `read`
    /// refuses it): what `read` would throw for it before reading, false when there is none.
    @discardableResult
    public static func checkFile(_ path: String) throws -> Bool {
        try checkedFile(path) != nil
    }

    /// `checkFile`, returning the file's `lstat` when there is one.
    public static func checkedFile(_ path: String) throws -> stat? {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let e = errno
            if e == ENOENT { return nil }
            throw CredentialError.storeFailure("cannot access \(path): \(FileSystem.errorText(e))")
        }
        if st.st_mode & S_IFMT == S_IFLNK {
            throw CredentialError.storeFailure("\(path) is a symbolic link; refusing to follow it (replace it with the file itself)")
        }
        try checkFile(st, path, owner: true)
        return st
    }

    /// With `create`, makes `path` and any missing parents (new directories 0700). Then insists
    /// that `path` is a directory nobody but its owner can access (else `permissionsTooOpen`
    /// with a trailing "/"). Returns false when it does not exist and was not to be created.
    @discardableResult
    public static func checkDirectory(_ path: String, create: Bool) throws -> Bool {
        var st = stat()
        if stat(path, &st) != 0 {
            guard errno == ENOENT else { throw CredentialError.storeFailure("cannot access \(path): \(FileSystem.errorText())") }
            guard create else { return false }
            try makeDirectories(path)
            guard chmod(path, 0o700) == 0, stat(path, &st) == 0 else {
                throw CredentialError.storeFailure("cannot set up \(path): \(FileSystem.errorText())")
            }
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw CredentialError.storeFailure("\(path) is not a directory; remove it") }
        // Another user could swap files in a directory they own, whatever its mode.
        try checkOwner(st, path + "/")
        // The trailing slash tells the message this is a directory (chmod 700).
        if isLoose(st.st_mode) { throw CredentialError.permissionsTooOpen(path: path + "/") }
        return true
    }

    /// Refuses a file or directory that belongs to another user (root bypasses modes, so the
    /// owner is what tells another user's file apart).
    static func checkOwner(_ st: stat, _ path: String) throws {
        guard st.st_uid == ProcessUser.effectiveID else {
            throw CredentialError.storeFailure(
                "\(path) belongs to another user (uid \(st.st_uid)); refusing to use it: remove it, or run as its owner")
        }
    }

    /// Makes `path` and its missing parents, each new one 0700 (the file store's and a sink's).
    static func makeDirectories(_ path: String) throws {
        var prefix = ""
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw CredentialError.storeFailure("cannot create \(prefix): \(FileSystem.errorText())")
            }
        }
    }

    package static func split(_ path: String) -> (dir: String, base: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }

    static func fsyncDirectory(_ dir: String) throws {
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw CredentialError.storeFailure("cannot open \(dir): \(FileSystem.errorText())") }
        defer { close(fd) }
        if fsync(fd) != 0 && errno != EINVAL { throw CredentialError.storeFailure("cannot sync \(dir): \(FileSystem.errorText())") }
    }

    /// Creates a new 0600 temp file beside `path` (O_CREAT|O_EXCL|O_NOFOLLOW) and returns its
    /// descriptor and path; the caller writes, renames or unlinks it.
    private static func openTemp(beside path: String) throws -> (fd: Int32, tmp: String) {
        let (dir, base) = split(path)
        removeStaleTemps(in: dir, base: base)
        let tmp = "\(dir)/\(tempName(base: base, pid: getpid(), random: Sodium.random(6)))"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CredentialError.storeFailure("cannot create a file in \(dir): \(FileSystem.errorText())") }
        // umask can only clear bits, but make the mode exact whatever it is.
        guard fchmod(fd, 0o600) == 0 else {
            let e = errno
            close(fd); unlink(tmp)
            throw CredentialError.storeFailure("cannot set the mode of \(tmp): \(FileSystem.errorText(e))")
        }
        return (fd, tmp)
    }

    /// Writes all of `bytes` from offset 0, then fsyncs; 0 or the errno that stopped it.
    private static func writeAndSync(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(written))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            written += n
        }
        return fsync(fd) == 0 ? 0 : errno
    }

    /// `writeAndSync`, with an error that names `path` and asks for space in its directory.
    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, for path: String) throws {
        let e = writeAndSync(fd, bytes)
        guard e == 0 else {
            throw CredentialError.storeFailure("cannot write \(path): \(FileSystem.errorText(e)); check free space in \(split(path).dir)")
        }
    }

    /// Writes `bytes` to a new 0600 temp file beside `path` and fsyncs it. Returns the temp path;
    /// the caller renames or links it and must unlink it on failure.
    static func writeTemp(_ bytes: UnsafeRawBufferPointer, beside path: String) throws -> String {
        let (fd, tmp) = try openTemp(beside: path)
        defer { close(fd) }
        do { try writeAll(fd, bytes, for: path) } catch { unlink(tmp); throw error }
        return tmp
    }

    /// Room for one replacement of `path`, taken before anything irreversible happens (a refresh
    /// token is spent only once the rotated document is sure to fit): a temp file beside `path`
    /// already holding `bytes` bytes, fsynced, so the blocks are really allocated (on tmpfs too).
    /// `commit` overwrites it with the real content and renames it over `path`; dropped unused,
    /// it is unlinked.
    package final class Reservation {
        package let path: String
        package let size: Int
        private var fd: Int32
        private let tmp: String

        fileprivate init(path: String, size: Int, fd: Int32, tmp: String) {
            self.path = path; self.size = size; self.fd = fd; self.tmp = tmp
        }

        /// Replaces `path` with `bytes` through the reserved file (atomically, as `replace` does).
        package func commit(_ bytes: UnsafeRawBufferPointer) throws {
            guard fd >= 0 else { throw CredentialError.storeFailure("the reservation for \(path) was already used") }
            defer { close(fd); fd = -1 }
            do {
                try AtomicFile.writeAll(fd, bytes, for: path)
                guard ftruncate(fd, off_t(bytes.count)) == 0, fsync(fd) == 0 else {
                    throw CredentialError.storeFailure("cannot write \(path): \(FileSystem.errorText())")
                }
                guard rename(tmp, path) == 0 else {
                    throw CredentialError.storeFailure("cannot replace \(path): \(FileSystem.errorText())")
                }
            } catch {
                unlink(tmp)
                throw error
            }
            try AtomicFile.fsyncDirectory(AtomicFile.split(path).dir)
        }

        deinit {
            if fd >= 0 { close(fd); unlink(tmp) }
        }
    }

    /// Reserves room for a file of `bytes` bytes replacing `path` (see `Reservation`). Throws
    /// `storeFailure` saying how much to free where when the directory cannot take it.
    package static func reserve(beside path: String, bytes: Int) throws -> Reservation {
        let (fd, tmp) = try openTemp(beside: path)
        let e = [UInt8](repeating: 0, count: bytes).withUnsafeBytes { writeAndSync(fd, $0) }
        guard e == 0 else {
            close(fd); unlink(tmp)
            throw CredentialError.storeFailure("\(split(path).dir) cannot take the refreshed credential (\((bytes + 1023) / 1024) KiB): \(FileSystem.errorText(e)); free some space there")
        }
        return Reservation(path: path, size: bytes, fd: fd, tmp: tmp)
    }

    /// The temp file name beside `BASE`: `.BASE.tmp-PID-HEX`, HEX being the 6 random bytes as
    /// 12 lower-case hex digits.
    package static func tempName(base: String, pid: Int32, random: [UInt8]) -> String {
        ".\(base).tmp-\(pid)-" + Hex.encode(random)
    }

    /// The writer's PID when `name` is exactly a temp name of `base` (`tempName`), else nil.
    /// Nothing looser: another file whose name merely starts like one (another profile's file or
    /// temp file, e.g. profile `y.age.tmp-4000000-x` beside profile `y`) is never taken for one.
    /// HEX of 6 to 12 digits also matches the temp files of earlier versions (unpadded hex).
    package static func tempWriterPID(_ name: String, base: String) -> Int32? {
        let prefix = "." + base + ".tmp-"
        guard name.hasPrefix(prefix) else { return nil }
        let rest = Array(name.utf8.dropFirst(prefix.utf8.count))
        guard let dash = rest.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let pidDigits = rest[..<dash], hex = rest[(dash + 1)...]
        guard (1...10).contains(pidDigits.count), pidDigits.first != UInt8(ascii: "0"),
              pidDigits.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              (6...12).contains(hex.count),
              hex.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }),
              let pid = Int32(String(decoding: pidDigits, as: UTF8.self)), pid > 0 else { return nil }
        return pid
    }

    /// Removes `.BASE.tmp-PID-HEX` files in `dir` (exactly `tempName`'s format) left by a writer
    /// that was killed before it could rename or unlink them: only regular files of ours whose PID
    /// is no longer alive (a live writer's temp file is never touched). They hold ciphertext
    /// only, but should not pile up.
    static func removeStaleTemps(in dir: String, base: String) {
        guard let d = opendir(dir) else { return }
        defer { closedir(d) }
        while let entry = readdir(d) {
            let name = FileSystem.entryName(entry)
            guard let pid = tempWriterPID(name, base: base) else { continue }
            guard kill(pid, 0) != 0 && errno == ESRCH else { continue }
            var st = stat()
            let full = dir + "/" + name
            guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == ProcessUser.effectiveID else { continue }
            unlink(full)
        }
    }

    /// Atomically replaces `path` with `bytes` (mode 0600): readers see the old file or the new
    /// one, never a mix, and after a crash one of the two survives. On failure `path` is untouched
    /// and no temp file is left behind.
    public static func replace(_ path: String, with bytes: UnsafeRawBufferPointer) throws {
        let tmp = try writeTemp(bytes, beside: path)
        guard rename(tmp, path) == 0 else {
            let e = errno
            unlink(tmp)
            throw CredentialError.storeFailure("cannot replace \(path): \(FileSystem.errorText(e))")
        }
        try fsyncDirectory(split(path).dir)
    }

    /// Creates `path` holding `bytes` (mode 0600) only if nothing exists there yet, atomically:
    /// the file appears complete or not at all (written to a temp file, then hard-linked, which
    /// fails with EEXIST like O_EXCL). Returns false when another file was already there.
    public static func createExclusive(_ path: String, with bytes: UnsafeRawBufferPointer) throws -> Bool {
        let tmp = try writeTemp(bytes, beside: path)
        defer { unlink(tmp) }
        if link(tmp, path) != 0 {
            if errno == EEXIST { return false }
            throw CredentialError.storeFailure("cannot create \(path): \(FileSystem.errorText())")
        }
        try fsyncDirectory(split(path).dir)
        return true
    }

    /// Removes `path` (never following a symlink there); false when there was nothing.
    public static func remove(_ path: String) throws -> Bool {
        if unlink(path) != 0 {
            if errno == ENOENT { return false }
            throw CredentialError.storeFailure("cannot remove \(path): \(FileSystem.errorText())")
        }
        try fsyncDirectory(split(path).dir)
        return true
    }
}
