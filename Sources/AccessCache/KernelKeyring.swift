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
    /// An entry's permissions (man page ACCESS CACHE, "Who can read it"): see, read, find and
    /// link for the OWNER (the user's uid) only, and nothing for a possessor, the group or others.
    /// Possession is a matter of keyrings, not users: a process of another user that kept this
    /// user's session keyring (a setuid program, setpriv without a new session) possesses the
    /// entry, and the kernel lets a possessor read whatever it may search (keyctl_read_key). With
    /// no possessor rights it can neither find nor read it. Nobody may change the payload, the
    /// permissions or the timeout once set (no write, no setattr).
    static let entryPermissions = CKEYRING_USR_VIEW | CKEYRING_USR_READ | CKEYRING_USR_SEARCH | CKEYRING_USR_LINK

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

    /// The serials a keyring links (KEYCTL_READ of a keyring), at most `limit` of them.
    static func list(_ keyring: Int32, limit: Int = 16384) -> Result<[Int32], Failure> {
        var buffer = [Int32](repeating: 0, count: 256)
        while true {
            let rc = buffer.withUnsafeMutableBytes { ckeyring_read(keyring, $0.baseAddress, $0.count) }
            if rc < 0 { return .failure(Failure(errno: errno)) }
            let count = Int(rc) / 4
            if count <= buffer.count { return .success(Array(buffer[0..<count])) }
            guard count <= limit else { return .failure(Failure(errno: E2BIG)) }
            buffer = [Int32](repeating: 0, count: count + 64) // grew meanwhile: once more, larger
        }
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
        // Parsed where the kernel wrote it: the broker describes an entry for every cached answer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4200) { buffer -> Result<Description, Failure> in
            let rc = ckeyring_describe(key, UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), buffer.count)
            if rc < 0 { return .failure(Failure(errno: errno)) }
            let text = UnsafeBufferPointer(rebasing: buffer[0..<min(Int(rc), buffer.count)]).prefix { $0 != 0 }
            let parts = text.split(separator: UInt8(ascii: ";"), maxSplits: 4, omittingEmptySubsequences: false)
            // The numbers are short: strings that small are made without the heap.
            func field(_ i: Int) -> String { String(decoding: parts[i], as: UTF8.self) }
            guard parts.count == 5, let uid = UInt32(field(1)), let gid = UInt32(field(2)),
                  let perm = UInt32(field(3), radix: 16) else { return .failure(Failure(errno: EINVAL)) }
            return .success(Description(type: field(0), uid: uid, gid: gid, permissions: perm, description: field(4)))
        }
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
