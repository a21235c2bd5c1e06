import Testing
@testable import OAuth
@testable import Transport
@testable import CredentialCore
@testable import Secrets
import TestSupport

/// What a scripted transport saw of one request. HTTPRequest is noncopyable (its body lives once,
/// in SecretBytes); a test double needs values it can keep in arrays and compare, so it records
/// this copy, body included. Only tests copy a body.
struct RecordedRequest {
    var method: String
    var url: String
    var headers: [HTTPHeader]
    var body: [UInt8]
    var connectTimeout: Double
    var totalTimeout: Double
    var maxResponseBytes: Int
    var bypassProxy: Bool

    init(_ r: borrowing HTTPRequest) {
        method = r.method
        url = r.url
        headers = r.headers
        // The secret header line ("Name: value\0", guarded memory) as an ordinary header: a test copy.
        let secretLine = r.secretHeader.unsafeString()
        if let colon = secretLine.firstIndex(of: ":") {
            headers.append(HTTPHeader(String(secretLine[..<colon]),
                                      String(secretLine[secretLine.index(colon, offsetBy: 2)...].dropLast())))
        }
        body = r.body.unsafeArray()
        connectTimeout = r.connectTimeout
        totalTimeout = r.totalTimeout
        maxResponseBytes = r.maxResponseBytes
        bypassProxy = r.bypassProxy
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A scripted answer: copyable, so scripts are arrays; each use makes a fresh HTTPResponse.
struct CannedResponse {
    var status: Int
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    init(status: Int, headers: [String: String] = [:], text: String = "") {
        self.status = status
        self.headers = headers
        body = Array(text.utf8)
    }
    func make() -> HTTPResponse { HTTPResponse(status: status, headers: headers, bytes: body) }
}

/// Answers requests from a script and records them. One outcome per request, in order; a request
/// beyond the script is a test failure (answered with 599 so it shows up).
final class ScriptedTransport: HTTPTransport {
    enum Outcome {
        case respond(CannedResponse)
        case fail(Error)
    }

    var script: [Outcome]
    private(set) var requests: [RecordedRequest] = []

    init(_ script: [Outcome]) { self.script = script }

    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse {
        requests.append(RecordedRequest(request))
        guard !script.isEmpty else {
            Issue.record("unexpected request \(request.method) \(request.url)")
            return HTTPResponse(status: 599)
        }
        switch script.removeFirst() {
        case .respond(let r): return r.make()
        case .fail(let e): throw e
        }
    }

    var bodies: [JSONValue] { requests.compactMap { try? JSON.parse($0.body) } }
}

extension ScriptedTransport.Outcome {
    static func json(_ status: Int, _ text: String, headers: [String: String] = [:]) -> Self {
        var h = headers
        if h["content-type"] == nil { h["content-type"] = "application/json" }
        return .respond(CannedResponse(status: status, headers: h, text: text))
    }
}

/// A fake monotonic clock that the recorded sleeps advance.
final class FakeTime {
    var now: Double = 1000
    var sleeps: [Double] = []
    func policy(maxAttempts: Int = 3, totalBudget: Double = 20, random: Double = 0.5) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, totalBudget: totalBudget,
                    sleep: { s in self.sleeps.append(s); self.now += s },
                    now: { self.now },
                    random: { random })
    }
}

let issuerURL = "https://auth.example.test"

func makeClient(_ script: [ScriptedTransport.Outcome], time: FakeTime = FakeTime(),
                policy: RetryPolicy? = nil) throws -> (IssuerClient, ScriptedTransport) {
    let t = ScriptedTransport(script)
    let client = IssuerClient(config: try IssuerConfig(issuerURL), transport: t, retry: policy ?? time.policy())
    return (client, t)
}

let goodAccess = "eyJhbGciOiJub25lIn0.eyJleHAiOjE3OTUwMDAwMDB9.c2ln"
let goodTokens = #"{"access_token":"\#(goodAccess)","refresh_token":"rt_new","id_token":"id.tok.en"}"#

