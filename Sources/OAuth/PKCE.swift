import CredentialCore
import Secrets
import CSodium

/// PKCE (RFC 7636, S256) and the `state` value for the browser flow, from libsodium's CSPRNG.
public struct PKCE: Equatable, Sendable {
    /// 64 random bytes, base64url without padding.
    public let verifier: String
    /// base64url(SHA-256(verifier)), no padding.
    public let challenge: String
    /// 32 random bytes, base64url without padding.
    public let state: String
    public let method = "S256"

    public init() {
        self.init(verifier: Self.randomURLSafe(bytes: 64), state: Self.randomURLSafe(bytes: 32))
    }

    public init(verifier: String, state: String) {
        self.verifier = verifier
        self.challenge = Self.challenge(for: verifier)
        self.state = state
    }

    public static func challenge(for verifier: String) -> String {
        Base64.encode(sha256(Array(verifier.utf8)), urlSafe: true, padded: false)
    }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        _ = sodium_init()
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = out.withUnsafeMutableBufferPointer { o in
            bytes.withUnsafeBufferPointer { i in
                crypto_hash_sha256(o.baseAddress!, i.baseAddress, UInt64(i.count))
            }
        }
        return out
    }

    public static func randomBytes(_ count: Int) -> [UInt8] {
        _ = sodium_init()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return out
    }

    public static func randomURLSafe(bytes: Int) -> String {
        Base64.encode(randomBytes(bytes), urlSafe: true, padded: false)
    }
}
