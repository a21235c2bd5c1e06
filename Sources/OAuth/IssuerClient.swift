import CredentialCore
import Transport
import Secrets

/// The issuer's wire protocol, as the Codex CLI speaks it (Tests/TestIssuer/test_issuer.py plays
/// the issuer). Every response is bounded in size,
/// must be JSON, and every token in it must be printable ASCII without spaces (`Sanitize.isTokenSafe`);
/// vendor text is sanitized before it reaches a message. Methods throw only `CredentialError`.
public struct IssuerClient {
    public let config: IssuerConfig
    public let transport: HTTPTransport
    /// Used for the code exchange, the device-code request and the refresh. Polls and revocation
    /// are never retried (the poll loop and best effort cover those).
    public var retry: RetryPolicy
    public var connectTimeout: Double = OAuthConstants.connectTimeout
    public var totalTimeout: Double = OAuthConstants.totalTimeout
    public var revokeTimeout: Double = OAuthConstants.revokeTimeout
    public var maxResponseBytes: Int = OAuthConstants.maxResponseBytes

    public init(config: IssuerConfig, transport: HTTPTransport = CurlTransport(), retry: RetryPolicy = .standard) {
        self.config = config
        self.transport = transport
        self.retry = retry
    }

    /// What to do when the issuer has device-code sign-in off (404), naming `profile`'s command.
    public static func deviceNotEnabledMessage(_ profile: Profile) -> String {
        "device code sign-in is not enabled for this account: turn it on in ChatGPT Settings > Security "
            + "(or ask your workspace admin), or sign in with: \(profile.command("login --browser")) "
            + "(or --no-browser on a machine without one)"
    }

    // MARK: Browser flow

    /// The `/oauth/authorize` URL for the browser (PKCE) flow.
    public func authorizeURL(redirectURI: String, pkce: PKCE, originator: String = OAuthConstants.originator) -> String {
        let query: [(String, String)] = [
            ("response_type", "code"),
            ("client_id", OAuthConstants.clientID),
            ("redirect_uri", redirectURI),
            ("scope", OAuthConstants.scope),
            ("code_challenge", pkce.challenge),
            ("code_challenge_method", pkce.method),
            ("id_token_add_organizations", "true"),
            ("codex_cli_simplified_flow", "true"),
            ("state", pkce.state),
            ("originator", originator),
        ]
        return config.url(OAuthConstants.authorizePath) + "?" + FormEncoding.encode(query)
    }

    /// Exchanges an authorization code (browser or device flow) for tokens.
    /// Throws `.loginFailed` when the issuer refuses, `.temporary` when it cannot be reached.
    /// The code and verifier are tokens: the form body is built from their guarded bytes.
    public func exchangeCode(code: SecretToken, verifier: SecretToken, redirectURI: String) throws -> TokenGrant {
        let body = FormEncoding.encodeSecret([
            ("grant_type", .text("authorization_code")),
            ("code", .secret(code)),
            ("redirect_uri", .text(redirectURI)),
            ("client_id", .text(OAuthConstants.clientID)),
            ("code_verifier", .secret(verifier)),
        ])
        let answer = try send("POST", OAuthConstants.tokenPath, body: body,
                              contentType: "application/x-www-form-urlencoded", policy: retry)
        guard (200...299).contains(answer.status) else {
            if RetryPolicy.isRetryable(status: answer.status) { throw CredentialError.temporary(statusProblem(answer)) }
            var why = "the issuer refused the sign-in code (\(describe(answer, redacting: [code, verifier])))"
            if answer.status == 403 { why += "; the redirect URI may not be registered" }
            throw CredentialError.loginFailed(why)
        }
        let json = try requireJSON(answer)
        guard let access = json["access_token"]?.secretValue, let refresh = json["refresh_token"]?.secretValue else {
            throw CredentialError.loginFailed("the issuer's answer lacks an access or refresh token")
        }
        let id = json["id_token"]?.secretValue
        guard Sanitize.isTokenSafe(access), Sanitize.isTokenSafe(refresh), id.map(Sanitize.isTokenSafe) ?? true else {
            throw CredentialError.loginFailed("the issuer sent a token with unsafe characters; nothing was stored")
        }
        return TokenGrant(accessToken: access, refreshToken: refresh, idToken: id, expiresIn: Self.expiresIn(json))
    }

    // MARK: Device flow

