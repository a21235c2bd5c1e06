import CredentialCore
import Secrets

/// The OAuth issuer's base URL: `CHATGPT_CREDENTIAL_ISSUER`, default `https://auth.openai.com`,
/// validated by the rule every token destination shares (`ServiceURL`: https, or http to a
/// loopback address; anything else is exit 2 before any network I/O).
public struct IssuerConfig: Equatable, Sendable {
    public let service: ServiceURL
    /// Scheme, authority and optional path, without a trailing slash.
    public var baseURL: String { service.baseURL }
    /// True for `http://` loopback issuers (test issuers); requests to them bypass proxies.
    public var isLoopback: Bool { service.isLoopback }

    public static let `default` = IssuerConfig(service: ServiceURL(validated: OAuthConstants.defaultIssuer, loopback: false))

    private init(service: ServiceURL) { self.service = service }

    public init(_ text: String) throws {
        service = try ServiceURL(text, variable: OAuthConstants.issuerEnvironmentVariable)
    }

    /// The issuer `CHATGPT_CREDENTIAL_ISSUER` names (nil: unset or empty, the default issuer).
    public init(setting text: String?) throws {
        if let text { try self.init(text) } else { self = .default }
    }

    /// The full URL of an endpoint path such as `/oauth/token`.
    public func url(_ path: String) -> String { service.url(path) }

    /// The redirect URI registered for the device flow (ISSUER + /deviceauth/callback).
    public var deviceRedirectURI: String { url(OAuthConstants.deviceRedirectPath) }
    public var deviceVerificationURL: String { url(OAuthConstants.deviceVerificationPath) }
}