@Suite struct IssuerConfigTests {
    @Test(arguments: [
        ("https://auth.openai.com", "https://auth.openai.com", false),
        ("https://auth.openai.com/", "https://auth.openai.com", false),
        ("HTTPS://Auth.Example.com:8443/base//", "https://auth.example.com:8443/base", false),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080", true),
        ("http://127.1.2.3", "http://127.1.2.3", true),
        ("http://localhost:1234/", "http://localhost:1234", true),
        ("http://LOCALHOST", "http://localhost", true),
        ("http://[::1]:9000", "http://[::1]:9000", true),
    ])
    func accepts(_ input: String, _ base: String, _ loopback: Bool) throws {
        let c = try IssuerConfig(input)
        #expect(c.baseURL == base)
        #expect(c.isLoopback == loopback)
        #expect(c.url("/oauth/token") == base + "/oauth/token")
    }

    @Test(arguments: [
        "http://example.com", "http://10.0.0.1", "http://192.168.1.1:80", "http://128.0.0.1",
        "http://localhost.evil.com", "http://127.0.0.1.nip.io", "http://127.1", "http://0177.0.0.1",
        "http://[::2]", "http://[::ffff:127.0.0.1]", "ftp://auth.openai.com", "auth.openai.com",
        "https://", "https://user@auth.openai.com", "https://auth.openai.com?x=1", "https://auth.openai.com#f",
        "https://auth openai.com", "https://auth.openai.com:0", "https://auth.openai.com:99999",
        "https://auth.openai.com\n", "http://127.0.0.1:", "javascript:alert(1)",
    ])
    func rejectsWithUsage(_ input: String) {
        #expect {
            try IssuerConfig(input)
        } throws: { error in
            guard let e = error as? CredentialError, case .usage = e else { return false }
            return e.exitCode == 2
        }
    }

    /// The setting as `CLI/Settings.swift` hands it over (empty is unset there: SettingsTests).
    @Test func setting() throws {
        #expect(try IssuerConfig(setting: nil) == .default)
        #expect(IssuerConfig.default.baseURL == "https://auth.openai.com")
        #expect(try IssuerConfig(setting: "http://127.0.0.1:5/").baseURL == "http://127.0.0.1:5")
        #expect(throws: CredentialError.usage("CHATGPT_CREDENTIAL_ISSUER='http://example.com' is not allowed: use https://, or http:// only to a loopback address (127.0.0.1, [::1], localhost)")) {
            try IssuerConfig(setting: "http://example.com")
        }
        #expect(IssuerConfig.default.deviceRedirectURI == "https://auth.openai.com/deviceauth/callback")
        // Where an address came from is said only when a variable overrides the default (issue 29).
        #expect(IssuerConfig.default.service.originNote(defaultURL: "https://auth.openai.com") == nil)
        #expect(try IssuerConfig(setting: "http://127.0.0.1:5").service.originNote(defaultURL: "https://auth.openai.com")
                == "set by CHATGPT_CREDENTIAL_ISSUER, overriding the default https://auth.openai.com")
    }

    @Test func rejectedValueIsSanitizedInMessage() {
        do {
            _ = try IssuerConfig("http://evil.example/\u{1b}[2J")
            Issue.record("accepted")
        } catch let e as CredentialError {
            #expect(!e.message.unicodeScalars.contains { $0.value == 0x1b })
        } catch { Issue.record("\(error)") }
    }
}

@Suite struct PKCETests {
    @Test func rfc7636AppendixB() {
        // The RFC's example verifier and its S256 challenge.
        #expect(PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    @Test func randomShapes() {
        let a = PKCE(), b = PKCE()
        #expect(a.verifier.count == 86) // 64 bytes, base64url, unpadded
        #expect(a.state.utf8.count == 43)    // 32 bytes
        #expect(a.verifier != b.verifier && a.state != b.state)
        #expect(a.challenge == PKCE.challenge(for: a.verifier))
        #expect(Base64.decode(a.verifier.unsafeString(), alphabet: .urlSafe, padding: .none)?.count == 64)
    }