    /// Starts a device-code sign-in for `profile`. Throws `.loginFailed(deviceNotEnabledMessage)` on 404.
    public func requestDeviceCode(for profile: Profile) throws -> DeviceCode {
        let body = JSON.serializeSecret(.object([("client_id", .string(OAuthConstants.clientID))]))
        let answer = try send("POST", OAuthConstants.deviceUserCodePath, body: body,
                              contentType: "application/json", policy: retry)
        if answer.status == 404 { throw CredentialError.loginFailed(Self.deviceNotEnabledMessage(profile)) }
        guard (200...299).contains(answer.status) else {
            if RetryPolicy.isRetryable(status: answer.status) { throw CredentialError.temporary(statusProblem(answer)) }
            throw CredentialError.loginFailed("the issuer refused to start a device sign-in (\(describe(answer)))")
        }
        let json = try requireJSON(answer)
        guard let id = json["device_auth_id"]?.secretValue,
              let code = json["user_code"]?.stringValue ?? json["usercode"]?.stringValue else {
            throw CredentialError.loginFailed("the issuer's device-code answer lacks device_auth_id or user_code")
        }
        guard Sanitize.isTokenSafe(id), Sanitize.isTokenSafe(code), code.utf8.count <= 64 else {
            throw CredentialError.loginFailed("the issuer sent a device code with unsafe characters")
        }
        // 1...60 s; a loopback (test) issuer may ask for 0 so tests need not wait.
        let interval = min(max(json["interval"]?.intValue ?? OAuthConstants.defaultPollInterval, config.isLoopback ? 0 : 1), 60)
        let expiresIn = json["expires_in"]?.intValue.map { min(max($0, 1), 3600) }
        return DeviceCode(deviceAuthId: id, userCode: code, interval: interval,
                          verificationURL: config.deviceVerificationURL, expiresIn: expiresIn)
    }

    /// One poll. Throws `.temporary` for 5xx and network errors (keep polling until the deadline),
    /// `.loginFailed` for an unexpected refusal.
    public func pollDeviceToken(_ device: DeviceCode) throws -> DevicePoll {
        let body = JSON.serializeSecret(.object([
            ("device_auth_id", .secret(device.deviceAuthId)),
            ("user_code", .string(device.userCode)),
        ]))
        let answer = try send("POST", OAuthConstants.deviceTokenPath, body: body,
                              contentType: "application/json", policy: .none)
        let json = try? answer.json.get()
        let code = json.flatMap { Self.errorCode($0) }
        switch answer.status {
        case 200...299:
            let json = try requireJSON(answer)
            guard let auth = json["authorization_code"]?.secretValue, let verifier = json["code_verifier"]?.secretValue else {
                throw CredentialError.loginFailed("the issuer's device answer lacks authorization_code or code_verifier")
            }
            guard Sanitize.isTokenSafe(auth), Sanitize.isTokenSafe(verifier) else {
                throw CredentialError.loginFailed("the issuer sent a code with unsafe characters")
            }
            return .approved(authorizationCode: auth, codeVerifier: verifier)
        case 410:
            return .expired
        case 429:
            return .slowDown
        default:
            if let code {
                switch code {
                case "slow_down", "deviceauth_slow_down": return .slowDown
                case "expired_token", "deviceauth_expired", "device_code_expired", "deviceauth_code_expired": return .expired
                case "access_denied", "deviceauth_denied", "authorization_declined": return .denied(reason: code)
                default: break
                }
            }
            if answer.status == 403 || answer.status == 404 { return .pending }
            if RetryPolicy.isRetryable(status: answer.status) { throw CredentialError.temporary(statusProblem(answer)) }
            throw CredentialError.loginFailed("the issuer refused the device sign-in (\(describe(answer)))")
        }
    }

    // MARK: Refresh and revoke

