import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Where a read puts what it reads: an array for what is not secret (age ciphertext), a
/// `SecretBytes` for what is (keys, passphrases, credentials on stdin or from Codex's file).
package protocol ReadBuffer: ~Copyable {
    var count: Int { get }
    var capacity: Int { get }
    /// Appends what `fill` writes into up to `maxCount` bytes of new room; `fill` returns how many.
    mutating func append(upTo maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows
}

extension SecretBytes: ReadBuffer {}

extension Array: ReadBuffer where Element == UInt8 {
    package mutating func append(upTo maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows {
        let start = count
        append(contentsOf: repeatElement(0, count: maxCount))
        var written = 0
        defer { removeLast(maxCount - written) }
        written = try withUnsafeMutableBytes { try fill(UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
    }
}

/// Small file-system helpers shared by the stores, the lock and the console.
public enum FileSystem {
    /// The checks a read of a secret file makes before reading (`AtomicFile.read`,
    /// `checkDirectory`), without opening it: a regular file (a directory with `directory`) of
    /// this user that group and others cannot access; a symlink counts as neither unless
    /// `follow`. Missing: `missingIsFine`. For the access cache, which answers without reading.
    public static func isPrivate(_ path: String, follow: Bool = false, directory: Bool = false, missingIsFine: Bool = false) -> Bool {
        var st = stat()
        guard (follow ? stat(path, &st) : lstat(path, &st)) == 0 else { return missingIsFine && errno == ENOENT }
        return st.st_mode & S_IFMT == (directory ? S_IFDIR : S_IFREG) && st.st_uid == geteuid() && st.st_mode & 0o077 == 0
    }

    /// The name of a directory entry `readdir(3)` returned, read where it lies. Never
    /// `entry.pointee.d_name`: that copies the declared 256 bytes, past the end of a shorter
    /// record, which faults when the record ends at the end of readdir's buffer and a page.
    public static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
    }

    /// strerror text for `code` (by default the current errno).
    public static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// read(2) from `fd` until end of file, straight into `buffer` (first into the room it
    /// already has, then 16 KiB at a time). Returns false, having stopped, as soon as more than
    /// `limit` bytes are in. Read errors other than EINTR throw `failure(errno)`.
    package static func readToEnd<B: ReadBuffer & ~Copyable>(_ fd: Int32, into buffer: inout B, limit: Int,
                                                            failure: (Int32) -> CredentialError) throws -> Bool {
        while true {
            let room = buffer.capacity > buffer.count ? buffer.capacity - buffer.count : 16384
            var n = 0, code: Int32 = 0
            buffer.append(upTo: max(1, min(room, limit + 1 - buffer.count))) { space in
                n = read(fd, space.baseAddress, space.count)
                if n < 0 { code = errno }
                return max(n, 0)
            }
            if n < 0 {
                if code == EINTR { continue }
                throw failure(code)
            }
            if n == 0 { return true }
            if buffer.count > limit { return false }
        }
    }

    /// Reads a small file (at most `limit` bytes; more is `badInput`), refusing symlinks-to-devices
    /// and anything that is not a regular file. The contents may be a credential (Codex's
    /// auth.json), so they go straight into `SecretBytes`.
    public static func readSmallFile(_ path: String, limit: Int) throws -> SecretBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw CredentialError.badInput("cannot read \(path): \(errorText(errno))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw CredentialError.badInput("\(path) is not a regular file") }
        guard Int(st.st_size) <= limit else { throw CredentialError.badInput("\(path) is larger than \(limit / 1024) KiB") }
        var data = SecretBytes(capacity: Int(st.st_size) + 1)
        guard try readToEnd(fd, into: &data, limit: limit, failure: { .badInput("cannot read \(path): \(errorText($0))") }) else {
            throw CredentialError.badInput("\(path) is larger than \(limit / 1024) KiB")
        }
        return data
    }
}
