import CredentialCore
import OAuth
import Transport
import Secrets

/// What the backend said to a usage request.
public enum UsageAnswer: Equatable, Sendable {
    case report(UsageReport)
    /// HTTP 401: the backend refused this access token (the caller refreshes once and retries).
    case unauthorized
}

/// `GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage` (man page, `usage`; the answer as the Codex CLI
/// reads it). Bounded like `IssuerClient`: connect and total timeouts, a response size limit, no
/// redirects, retries of 5xx, 429 (a `Retry-After` of at most `retry.maxRetryAfter`) and network
/// errors within `retry`'s budget. Throws only `CredentialError`: `.temporary` (exit 4) for an
/// unreachable or failing backend and for an answer that is not a JSON object (a proxy, a captive
/// portal or an outage page, as with the issuer), `.failure` (exit 1) for any other refusal.
public struct UsageClient {
    public static let usagePath = "/wham/usage"

    public let config: BackendConfig
    public let transport: HTTPTransport
    public var retry: RetryPolicy
    /// `chatgpt-credential/VERSION`; the caller passes it (the version has one owner, the CLI).
    public var userAgent: String
    public var connectTimeout: Double = OAuthConstants.connectTimeout
    public var totalTimeout: Double = OAuthConstants.totalTimeout
    public var maxResponseBytes: Int = UsageReport.maxBytes

    public init(config: BackendConfig, transport: HTTPTransport = CurlTransport(), retry: RetryPolicy = .standard, userAgent: String) {
        self.config = config
        self.transport = transport
        self.retry = retry
        self.userAgent = userAgent
    }

    /// One usage request (with its retries) with `profile`'s access token. `now` (read when the
    /// answer has arrived) dates relative reset times.
    public func fetch(accessToken: SecretToken, accountId: String, profile: Profile, now: () -> Int64) throws -> UsageAnswer {
        guard let authorization = HTTPRequest.secretHeaderLine("Authorization", "Bearer ", accessToken),
              accountId.isEmpty || Sanitize.isTokenSafe(accountId) else {
            throw CredentialError.storeCorrupt("the stored access token or account id contains characters a header cannot carry; sign in again: \(profile.loginCommand)")
        }
        // The token's header line is built in guarded memory and wiped with the request.
        var headers = [HTTPHeader("Accept", "application/json"), HTTPHeader("User-Agent", Sanitize.line(userAgent, limit: 80))]
        if !accountId.isEmpty { headers.append(HTTPHeader("ChatGPT-Account-Id", accountId)) }
        var request = HTTPRequest(method: "GET", url: config.url(Self.usagePath), headers: headers, secretHeader: authorization,
                                  connectTimeout: connectTimeout, totalTimeout: totalTimeout,
                                  maxResponseBytes: maxResponseBytes, bypassProxy: config.isLoopback)
        request.addressOrigin = config.service.originNote(defaultURL: BackendConfig.defaultBaseURL)
        let response = try transport.send(&request, retrying: retry, failure: "the usage request to the ChatGPT backend failed")
        switch response.status {
        case 200...299:
            guard let report = UsageReport.parse(response.body, now: now()) else {
                throw CredentialError.temporary(Self.unusable(response))
            }
            return .report(report)
        case 401:
            return .unauthorized
        case 429:
            var why = "the ChatGPT backend is rate limiting usage requests (HTTP 429"
            if let ra = RetryPolicy.retryAfterSeconds(response.header("retry-after")) { why += ", retry after \(Int(ra)) s" }
            throw CredentialError.temporary(why + ")")
        case 500...599:
            throw CredentialError.temporary("the ChatGPT backend is unavailable (HTTP \(response.status))")
        default:
            throw CredentialError.failure("the ChatGPT backend refused the usage request (\(describe(response, redacting: accessToken)))")
        }
    }

    /// Why a 2xx body cannot be read, for the one-line error.
    static func unusable(_ response: borrowing HTTPResponse) -> String {
        if response.looksLikeHTML {
            return "the ChatGPT backend answered with an HTML page instead of JSON (HTTP \(response.status)); a proxy or captive portal may be in the way"
        }
        return "the ChatGPT backend's usage answer is not a JSON object (HTTP \(response.status))"
    }

    /// "HTTP 403: code: message", vendor text sanitised and the token cut out.
    func describe(_ response: borrowing HTTPResponse, redacting token: SecretToken) -> String {
        var s = "HTTP \(response.status)"
        if response.looksLikeHTML {
            return s + ", an HTML page; a proxy, captive portal or bot check may be in the way"
        }
        if response.body.count <= maxResponseBytes, let json = try? JSON.parse(response.body, maxBytes: maxResponseBytes), json.isObject {
            if let c = IssuerClient.errorCode(json, redacting: [token]) { s += ": " + c }
            if let m = IssuerClient.errorMessage(json, redacting: [token]) { s += ": " + m }
            // The backend also writes {"detail": "..."}.
            else if let d = json["detail"]?.stringValue {
                let clean = Sanitize.line(IssuerClient.redact(Sanitize.line(d, limit: Int.max), [token]), limit: 200)
                if !clean.isEmpty { s += ": " + clean }
            }
        }
        return s
    }
}
