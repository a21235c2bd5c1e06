import CredentialCore
import Secrets

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
        Base64.encode(Sodium.sha256(Array(verifier.utf8)), alphabet: .urlSafe, padded: false)
    }

    public static func randomURLSafe(bytes: Int) -> String {
        Base64.encode(Sodium.random(bytes), alphabet: .urlSafe, padded: false)
    }
}
