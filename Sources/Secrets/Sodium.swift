import CSodium

/// libsodium's randomness, hashing and constant-time comparison.
public enum Sodium {
    /// sodium_init() once per process; a failure there means no usable RNG, which is fatal for us.
    public static let ready: Bool = sodium_init() >= 0

    public static func random(_ count: Int) -> [UInt8] {
        precondition(ready, "libsodium failed to initialise")
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        return out
    }

    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBufferPointer { d in
            _ = crypto_hash_sha256(&out, d.baseAddress, UInt64(d.count))
        }
        return out
    }

    /// Equal-length constant-time comparison.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }
}