    @Test func authorizeURL() throws {
        let client = IssuerClient(config: try IssuerConfig(issuerURL), transport: ScriptedTransport([]))
        let p = PKCE(verifier: "v", state: "s t")
        let url = client.authorizeURL(redirectURI: "http://localhost:1455/auth/callback", pkce: p)
        #expect(url.hasPrefix(issuerURL + "/oauth/authorize?response_type=code&client_id=app_EMoamEEZ73f0CkXaXp7hrann&"))
        #expect(url.contains("redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback"))
        #expect(url.contains("scope=openid%20profile%20email%20offline_access"))
        #expect(url.contains("code_challenge=\(p.challenge)&code_challenge_method=S256"))
        #expect(url.contains("state=s%20t"))
        #expect(url.contains("id_token_add_organizations=true") && url.contains("codex_cli_simplified_flow=true"))
    }
}

@Suite struct RefreshTests {
    @Test func rotatesAndSendsTheWireBody() throws {
        let (client, t) = try makeClient([.json(200, goodTokens)])
        #expect(client.refresh(refreshToken: "rt_old") ==
                .rotated(RefreshedTokens(accessToken: SecretToken(copying: goodAccess), refreshToken: "rt_new", idToken: "id.tok.en")))
        let r = try #require(t.requests.first)
        #expect(r.method == "POST" && r.url == issuerURL + "/oauth/token")
        #expect(r.header("content-type") == "application/json")
        #expect(t.bodies.first == .object([("client_id", .string(OAuthConstants.clientID)),
                                          ("grant_type", .string("refresh_token")),
                                          ("refresh_token", .secret("rt_old"))]))
        #expect(r.connectTimeout == 10 && r.totalTimeout == 30 && r.maxResponseBytes == 256 * 1024)
        #expect(!r.bypassProxy)
    }

    @Test func partialAnswerKeepsOptionals() throws {
        let (client, _) = try makeClient([.json(200, #"{"access_token":"\#(goodAccess)"}"#)])
        #expect(client.refresh(refreshToken: "x") == .rotated(RefreshedTokens(accessToken: SecretToken(copying: goodAccess), refreshToken: nil, idToken: nil)))
        let (c2, _) = try makeClient([.json(200, #"{"token_type":"Bearer"}"#)])
        guard case .unavailable = c2.refresh(refreshToken: "x") else { Issue.record("empty answer accepted"); return }
    }

    /// An access token whose expiry cannot be told (no `expires_in`, no JWT `exp`) with no new
    /// refresh token rotates nothing worth keeping: the answer is a temporary failure, so the
    /// stored token stays (printed while usable) and nothing expired is printed with exit 0.
    /// With a new refresh token it is a rotation all the same (the old one is spent).
    @Test func anAccessTokenWithoutAnExpiryAndNoNewRefreshTokenIsNotARotation() throws {
        for body in [#"{"access_token":"opaque"}"#, #"{"access_token":"opaque","expires_in":0}"#, #"{"access_token":"eyJhbGciOiJub25lIn0.e30.c2ln"}"#] {
            let (client, _) = try makeClient([.json(200, body)])
            guard case .unavailable(let reason, _) = client.refresh(refreshToken: "x") else { Issue.record("\(body) taken as a rotation"); continue }
            #expect(reason.contains("without an expiry"), "\(reason)")
        }
        let (timed, _) = try makeClient([.json(200, #"{"access_token":"opaque","expires_in":3600}"#)])
        #expect(timed.refresh(refreshToken: "x") == .rotated(RefreshedTokens(accessToken: "opaque", refreshToken: nil, idToken: nil, expiresIn: 3600)))
        let (rotating, _) = try makeClient([.json(200, #"{"access_token":"opaque","refresh_token":"rt_new"}"#)])
        #expect(rotating.refresh(refreshToken: "x") == .rotated(RefreshedTokens(accessToken: "opaque", refreshToken: "rt_new", idToken: nil)))
    }

    @Test(arguments: [
        (400, #"{"error":"refresh_token_reused"}"#, "refresh_token_reused"),
        (401, #"{"error":{"message":"Your session has ended. Please log in again.","type":"invalid_request_error","param":null,"code":"refresh_token_invalidated"}}"#, "refresh_token_invalidated"),
        (400, #"{"error":{"code":"refresh_token_reused"}}"#, "refresh_token_reused"),
        (401, #"{"error":{"code":"refresh_token_reused"}}"#, "refresh_token_reused"),
        (403, #"{"code":"refresh_token_expired","message":"expired"}"#, "refresh_token_expired"),
        (200, #"{"error":"refresh_token_expired"}"#, "refresh_token_expired"),
        (500, #"{"error":{"code":"refresh_token_invalidated"}}"#, "refresh_token_invalidated"),
        (401, #"{"error":{"code":"token_revoked"}}"#, "unauthorized"),
        (401, #"Unauthorized"#, "unauthorized"),
        (401, #"{}"#, "unauthorized"),
    ])
    func permanentFailures(_ status: Int, _ body: String, _ code: String) throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(status, body)], time: time)
        #expect(client.refresh(refreshToken: "rt") == .rejected(code: code))
        #expect(t.requests.count == 1, "a permanent failure is never retried")
        #expect(time.sleeps.isEmpty)
    }

    @Test func otherClientErrorsAreNotPermanent() throws {
        let (client, t) = try makeClient([.json(400, #"{"error":"invalid_request","error_description":"bad\u001b[2J"}"#)])
        guard case .unavailable(let reason, _) = client.refresh(refreshToken: "rt") else { Issue.record("not unavailable"); return }
        #expect(reason.contains("HTTP 400") && reason.contains("invalid_request"))
        #expect(!reason.unicodeScalars.contains { $0.value == 0x1b }, "vendor text is sanitized")
        #expect(t.requests.count == 1)
    }

    @Test func serverErrorsRetriedThenSucceed() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(500, "{}"), .json(502, "{}"), .json(200, goodTokens)], time: time)
        guard case .rotated = client.refresh(refreshToken: "rt") else { Issue.record("not rotated"); return }
        #expect(t.requests.count == 3)
        #expect(time.sleeps.count == 2)
        // exponential with jitter (random = 0.5 → 75 % of 1 s, then of 2 s)
        #expect(time.sleeps == [0.75, 1.5])
        #expect(t.requests[1].totalTimeout <= 30 && t.requests[2].totalTimeout <= 30)
    }

    @Test func serverErrorsExhaustRetries() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(500, "{}"), .json(503, "{}"), .json(500, "{}")], time: time)
        #expect(client.refresh(refreshToken: "rt") == .unavailable(reason: "the issuer is unavailable (HTTP 500)"))
        #expect(t.requests.count == 3)
        #expect(time.sleeps.count == 2)
    }

    @Test func retryAfterIsHonoured() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(429, "{}", headers: ["Retry-After": "7"]), .json(200, goodTokens)], time: time)
        guard case .rotated = client.refresh(refreshToken: "rt") else { Issue.record("not rotated"); return }
        #expect(time.sleeps == [7])
        #expect(t.requests.count == 2)
        // the retry's total timeout is cut to what is left of the 20 s budget
        #expect(t.requests[1].totalTimeout <= 13)
    }

    @Test func retryAfterBeyondTheBoundGivesUp() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(429, "{}", headers: ["Retry-After": "3600"])], time: time)
        #expect(client.refresh(refreshToken: "rt") == .unavailable(reason: "the issuer is rate limiting requests (HTTP 429)", retryAfter: 3600))
        #expect(time.sleeps.isEmpty)
        #expect(t.requests.count == 1)
    }

    @Test func networkErrorsRetriedWithinBudget() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.fail(TransportError(.connect, "refused")), .fail(TransportError(.timeout, "slow")),
                                          .json(200, goodTokens)], time: time)
        guard case .rotated = client.refresh(refreshToken: "rt") else { Issue.record("not rotated"); return }
        #expect(t.requests.count == 3)

        // A first attempt that already used the budget is not retried.
        let slow = FakeTime()
        let t2 = ScriptedTransport([.fail(TransportError(.timeout, "no answer in time"))])
        var p = slow.policy()
        p.now = { slow.now }
        let client2 = IssuerClient(config: try IssuerConfig(issuerURL), transport: SlowTransport(inner: t2, time: slow, cost: 30), retry: p)
        // The reason is bare: the caller's "could not refresh …; try again later" says it once.
        #expect(client2.refresh(refreshToken: "rt") == .unavailable(reason: "no answer in time"))
        #expect(t2.requests.count == 1)
        #expect(slow.sleeps.isEmpty)
    }

    @Test func nonTransientNetworkErrorsAreNotRetried() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.fail(TransportError(.tls, "certificate verify failed"))], time: time)
        guard case .unavailable(let reason, _) = client.refresh(refreshToken: "rt") else { Issue.record("wrong result"); return }
        #expect(reason.contains("certificate"))
        #expect(t.requests.count == 1)
        // and a plain CredentialError.temporary from a simple transport is retried
        let (c2, t2) = try makeClient([.fail(CredentialError.temporary("down")), .json(200, goodTokens)])
        guard case .rotated = c2.refresh(refreshToken: "rt") else { Issue.record("not rotated"); return }
        #expect(t2.requests.count == 2)
    }

    /// libcurl not installed (or a request refused before it was sent): nothing reached the issuer
    /// and waiting will not help, so it is a failure of its own, not a transient one to share.
    @Test func aLocalTransportProblemIsAFailureNotATransientOne() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.fail(TransportError(.unavailable, "cannot load libcurl.so.4 (install libcurl4)"))], time: time)
        #expect(client.refresh(refreshToken: "rt") == .failed(reason: "cannot load libcurl.so.4 (install libcurl4)"))
        #expect(t.requests.count == 1 && time.sleeps.isEmpty)
        #expect(TransportError(.unavailable, "x").credentialError == .failure("x"))
        #expect(TransportError(.connect, "x").credentialError == .temporary("x"))
    }

    @Test func htmlBodyIsAClearError() throws {
        let (client, _) = try makeClient([.respond(CannedResponse(status: 200, headers: ["Content-Type": "text/html"],
                                                                text: "<html><body>Just a moment</body></html>"))])
        guard case .unavailable(let reason, _) = client.refresh(refreshToken: "rt") else { Issue.record("accepted HTML"); return }
        #expect(reason.contains("HTML"))
        // HTML without a content type, too
        let (c2, _) = try makeClient([.respond(CannedResponse(status: 200, text: "  <!DOCTYPE html><html>"))])
        guard case .unavailable(let r2, _) = c2.refresh(refreshToken: "rt") else { Issue.record("accepted HTML"); return }
        #expect(r2.contains("HTML"))
    }

    @Test func hugeBodyIsRefused() throws {
        let big = #"{"access_token":""# + String(repeating: "a", count: 10 << 20) + #""}"#
        let (client, _) = try makeClient([.json(200, big)])
        guard case .unavailable(let reason, _) = client.refresh(refreshToken: "rt") else { Issue.record("accepted 10 MB"); return }
        #expect(reason.contains("larger than"))
        // The transport's own refusal maps to unavailable as well, without retries.
        let (c2, t2) = try makeClient([.fail(TransportError(.tooLarge, "response larger than 262144 bytes"))])
        guard case .unavailable = c2.refresh(refreshToken: "rt") else { Issue.record("wrong result"); return }
        #expect(t2.requests.count == 1)
    }

    @Test(arguments: [
        #"{"access_token":"abc\u001b[2Jdef","refresh_token":"rt2"}"#,
        #"{"access_token":"abc\ndef","refresh_token":"rt2"}"#,
        #"{"access_token":"abc","refresh_token":"rt\r\nX: y"}"#,
        #"{"access_token":"abc def","refresh_token":"rt2"}"#,
        #"{"access_token":"abc","refresh_token":"rt2","id_token":"\u00e9"}"#,
        #"{"access_token":"","refresh_token":"rt2"}"#,
    ])
    func unsafeTokensAreRejected(_ body: String) throws {
        let (client, _) = try makeClient([.json(200, body)])
        #expect(client.refresh(refreshToken: "rt") ==
                .unavailable(reason: "the issuer sent a token with unsafe characters; nothing was stored"))
    }

    @Test func notJSON() throws {
        let (client, _) = try makeClient([.json(200, "access_token=abc")])
        guard case .unavailable(let r, _) = client.refresh(refreshToken: "rt") else { Issue.record("accepted"); return }
        #expect(r.contains("not a JSON object"))
    }

    @Test func loopbackBypassesProxy() throws {
        let t = ScriptedTransport([.json(200, goodTokens)])
        let client = IssuerClient(config: try IssuerConfig("http://127.0.0.1:9"), transport: t, retry: .none)
        _ = client.refresh(refreshToken: "rt")
        #expect(t.requests.first?.bypassProxy == true)
        #expect(t.requests.first?.url == "http://127.0.0.1:9/oauth/token")
    }
}

