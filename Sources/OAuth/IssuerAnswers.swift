import CredentialCore
import Secrets

/// Tokens from a code exchange (`/oauth/token`, authorization_code grant).
public struct TokenGrant: Equatable, Sendable {
    public var accessToken: SecretToken
    public var refreshToken: SecretToken
    public var idToken: SecretToken?
    /// The answer's `expires_in` (seconds from receipt), when present.
    public var expiresIn: Int64?

    public init(accessToken: SecretToken, refreshToken: SecretToken, idToken: SecretToken? = nil, expiresIn: Int64? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresIn = expiresIn
    }
}

/// Tokens from a refresh: each field is optional ("keep what is absent"), at least one is present.
public struct RefreshedTokens: Equatable, Sendable {
    public var accessToken: SecretToken?
    public var refreshToken: SecretToken?
    public var idToken: SecretToken?
    /// The answer's `expires_in` (seconds from receipt), when present.
    public var expiresIn: Int64?

    public init(accessToken: SecretToken?, refreshToken: SecretToken?, idToken: SecretToken?, expiresIn: Int64? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresIn = expiresIn
    }
}

public enum RefreshResult: Equatable, Sendable {
    /// The issuer rotated the tokens; persist them before using them.
    case rotated(RefreshedTokens)
    /// Permanent: `refresh_token_expired`/`_reused`/`_invalidated` (whatever the status), or
    /// `unauthorized` for any other 401. The person must sign in again.
    case rejected(code: String)
    /// Transient: 5xx, 429, network errors (after retries), or an unusable answer. Try later;
    /// `retryAfter` is the issuer's own Retry-After (seconds), when it sent one.
    case unavailable(reason: String, retryAfter: Double? = nil)
    /// Nothing was sent and trying again later will not help (libcurl is not installed): the
    /// refresh token is unspent, nothing is shared with other processes.
    case failed(reason: String)
}

/// The start of a device-code sign-in.
public struct DeviceCode: Equatable, Sendable {
    /// With the user code, what polls for the sign-in's authorization code: a secret, never shown.
    public var deviceAuthId: SecretToken
    public var userCode: String
    /// Seconds between polls (the issuer sends it as a number or a string).
    public var interval: Int
    /// Where the person enters `userCode`.
    public var verificationURL: String
    /// Seconds until the code expires, when the issuer says (`expires_in`); else 15 minutes apply.
    public var expiresIn: Int?

    public init(deviceAuthId: SecretToken, userCode: String, interval: Int, verificationURL: String, expiresIn: Int? = nil) {
        self.deviceAuthId = deviceAuthId
        self.userCode = userCode
        self.interval = interval
        self.verificationURL = verificationURL
        self.expiresIn = expiresIn
    }
}

public enum DevicePoll: Equatable, Sendable {
    /// Not yet approved: poll again after `interval`.
    case pending
    /// The issuer asks for slower polling (429 or `slow_down`): add to the interval.
    case slowDown
    /// Approved: exchange `authorizationCode` with `codeVerifier` at ISSUER/deviceauth/callback.
    /// Both are tokens (`JSON.secretKeys`): guarded bytes from the answer, never Strings.
    case approved(authorizationCode: SecretToken, codeVerifier: SecretToken)
    /// The device code expired: start over.
    case expired
    /// The person (or the workspace) refused the sign-in.
    case denied(reason: String)
}
