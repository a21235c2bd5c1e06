import CSodium

/// libsodium's randomness, hashing and constant-time comparison: the one place each is called.
public enum Sodium {
    /// sodium_init() once per process; a failure there means no usable RNG, which is fatal for us.
    public static let ready: Bool = sodium_init() >= 0

    /// `count` random bytes for values that are not secret (nonces, salts, names). Secret
    /// randomness is `SecretBytes(randomCount:)`.
    public static func random(_ count: Int) -> [UInt8] {
        precondition(ready, "libsodium failed to initialise")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0 { randombytes_buf(buffer.baseAddress!, count) }
            initialized = count
        }
    }

    /// SHA-256 of `data`.
    public static func sha256(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(ready, "libsodium failed to initialise")
        return [UInt8](unsafeUninitializedCapacity: Int(crypto_hash_sha256_BYTES)) { out, initialized in
            _ = crypto_hash_sha256(out.baseAddress!, data.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(data.count))
            initialized = Int(crypto_hash_sha256_BYTES)
        }
    }

    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { sha256($0) }
    }

    /// Constant-time comparison (`sodium_memcmp`): the time depends on the lengths only, never
    /// on where the bytes differ. Different lengths are unequal.
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let pa = a.baseAddress, let pb = b.baseAddress, a.count > 0 else { return true }
        return sodium_memcmp(pa, pb, a.count) == 0
    }

    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in equal(x, y) } }
    }

    /// The UTF-8 of two strings, compared in constant time.
    public static func equal(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in b.withUTF8 { y in equal(UnsafeRawBufferPointer(x), UnsafeRawBufferPointer(y)) } }
    }
}