/// Advances the fake clock by `cost` seconds per request (a slow network).
final class SlowTransport: HTTPTransport {
    let inner: ScriptedTransport
    let time: FakeTime
    let cost: Double
    init(inner: ScriptedTransport, time: FakeTime, cost: Double) { self.inner = inner; self.time = time; self.cost = cost }
    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse {
        time.now += cost
        return try inner.send(request)
    }
}

@Suite struct RetryPolicyTests {
    @Test func retryAfterParsing() {
        #expect(RetryPolicy.retryAfterSeconds("2") == 2)
        #expect(RetryPolicy.retryAfterSeconds(" 10 ") == 10)
        #expect(RetryPolicy.retryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT") == nil)
        #expect(RetryPolicy.retryAfterSeconds("-1") == nil)
        #expect(RetryPolicy.retryAfterSeconds(nil) == nil)
    }

    @Test func budgetBoundsTotalPauses() throws {
        let time = FakeTime()
        var p = time.policy(maxAttempts: 10, totalBudget: 5, random: 0.999)
        p.baseDelay = 2
        var calls = 0
        let status = try p.run { _ in calls += 1; return HTTPResponse(status: 503) }.status
        #expect(status == 503)
        #expect(time.sleeps.reduce(0, +) <= 5)
        #expect(calls < 10)
    }

