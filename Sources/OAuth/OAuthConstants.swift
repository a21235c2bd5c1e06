import CredentialCore
import Secrets

/// Every wire constant of the ChatGPT OAuth issuer, in one place
/// (values as the Codex CLI sends them; Tests/TestIssuer/test_issuer.py plays the other side).
public enum OAuthConstants {
    public static let defaultIssuer = "https://auth.openai.com"
    public static let issuerEnvironmentVariable = "CHATGPT_CREDENTIAL_ISSUER"
    /// Public client (no secret).
    public static let clientID = "app_EMoamEEZ73f0CkXaXp7hrann"
    public static let scope = "openid profile email offline_access"
    public static let originator = "chatgpt_credential"

    public static let authorizePath = "/oauth/authorize"
    public static let tokenPath = "/oauth/token"
    public static let revokePath = "/oauth/revoke"
    public static let deviceUserCodePath = "/api/accounts/deviceauth/usercode"
    public static let deviceTokenPath = "/api/accounts/deviceauth/token"
    /// The page where the person enters the device code.
    public static let deviceVerificationPath = "/codex/device"
    /// The device flow's code is exchanged with this redirect URI, under the issuer.
    public static let deviceRedirectPath = "/deviceauth/callback"

    /// The only loopback ports registered for the browser flow, in order of preference.
    public static let browserCallbackPorts: [Int] = [1455, 1457]
    public static let browserCallbackPath = "/auth/callback"
    public static func browserRedirectURI(port: Int) -> String { "http://localhost:\(port)\(browserCallbackPath)" }

    /// Device codes expire after this long; polling gives up then.
    public static let deviceCodeLifetime: Double = 15 * 60
    public static let defaultPollInterval = 5

    /// Refresh when the access token expires within this many seconds (or `--min-ttl`, if larger).

    /// The refresh token was spent already: by another program, perhaps one still saving its rotation.
    public static let refreshTokenReused = "refresh_token_reused"

    /// Permanent refresh failures: the person must sign in again.
    public static let permanentRefreshErrors: Set<String> = [
        "refresh_token_expired", "refresh_token_reused", "refresh_token_invalidated",
    ]

    /// Issuer responses larger than this are refused.
    public static let maxResponseBytes = 256 * 1024
    public static let connectTimeout: Double = 10
    public static let totalTimeout: Double = 30
    /// Revocation is best effort and bounded (man page, `erase`).
    public static let revokeTimeout: Double = 10
}
