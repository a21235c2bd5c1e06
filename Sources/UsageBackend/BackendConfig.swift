import CredentialCore
import OAuth
import Secrets

/// The ChatGPT backend's base URL: `CHATGPT_CREDENTIAL_BACKEND`, default
/// `https://chatgpt.com/backend-api`. The same rule as the issuer (`ServiceURL`): https, or http
/// to a loopback address; anything else is exit 2 before any network I/O.
public struct BackendConfig: Equatable, Sendable {
    public static let defaultBaseURL = "https://chatgpt.com/backend-api"
    public static let environmentVariable = "CHATGPT_CREDENTIAL_BACKEND"

    public let service: ServiceURL
    public var baseURL: String { service.baseURL }
    /// True for `http://` loopback backends (test servers); requests to them bypass proxies.
    public var isLoopback: Bool { service.isLoopback }

    public static let `default` = BackendConfig(service: ServiceURL(validated: defaultBaseURL, loopback: false))

    private init(service: ServiceURL) { self.service = service }

    public init(_ text: String) throws {
        service = try ServiceURL(text, variable: Self.environmentVariable)
    }

    /// The backend `CHATGPT_CREDENTIAL_BACKEND` names (nil: unset or empty, the default backend).
    public init(setting text: String?) throws {
        if let text { try self.init(text) } else { self = .default }
    }

    public func url(_ path: String) -> String { service.url(path) }
}