    @Test func doesNotRetryClientErrors() throws {
        let time = FakeTime()
        var calls = 0
        let status = try time.policy().run { _ in calls += 1; return HTTPResponse(status: 404) }.status
        #expect(status == 404 && calls == 1 && time.sleeps.isEmpty)
    }
}

@Suite struct CodeExchangeTests {
    @Test func formBodyAndGrant() throws {
        let (client, t) = try makeClient([.json(200, goodTokens)])
        let grant = try client.exchangeCode(code: "ac 1", verifier: "ver", redirectURI: "http://localhost:1455/auth/callback")
        #expect(grant == TokenGrant(accessToken: SecretToken(copying: goodAccess), refreshToken: "rt_new", idToken: "id.tok.en"))
        let r = try #require(t.requests.first)
        #expect(r.header("content-type") == "application/x-www-form-urlencoded")
        let pairs = try #require(FormEncoding.decode(String(decoding: r.body, as: UTF8.self)))
        #expect(pairs.map { $0.0 } == ["grant_type", "code", "redirect_uri", "client_id", "code_verifier"])
        #expect(pairs.map { $0.1 } == ["authorization_code", "ac 1", "http://localhost:1455/auth/callback",
                                       OAuthConstants.clientID, "ver"])
    }

    @Test func refusalIsLoginFailed() throws {
        let (client, _) = try makeClient([.json(403, #"{"error":"unauthorized_client","error_description":"redirect_uri not registered"}"#)])
        #expect {
            try client.exchangeCode(code: "c", verifier: "v", redirectURI: "http://localhost:9999/auth/callback")
        } throws: { e in
            guard let e = e as? CredentialError, case .loginFailed(let m) = e else { return false }
            return m.contains("HTTP 403") && m.contains("redirect URI") && e.exitCode == 1
        }
    }

    @Test func outageIsTemporary() throws {
        let (client, _) = try makeClient([.json(503, "{}"), .json(503, "{}"), .json(503, "{}")])
        #expect(throws: CredentialError.temporary("the issuer is unavailable (HTTP 503)")) {
            try client.exchangeCode(code: "c", verifier: "v", redirectURI: "r")
        }
        let (c2, _) = try makeClient([.fail(TransportError(.tls, "bad cert"))])
        #expect(throws: CredentialError.temporary("bad cert")) {
            try c2.exchangeCode(code: "c", verifier: "v", redirectURI: "r")
        }
    }

    @Test func missingOrUnsafeTokens() throws {
        let (client, _) = try makeClient([.json(200, #"{"access_token":"a"}"#)])
        #expect(throws: CredentialError.loginFailed("the issuer's answer lacks an access or refresh token")) {
            try client.exchangeCode(code: "c", verifier: "v", redirectURI: "r")
        }
        let (c2, _) = try makeClient([.json(200, #"{"access_token":"a\u001b[2J","refresh_token":"r"}"#)])
        #expect(throws: CredentialError.loginFailed("the issuer sent a token with unsafe characters; nothing was stored")) {
            try c2.exchangeCode(code: "c", verifier: "v", redirectURI: "r")
        }
    }
}

@Suite struct DeviceFlowTests {
    @Test(arguments: [#""5""#, "5", "5.0"])
    func intervalAsStringOrNumber(_ interval: String) throws {
        let (client, t) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"ABCD-EFGH","interval":\#(interval)}"#)])
        let d = try client.requestDeviceCode(for: .default)
        #expect(d == DeviceCode(deviceAuthId: "da_1", userCode: "ABCD-EFGH", interval: 5,
                                verificationURL: issuerURL + "/codex/device"))
        #expect(t.requests.first?.url == issuerURL + "/api/accounts/deviceauth/usercode")
        #expect(t.bodies.first == .object([("client_id", .string(OAuthConstants.clientID))]))
    }

    @Test func usercodeSpellingAndIntervalBounds() throws {
        let (client, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","usercode":"XY-12","interval":"0"}"#)])
        let d = try client.requestDeviceCode(for: .default)
        #expect(d.userCode == "XY-12" && d.interval == 1)
        let (c2, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"XY-12"}"#)])
        #expect(try c2.requestDeviceCode(for: .default).interval == 5)
        let (c3, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"XY-12","interval":"soon"}"#)])
        #expect(try c3.requestDeviceCode(for: .default).interval == 5)
    }

    @Test func notEnabled() throws {
        let (client, _) = try makeClient([.json(404, #"{"error":{"code":"not_found"}}"#)])
        #expect(throws: CredentialError.loginFailed(IssuerClient.deviceNotEnabledMessage(.default))) { try client.requestDeviceCode(for: .default) }
    }

    @Test func unsafeUserCode() throws {
        let (client, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"\u001b]52;c;evil\u0007","interval":5}"#)])
        #expect(throws: CredentialError.loginFailed("the issuer sent a device code with unsafe characters")) { try client.requestDeviceCode(for: .default) }
    }

    @Test func pollOutcomes() throws {
        let device = DeviceCode(deviceAuthId: "da_1", userCode: "AB-CD", interval: 5, verificationURL: "")
        let (client, t) = try makeClient([
            .json(403, #"{"error":{"code":"deviceauth_authorization_pending"}}"#),
            .json(404, "{}"),
            .json(429, "{}"),
            .json(400, #"{"error":"slow_down"}"#),
            .json(403, #"{"error":{"code":"deviceauth_expired"}}"#),
            .json(410, "{}"),
            .json(403, #"{"error":{"code":"access_denied"}}"#),
            .json(200, #"{"authorization_code":"ac_1","code_challenge":"ch","code_verifier":"ver_1"}"#),
        ])
        #expect(try client.pollDeviceToken(device) == .pending)
        #expect(try client.pollDeviceToken(device) == .pending)
        #expect(try client.pollDeviceToken(device) == .slowDown)
        #expect(try client.pollDeviceToken(device) == .slowDown)
        #expect(try client.pollDeviceToken(device) == .expired)
        #expect(try client.pollDeviceToken(device) == .expired)
        #expect(try client.pollDeviceToken(device) == .denied(reason: "access_denied"))
        #expect(try client.pollDeviceToken(device) == .approved(authorizationCode: "ac_1", codeVerifier: "ver_1"))
        #expect(t.requests.allSatisfy { $0.url == issuerURL + "/api/accounts/deviceauth/token" })
        // device_auth_id travels as a secret (guarded memory), the user code as text.
        #expect(t.bodies.first == .object([("device_auth_id", .secret("da_1")), ("user_code", .string("AB-CD"))]))
    }

    @Test func pollIsNeverRetriedAndOutagesAreTemporary() throws {
        let device = DeviceCode(deviceAuthId: "da_1", userCode: "AB-CD", interval: 5, verificationURL: "")
        let time = FakeTime()
        let (client, t) = try makeClient([.json(502, "{}"), .fail(TransportError(.connect, "refused"))], time: time)
        #expect(throws: CredentialError.temporary("the issuer is unavailable (HTTP 502)")) { try client.pollDeviceToken(device) }
        #expect(throws: CredentialError.temporary("refused")) { try client.pollDeviceToken(device) }
        #expect(t.requests.count == 2 && time.sleeps.isEmpty)
    }

    /// An answer that is not JSON (a captive portal's page, a cut body) is temporary at every
    /// step of a sign-in, as it is for a refresh (exit 4, man page EXIT STATUS).
    @Test func anAnswerThatIsNotJSONIsTemporaryAtEveryStepOfASignIn() throws {
        let html = ScriptedTransport.Outcome.respond(CannedResponse(status: 200, headers: ["content-type": "text/html"], text: "<html>portal</html>"))
        let garbage = ScriptedTransport.Outcome.json(200, "{not json")
        let device = DeviceCode(deviceAuthId: "da_1", userCode: "AB-CD", interval: 5, verificationURL: "")
        for answer in [html, garbage] {
            let steps: [(String, (IssuerClient) throws -> Void)] = [
                ("device code", { _ = try $0.requestDeviceCode(for: .default) }),
                ("poll", { _ = try $0.pollDeviceToken(device) }),
                ("exchange", { _ = try $0.exchangeCode(code: "ac", verifier: "v", redirectURI: $0.config.deviceRedirectURI) }),
            ]
            for (step, call) in steps {
                let (client, _) = try makeClient([answer])
                let e = thrownCredentialError { try call(client) }
                #expect(e?.exitCode == 4, "\(step): \(String(describing: e))")
            }
        }
    }

    @Test func deviceExchangeUsesTheDeviceRedirect() throws {
        let (client, t) = try makeClient([.json(200, goodTokens)])
        _ = try client.exchangeCode(code: "ac", verifier: "v", redirectURI: client.config.deviceRedirectURI)
        let body = String(decoding: try #require(t.requests.first).body, as: UTF8.self)
        #expect(body.contains("redirect_uri=https%3A%2F%2Fauth.example.test%2Fdeviceauth%2Fcallback"))
    }
}

@Suite struct RevokeTests {
    @Test func bestEffortAndBounded() throws {
        let time = FakeTime()
        let (client, t) = try makeClient([.json(200, "{}"), .json(503, "{}"), .fail(TransportError(.timeout, "slow"))], time: time)
        #expect(client.revoke(refreshToken: "rt_1"))
        #expect(!client.revoke(refreshToken: "rt_1"))
        #expect(!client.revoke(refreshToken: "rt_1"))
        #expect(t.requests.count == 3 && time.sleeps.isEmpty)
        #expect(t.requests.allSatisfy { $0.totalTimeout <= 10 && $0.url == issuerURL + "/oauth/revoke" })
        #expect(t.bodies.first == .object([("token", .string("rt_1")), ("token_type_hint", .string("refresh_token")),
                                           ("client_id", .string(OAuthConstants.clientID))]))
    }
}

@Suite struct DeviceCodeExpiryTests {
    @Test func expiresInIsReadAndBounded() throws {
        let (c1, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"AB-CD","interval":5,"expires_in":"600"}"#)])
        #expect(try c1.requestDeviceCode(for: .default).expiresIn == 600)
        let (c2, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"AB-CD","interval":5,"expires_in":99999}"#)])
        #expect(try c2.requestDeviceCode(for: .default).expiresIn == 3600)
        let (c3, _) = try makeClient([.json(200, #"{"device_auth_id":"da_1","user_code":"AB-CD","interval":5}"#)])
        #expect(try c3.requestDeviceCode(for: .default).expiresIn == nil)
    }
}
