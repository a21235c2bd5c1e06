import CredentialCore
import Secrets

/// PKCE (RFC 7636, S256) and the `state` value for the browser flow, from libsodium's CSPRNG.
/// The verifier is a secret (with the code it buys the tokens): it is made, kept and sent from
/// guarded memory, never a String. The challenge and state go into the URL: ordinary text.
public struct PKCE: Equatable, Sendable {
    /// 64 random bytes, base64url without padding.
    public let verifier: SecretToken
    /// base64url(SHA-256(verifier)), no padding.
    public let challenge: String
    /// 32 random bytes, base64url without padding.
    public let state: String
    public let method = "S256"

    public init() {
        let random = SecretBytes(randomCount: 64)
        let verifier = random.withUnsafeBytes { Base64.encodeSecret($0, alphabet: .urlSafe, padded: false) }
        self.init(verifier: SecretToken(verifier), state: Self.randomURLSafe(bytes: 32))
    }

    public init(verifier: SecretToken, state: String) {
        self.verifier = verifier
        self.challenge = Self.challenge(for: verifier)
        self.state = state
    }

    public static func challenge(for verifier: SecretToken) -> String {
        Base64.encode(verifier.withUnsafeBytes { Sodium.sha256($0) }, alphabet: .urlSafe, padded: false)
    }

    public static func randomURLSafe(bytes: Int) -> String {
        Base64.encode(Sodium.random(bytes), alphabet: .urlSafe, padded: false)
    }
}