    /// Spends `refreshToken` for new tokens (JSON body, as Codex sends it). Never throws: every
    /// outcome is a `RefreshResult`. Retries transient failures per `retry`.
    public func refresh(refreshToken: SecretToken) -> RefreshResult {
        let body = JSON.serializeSecret(.object([
            ("client_id", .string(OAuthConstants.clientID)),
            ("grant_type", .string("refresh_token")),
            ("refresh_token", .secret(refreshToken)),
        ]))
        let answer: IssuerAnswer
        do {
            answer = try send("POST", OAuthConstants.tokenPath, body: body, contentType: "application/json",
                              policy: retry, isFinal: { Self.permanentRefreshError($0) != nil })
        } catch CredentialError.temporary(let why) {
            // The caller words it ("…; try again later") once.
            return .unavailable(reason: Self.redact(Sanitize.line(why), [refreshToken]))
        } catch CredentialError.failure(let why) {
            // Nothing reached the issuer and waiting will not help (libcurl is not installed).
            return .failed(reason: Self.redact(Sanitize.line(why), [refreshToken]))
        } catch let error as CredentialError {
            return .unavailable(reason: Self.redact(error.message, [refreshToken]))
        } catch {
            return .unavailable(reason: "the request to the issuer failed")
        }
        // A permanent error code wins whatever the status (a reuse has been seen as 400 and 401).
        if let code = Self.permanentRefreshError(answer) { return .rejected(code: code) }
        if (200...299).contains(answer.status) {
            let json: JSONValue
            switch answer.json {
            case .success(let j): json = j
            case .failure(let e): return .unavailable(reason: e.reason)
            }
            let access = json["access_token"]?.secretValue
            let refresh = json["refresh_token"]?.secretValue
            let id = json["id_token"]?.secretValue
            guard access != nil || refresh != nil || id != nil else {
                return .unavailable(reason: "the issuer's refresh answer holds no tokens")
            }
            for t in [access, refresh, id] {
                if let t, !Sanitize.isTokenSafe(t) {
                    return .unavailable(reason: "the issuer sent a token with unsafe characters; nothing was stored")
                }
            }
            let expiresIn = Self.expiresIn(json)
            // An access token whose worth cannot be told (no plausible expires_in, no JWT exp)
            // and no new refresh token: nothing was rotated worth keeping over what is stored.
            if let access, refresh == nil, !(expiresIn.map(TokenDocument.plausibleLifetime.contains) ?? false),
               (JWTClaims.decode(access)?.expiresAt ?? 0) <= 0 {
                return .unavailable(reason: "the issuer's refresh answer holds an access token without an expiry and no new refresh token; nothing was stored")
            }
            return .rotated(RefreshedTokens(accessToken: access, refreshToken: refresh, idToken: id, expiresIn: expiresIn))
        }
        if answer.status == 401 { return .rejected(code: "unauthorized") }
        if RetryPolicy.isRetryable(status: answer.status) {
            return .unavailable(reason: statusProblem(answer), retryAfter: RetryPolicy.retryAfterSeconds(answer.header("retry-after")))
        }
        // An issuer that echoes the request back must not get the refresh token into a message.
        return .unavailable(reason: "the issuer refused the refresh (\(describe(answer, redacting: [refreshToken])))")
    }

    /// Revokes a refresh token; best effort, one attempt, `revokeTimeout` seconds at most.
    /// Returns whether the issuer acknowledged it (2xx).
    @discardableResult
    public func revoke(refreshToken: SecretToken) -> Bool {
        let body = JSON.serializeSecret(.object([
            ("token", .secret(refreshToken)),
            ("token_type_hint", .string("refresh_token")),
            ("client_id", .string(OAuthConstants.clientID)),
        ]))
        let timeout = min(revokeTimeout, totalTimeout)
        guard let status = try? send("POST", OAuthConstants.revokePath, body: body, contentType: "application/json",
                                     policy: .none, connectTimeout: min(connectTimeout, timeout), totalTimeout: timeout).status
        else { return false }
        return (200...299).contains(status)
    }

    // MARK: Plumbing

    /// `expires_in` as whole seconds (a number or a numeric string), when present and sane.
    static func expiresIn(_ json: JSONValue) -> Int64? {
        guard let v = json["expires_in"] else { return nil }
        let n = v.intValue ?? v.stringValue.flatMap { Int($0) }
        return n.map(Int64.init)
    }

    /// `refresh_token_expired`/`_reused`/`_invalidated` when the answer carries one (read from
    /// the answer's one parse).
    private static func permanentRefreshError(_ answer: borrowing IssuerAnswer) -> String? {
        guard let json = try? answer.json.get(), let code = errorCode(json),
              OAuthConstants.permanentRefreshErrors.contains(code) else { return nil }
        return code
    }

    private func send(_ method: String, _ path: String, body: consuming SecretBytes, contentType: String, policy: RetryPolicy,
                      isFinal: (borrowing IssuerAnswer) -> Bool = { _ in false },
                      connectTimeout: Double? = nil, totalTimeout: Double? = nil) throws -> IssuerAnswer {
        // One request for every attempt: the body is never copied, only the timeouts change.
        var request = HTTPRequest(
            method: method, url: config.url(path),
            headers: [HTTPHeader("Content-Type", contentType), HTTPHeader("Accept", "application/json")],
            body: body, connectTimeout: connectTimeout ?? self.connectTimeout, totalTimeout: totalTimeout ?? self.totalTimeout,
            maxResponseBytes: maxResponseBytes, bypassProxy: config.isLoopback)
        request.addressOrigin = config.service.originNote(defaultURL: OAuthConstants.defaultIssuer)
        let limit = maxResponseBytes
        return try transport.send(&request, retrying: policy, reading: { IssuerAnswer($0, maxBytes: limit) },
                                  isFinal: isFinal, failure: "the request to the issuer failed")
    }

