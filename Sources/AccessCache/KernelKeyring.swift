import Secrets
import CKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The key retention service calls the cache makes, with errno as a typed failure. Keys are
/// addressed by serial number; `user` is the only key type used.
enum KernelKeyring {
    struct Failure: Error, Equatable {
        let errno: Int32
        /// The call was refused outright (a seccomp filter, a container, an LSM), not failed:
        /// the cache is then off for the rest of the process.
        var isRefusal: Bool { errno == EPERM || errno == ENOSYS }
        /// No such key, or one that just expired or was revoked: an ordinary miss.
        var isAbsence: Bool { errno == ENOKEY || errno == EKEYEXPIRED || errno == EKEYREVOKED }
    }

    static let userKeyring = Int32(KEY_SPEC_USER_KEYRING)
    static let threadKeyring = Int32(KEY_SPEC_THREAD_KEYRING)
    /// Possessor only: nothing for the owner, the group or others (not even "view"), so only a
    /// process that reaches the key through its own keyrings can see or read it.
    static let possessorOnly = CKEYRING_POS_ALL

    private static func check(_ rc: Int) -> Result<Int, Failure> {
        rc >= 0 ? .success(rc) : .failure(Failure(errno: errno))
    }

    static func add(description: String, payload: borrowing SecretBytes, to keyring: Int32) -> Result<Int32, Failure> {
        payload.withUnsafeBytes { raw in
            check(Int(ckeyring_add("user", description, raw.baseAddress, raw.count, keyring))).map { Int32($0) }
        }
    }

    static func search(_ keyring: Int32, description: String) -> Result<Int32, Failure> {
        check(Int(ckeyring_search(keyring, "user", description))).map { Int32($0) }
    }

    /// The payload into `buffer`; its full length, which may exceed the buffer.
    static func read(_ key: Int32, into buffer: inout SecretBytes) -> Result<Int, Failure> {
        buffer.withUnsafeMutableBytes { raw in check(ckeyring_read(key, raw.baseAddress, raw.count)) }
    }

    struct Description: Equatable {
        var type: String
        var uid: UInt32
        var gid: UInt32
        var permissions: UInt32
        var description: String
    }

    /// KEYCTL_DESCRIBE parsed: `type;uid;gid;perm;description` (perm in hex).
    static func describe(_ key: Int32) -> Result<Description, Failure> {
        var buffer = [CChar](repeating: 0, count: 4200)
        let rc = buffer.withUnsafeMutableBufferPointer { ckeyring_describe(key, $0.baseAddress, $0.count) }
        if rc < 0 { return .failure(Failure(errno: errno)) }
        let n = min(Int(rc), buffer.count)
        let bytes = buffer[0..<n].map { UInt8(bitPattern: $0) }.prefix { $0 != 0 }
        let parts = bytes.split(separator: UInt8(ascii: ";"), maxSplits: 4, omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        guard parts.count == 5, let uid = UInt32(parts[1]), let gid = UInt32(parts[2]),
              let perm = UInt32(parts[3], radix: 16) else { return .failure(Failure(errno: EINVAL)) }
        return .success(Description(type: parts[0], uid: uid, gid: gid, permissions: perm, description: parts[4]))
    }

    static func setPermissions(_ key: Int32, _ permissions: UInt32) -> Result<Void, Failure> {
        check(Int(ckeyring_setperm(key, permissions))).map { _ in () }
    }

    static func setTimeout(_ key: Int32, seconds: UInt32) -> Result<Void, Failure> {
        check(Int(ckeyring_set_timeout(key, seconds))).map { _ in () }
    }

    static func link(_ key: Int32, into keyring: Int32) -> Result<Void, Failure> {
        check(Int(ckeyring_link(key, keyring))).map { _ in () }
    }

    static func unlink(_ key: Int32, from keyring: Int32) -> Result<Void, Failure> {
        check(Int(ckeyring_unlink(key, keyring))).map { _ in () }
    }

    static func invalidate(_ key: Int32) -> Result<Void, Failure> {
        check(Int(ckeyring_invalidate(key))).map { _ in () }
    }
}