    struct BodyProblem: Error { let reason: String }

    /// A sign-in step's answer as JSON. One that is not (a captive portal's page, a cut body) is
    /// temporary, as for a refresh (man page EXIT STATUS).
    private func requireJSON(_ answer: borrowing IssuerAnswer) throws -> JSONValue {
        switch answer.json {
        case .success(let j): return j
        case .failure(let p): throw CredentialError.temporary("sign-in failed: \(p.reason)")
        }
    }

    /// The error code from `error` (a string), `error.code`, or a top-level `code`; sanitized,
    /// with every one of `secrets` cut out.
    package static func errorCode(_ json: JSONValue, redacting secrets: [SecretToken] = []) -> String? {
        let raw = json["error"]?.stringValue ?? json["error"]?["code"]?.stringValue ?? json["code"]?.stringValue
        guard let raw else { return nil }
        let clean = Sanitize.line(redact(Sanitize.line(raw, limit: Int.max), secrets), limit: 80)
        return clean.isEmpty ? nil : clean
    }

    /// The human-readable message from `error_description`, `error.message` or `message`; sanitized,
    /// with every one of `secrets` cut out.
    package static func errorMessage(_ json: JSONValue, redacting secrets: [SecretToken] = []) -> String? {
        let raw = json["error_description"]?.stringValue ?? json["error"]?["message"]?.stringValue ?? json["message"]?.stringValue
        guard let raw else { return nil }
        let clean = Sanitize.line(redact(Sanitize.line(raw, limit: Int.max), secrets), limit: 200)
        return clean.isEmpty ? nil : clean
    }

    /// `text` with every occurrence of each secret replaced by `[redacted]`. Applied after control
    /// bytes are stripped (so a token split by them is still found) and before any truncation (so
    /// no prefix of a token survives a cut).
    package static func redact(_ text: String, _ secrets: [SecretToken]) -> String {
        var out = text
        for secret in secrets where secret.count >= 8 {
            out = secret.cut(from: out, replacement: "[redacted]")
        }
        return out
    }

    private func statusProblem(_ answer: borrowing IssuerAnswer) -> String {
        answer.status == 429 ? "the issuer is rate limiting requests (HTTP 429)"
            : "the issuer is unavailable (HTTP \(answer.status))"
    }

    /// "HTTP 400: code: message", vendor text sanitized.
    private func describe(_ answer: borrowing IssuerAnswer, redacting secrets: [SecretToken] = []) -> String {
        var s = "HTTP \(answer.status)"
        if let json = try? answer.json.get() {
            if let c = Self.errorCode(json, redacting: secrets) { s += ": " + c }
            if let m = Self.errorMessage(json, redacting: secrets) { s += ": " + m }
        }
        return s
    }
}

/// One issuer answer, read once: its status, the headers the client uses, and its body parsed
/// ONCE — or why it is not a JSON object (too large, HTML, not JSON). The body becomes the
/// buffer of the answer's tokens: every `JSON.secretKeys` member is a range of it (no copy, no
/// String), and the retry loop's "is this final?", the permanent-error check and the tokens all
/// read this one parse. The buffer is wiped when the last token cut from it goes (at once when
/// nothing was).
struct IssuerAnswer: RetryableAnswer {
    let status: Int
    let headers: [String: String]
    let json: Result<JSONValue, IssuerClient.BodyProblem>

    init(_ response: consuming HTTPResponse, maxBytes: Int) {
        status = response.status
        headers = response.headers
        if response.body.count > maxBytes {
            json = .failure(.init(reason: "the issuer's answer is larger than \(maxBytes) bytes (HTTP \(status))"))
        } else if response.looksLikeHTML {
            json = .failure(.init(reason: "the issuer answered with an HTML page instead of JSON (HTTP \(status)); a proxy or captive portal may be in the way"))
        } else if let v = try? JSON.parse(sharing: SecretToken.Buffer(response.body), maxBytes: maxBytes), v.isObject {
            json = .success(v)
        } else {
            json = .failure(.init(reason: "the issuer's answer is not a JSON object (HTTP \(status))"))
        }
    }

    func header(_ name: String) -> String? { headers[name.lowercased()] }
}
