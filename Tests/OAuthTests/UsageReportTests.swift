import Testing
@testable import OAuth
@testable import UsageBackend
@testable import Transport
@testable import CredentialCore
@testable import Secrets
import TestSupport

/// The reader of the backend's usage answer: every field optional, unknown fields ignored, values
/// of the wrong type or out of range unknown (nil), strings sanitised and bounded.
@Suite struct UsageReportTests {
    static let now: Int64 = 1_800_000_000

    func parse(_ text: String) -> UsageReport? { UsageReport.parse(Array(text.utf8), now: Self.now) }

    @Test func realisticAnswer() throws {
        let r = try #require(parse("""
        {"plan_type":"plus",
         "rate_limit":{"allowed":true,"limit_reached":false,
           "primary_window":{"used_percent":42,"limit_window_seconds":18000,"reset_after_seconds":7380,"reset_at":1800007000},
           "secondary_window":{"used_percent":12.5,"limit_window_seconds":604800,"reset_after_seconds":367200,"reset_at":1800367200}},
         "credits":{"has_credits":true,"unlimited":false,"balance":"12.50","approx_local_messages":[1,2]},
         "additional_rate_limits":[{"limit_name":"GPT-5-Codex-Mini","metered_feature":"codex_mini",
           "rate_limit":{"allowed":true,"limit_reached":true,"primary_window":{"used_percent":100,"limit_window_seconds":18000,"reset_after_seconds":60}}}],
         "rate_limit_reached_type":null,"future":{"x":[1,2,3]}}
        """))
        #expect(r == UsageReport(
            plan: "plus",
            rateLimit: UsageLimit(allowed: true, limitReached: false, windows: [
                UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 42, resetsAt: Self.now + 7380),
                UsageWindow(role: .secondary, windowSeconds: 604800, usedPercent: 12.5, resetsAt: Self.now + 367200),
            ]),
            credits: UsageCredits(hasCredits: true, unlimited: false, balance: "12.50"),
            additional: [NamedUsageLimit(name: "GPT-5-Codex-Mini", meteredFeature: "codex_mini", limit: UsageLimit(
                allowed: true, limitReached: true,
                windows: [UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 100, resetsAt: Self.now + 60)]))]))
        #expect(r.hasWindows)
        #expect(r.additional[0].limit.isReached)
        #expect(r.rateLimit?.isReached == false)
    }

    @Test func emptyObjectHasNothing() throws {
        let r = try #require(parse("{}"))
        #expect(r == UsageReport())
        #expect(!r.hasWindows)
        // A limit without windows, and null windows, are no windows either.
        let nulls = try #require(parse(#"{"rate_limit":{"allowed":true,"primary_window":null},"credits":null,"additional_rate_limits":[]}"#))
        #expect(nulls == UsageReport(rateLimit: UsageLimit(allowed: true, limitReached: nil, windows: [])))
        #expect(!nulls.hasWindows)
    }

    @Test(arguments: ["", "[]", "[{}]", "\"plus\"", "42", "null", "{", #"{"plan_type":"plus""#, "<html>", "{} {}", #"{"a":1,"a":2}"#])
    func notAnObjectIsRefused(_ text: String) {
        #expect(parse(text) == nil)
    }

    @Test func oversizedBodyIsRefused() {
        let big = "{\"plan_type\":\"" + String(repeating: "a", count: UsageReport.maxBytes) + "\"}"
        #expect(UsageReport.parse(Array(big.utf8), now: Self.now) == nil)
    }

    /// One window's fields and what is made of them: each nonsense value is unknown on its own.
    @Test(arguments: [
        // wrong types
        (#"{"used_percent":"42","limit_window_seconds":"18000","reset_after_seconds":"60","reset_at":"soon"}"#, nil, nil, nil),
        (#"{"used_percent":true,"limit_window_seconds":[18000],"reset_after_seconds":{},"reset_at":null}"#, nil, nil, nil),
        // out of range
        (#"{"used_percent":-0.1,"limit_window_seconds":0,"reset_after_seconds":-1}"#, nil, nil, nil),
        (#"{"used_percent":100.01,"limit_window_seconds":-18000}"#, nil, nil, nil),
        (#"{"used_percent":1e308,"limit_window_seconds":1e308,"reset_after_seconds":1e308,"reset_at":1e308}"#, nil, nil, nil),
        (#"{"used_percent":-1e308,"limit_window_seconds":31622401,"reset_at":-1e308}"#, nil, nil, nil),
        // a reset further away than the window, or more than a day in the past / a year ahead
        (#"{"limit_window_seconds":18000,"reset_after_seconds":18001}"#, nil, 18000, nil),
        (#"{"reset_at":1799913599}"#, nil, nil, nil),
        (#"{"reset_at":1831622401}"#, nil, nil, nil),
        // the edges that are still plausible
        (#"{"used_percent":0,"limit_window_seconds":1,"reset_after_seconds":0}"#, 0, 1, 1_800_000_000),
        (#"{"used_percent":100,"limit_window_seconds":31622400,"reset_at":1799913600}"#, 100, 31622400, 1_799_913_600),
        (#"{"used_percent":99.5,"limit_window_seconds":18000.9,"reset_after_seconds":59.9}"#, 99.5, 18000, 1_800_000_059),
        // reset_after_seconds wins over reset_at; an implausible one falls back to reset_at
        (#"{"limit_window_seconds":18000,"reset_after_seconds":60,"reset_at":1800000500}"#, nil, 18000, 1_800_000_060),
        (#"{"limit_window_seconds":18000,"reset_after_seconds":-5,"reset_at":1800000500}"#, nil, 18000, 1_800_000_500),
    ] as [(String, Double?, Int64?, Int64?)])
    func windowValues(_ window: String, percent: Double?, seconds: Int64?, resetsAt: Int64?) throws {
        let r = try #require(parse(#"{"rate_limit":{"primary_window":\#(window)}}"#))
        #expect(r.rateLimit?.windows == [UsageWindow(role: .primary, windowSeconds: seconds, usedPercent: percent, resetsAt: resetsAt)])
        #expect(r.hasWindows) // reported, even when unknown
    }

    @Test func windowOfTheWrongTypeIsAnUnknownWindow() throws {
        let r = try #require(parse(#"{"rate_limit":{"primary_window":"5h","secondary_window":[42]}}"#))
        #expect(r.rateLimit?.windows == [UsageWindow(role: .primary), UsageWindow(role: .secondary)])
        #expect(r.rateLimit?.windows.allSatisfy(\.isUnknown) == true)
        // A rate_limit that is not an object is no limit at all; flags of the wrong type are unknown.
        #expect(try #require(parse(#"{"rate_limit":"none"}"#)).rateLimit == nil)
        #expect(try #require(parse(#"{"rate_limit":{"allowed":"yes","limit_reached":1}}"#)).rateLimit == UsageLimit())
    }

    @Test func vendorStringsAreSanitisedAndBounded() throws {
        let osc52 = "\\u001b]52;c;ZWNobyBwd25lZA==\\u0007"
        let r = try #require(parse("""
        {"plan_type":"pro\\u001b[31m\\r\\n\\u0085\\u202e",
         "credits":{"balance":"1\(osc52)2"},
         "additional_rate_limits":[
           {"limit_name":"evil\(osc52)\\u009b31m\\u2066x","metered_feature":"f\\u007f","rate_limit":{"primary_window":{"used_percent":1}}},
           {"limit_name":"\(String(repeating: "n", count: 200))"},
           {"limit_name":"\\u001b\\u0007","metered_feature":"codex_x"},
           {"limit_name":42},
           "not an object"]}
        """))
        #expect(r.plan == "pro[31m")
        #expect(r.credits?.balance == "1]52;c;ZWNobyBwd25lZA==2")
        #expect(r.additional.map(\.name) == ["evil]52;c;ZWNobyBwd25lZA==31mx", String(repeating: "n", count: 64) + "…", "codex_x", "additional limit"])
        #expect(r.additional[0].meteredFeature == "f")
        // An entry without rate_limit is kept with no windows (its name is all there is).
        #expect(r.additional[1].limit == UsageLimit())
        #expect(try #require(parse(#"{"plan_type":42}"#)).plan == nil)
        #expect(try #require(parse(#"{"plan_type":"  "}"#)).plan == nil)
    }

    @Test func additionalLimitsAreBoundedAndCodeReviewIsOne() throws {
        let many = (0..<40).map { #"{"limit_name":"l\#($0)","rate_limit":{"primary_window":{"used_percent":\#($0)}}}"# }.joined(separator: ",")
        let r = try #require(parse(#"{"additional_rate_limits":[\#(many)],"code_review_rate_limit":{"primary_window":{"used_percent":5}}}"#))
        #expect(r.additional.count == UsageReport.maxAdditional)
        #expect(r.additional.last?.name == "l15")
        let review = try #require(parse(#"{"code_review_rate_limit":{"primary_window":{"used_percent":5,"limit_window_seconds":604800}}}"#))
        #expect(review.additional == [NamedUsageLimit(name: "code review", limit: UsageLimit(windows: [UsageWindow(role: .primary, windowSeconds: 604800, usedPercent: 5)]))])
        #expect(review.hasWindows)
    }

    @Test func creditsBalanceAsStringOrNumber() throws {
        #expect(try #require(parse(#"{"credits":{"balance":5.39}}"#)).credits == UsageCredits(balance: "5.39"))
        #expect(try #require(parse(#"{"credits":{"balance":12}}"#)).credits == UsageCredits(balance: "12"))
        #expect(try #require(parse(#"{"credits":{"balance":1e300,"has_credits":"yes","unlimited":true}}"#)).credits == UsageCredits(unlimited: true))
        #expect(try #require(parse(#"{"credits":[]}"#)).credits == nil)
    }
}

/// The usage request: its headers, retries, and what each answer becomes.
@Suite struct UsageClientTests {
    static let token = "eyJhbGciOiJub25lIn0.eyJleHAiOjE3OTUwMDAwMDB9.c2ln"

    func client(_ script: [ScriptedTransport.Outcome], time: FakeTime = FakeTime(), base: String = "https://backend.example.test/backend-api") throws -> (UsageClient, ScriptedTransport) {
        let t = ScriptedTransport(script)
        return (UsageClient(config: try BackendConfig(base), transport: t, retry: time.policy(), userAgent: "chatgpt-credential/9.9.9"), t)
    }

    func fetch(_ c: UsageClient, account: String = "acct-1") throws -> UsageAnswer {
        try c.fetch(accessToken: SecretToken(copying: Self.token), accountId: account, profile: .default, now: { 1_800_000_000 })
    }

    @Test func requestCarriesTokenAccountAndUserAgent() throws {
        let (c, t) = try client([.json(200, #"{"plan_type":"pro"}"#)])
        #expect(try fetch(c) == .report(UsageReport(plan: "pro")))
        let r = try #require(t.requests.first)
        #expect(r.method == "GET")
        #expect(r.url == "https://backend.example.test/backend-api/wham/usage")
        #expect(r.body.isEmpty)
        #expect(r.header("Authorization") == "Bearer " + Self.token)
        #expect(r.header("ChatGPT-Account-Id") == "acct-1")
        #expect(r.header("User-Agent") == "chatgpt-credential/9.9.9")
        #expect(r.header("Accept") == "application/json")
        #expect(r.maxResponseBytes == UsageReport.maxBytes)
        #expect(r.connectTimeout == 10 && r.totalTimeout == 30)
        #expect(!r.bypassProxy)
        let (loop, lt) = try client([.json(200, "{}")], base: "http://127.0.0.1:9/backend-api")
        _ = try fetch(loop, account: "")
        #expect(lt.requests.first?.bypassProxy == true)
        #expect(lt.requests.first?.header("ChatGPT-Account-Id") == nil)
    }

    @Test func unauthorizedIsNotRetried() throws {
        let (c, t) = try client([.json(401, #"{"detail":"Could not validate your credentials"}"#)])
        #expect(try fetch(c) == .unauthorized)
        #expect(t.requests.count == 1)
    }

    @Test func serverErrorsAreRetriedWithinTheBudget() throws {
        let time = FakeTime()
        let (c, t) = try client([.json(500, "{}"), .json(502, "{}"), .json(200, #"{"plan_type":"team"}"#)], time: time)
        #expect(try fetch(c) == .report(UsageReport(plan: "team")))
        #expect(t.requests.count == 3)
        #expect(time.sleeps == [0.75, 1.5])
        // A retry's total timeout is cut to what is left of the budget.
        #expect(t.requests[2].totalTimeout <= 20 - 0.75 - 1.5)
    }

    @Test func persistentServerErrorIsTemporary() throws {
        let (c, t) = try client([.json(503, "{}"), .json(503, "{}"), .json(503, "{}")])
        #expect(throws: CredentialError.temporary("the ChatGPT backend is unavailable (HTTP 503)")) { try fetch(c) }
        #expect(t.requests.count == 3)
    }

    @Test func longRetryAfterIsNotWaitedFor() throws {
        let time = FakeTime()
        let (c, t) = try client([.json(429, "{}", headers: ["Retry-After": "120"])], time: time)
        #expect(throws: CredentialError.temporary("the ChatGPT backend is rate limiting usage requests (HTTP 429, retry after 120 s)")) { try fetch(c) }
        #expect(t.requests.count == 1)
        #expect(time.sleeps.isEmpty)
        // A short one is honoured.
        let time2 = FakeTime()
        let (c2, t2) = try client([.json(429, "{}", headers: ["Retry-After": "2"]), .json(200, "{}")], time: time2)
        #expect(try fetch(c2) == .report(UsageReport()))
        #expect(t2.requests.count == 2)
        #expect(time2.sleeps == [2])
    }

    @Test func networkFailureIsTemporaryAndTooLargeIsNotRetried() throws {
        let (c, t) = try client([.fail(TransportError(.connect, "cannot reach backend.example.test")),
                                 .fail(TransportError(.tooLarge, "backend.example.test sent a response larger than 1048576 bytes"))])
        #expect(throws: CredentialError.temporary("backend.example.test sent a response larger than 1048576 bytes")) { try fetch(c) }
        #expect(t.requests.count == 2)
    }

    @Test func unusableSuccessIsTemporary() throws {
        let (c, _) = try client([.respond(CannedResponse(status: 200, headers: ["content-type": "text/html"], text: "<html>Just a moment</html>"))])
        #expect(throws: CredentialError.temporary("the ChatGPT backend answered with an HTML page instead of JSON (HTTP 200); a proxy or captive portal may be in the way")) { try fetch(c) }
        let (c2, _) = try client([.json(200, #"{"plan_type":"plus""#)])
        #expect(throws: CredentialError.temporary("the ChatGPT backend's usage answer is not a JSON object (HTTP 200)")) { try fetch(c2) }
    }

    @Test func refusalIsFailureWithCleanVendorTextAndNoToken() throws {
        let (c, t) = try client([.json(403, #"{"detail":"token \#(Self.token) is not allowed\u001b[2J here"}"#)])
        #expect(throws: CredentialError.failure("the ChatGPT backend refused the usage request (HTTP 403: token [redacted] is not allowed[2J here)")) { try fetch(c) }
        #expect(t.requests.count == 1)
        let (c2, _) = try client([.respond(CannedResponse(status: 403, headers: ["content-type": "text/html"], text: "<html>bot check</html>"))])
        #expect(throws: CredentialError.failure("the ChatGPT backend refused the usage request (HTTP 403, an HTML page; a proxy, captive portal or bot check may be in the way)")) { try fetch(c2) }
    }

    @Test func unsafeTokenIsNeverSent() throws {
        let (c, t) = try client([])
        #expect(throws: CredentialError.storeCorrupt("the stored access token or account id contains characters a header cannot carry; sign in again: chatgpt-credential login")) {
            try c.fetch(accessToken: "tok\r\nX-Injected: 1", accountId: "acct", profile: .default, now: { 0 })
        }
        #expect(throws: CredentialError.storeCorrupt("the stored access token or account id contains characters a header cannot carry; sign in again: chatgpt-credential login")) {
            try c.fetch(accessToken: SecretToken(copying: Self.token), accountId: "acct\u{1b}[2J", profile: .default, now: { 0 })
        }
        #expect(t.requests.isEmpty)
    }
}

/// CHATGPT_CREDENTIAL_BACKEND goes through the issuer's rule (one implementation, `ServiceURL`).
@Suite struct BackendConfigTests {
    @Test func defaultAndLoopback() throws {
        #expect(try BackendConfig(setting: nil) == .default)
        #expect(BackendConfig.default.baseURL == "https://chatgpt.com/backend-api")
        #expect(BackendConfig.default.url(UsageClient.usagePath) == "https://chatgpt.com/backend-api/wham/usage")
        let local = try BackendConfig(setting: "http://127.0.0.1:5/backend-api/")
        #expect(local.baseURL == "http://127.0.0.1:5/backend-api")
        #expect(local.isLoopback)
        // That the issuer's variable does not leak into the backend's: SettingsTests.
    }

    @Test(arguments: ["http://chatgpt.com/backend-api", "http://10.0.0.1", "ftp://127.0.0.1", "https://u:p@chatgpt.com",
                      "https://chatgpt.com/backend-api?x=1", "http://127.0.0.1.evil.com", "https://chatgpt.com\u{1b}[2J"])
    func refusedLikeTheIssuer(_ url: String) {
        // A refused address is a usage error (exit 2), as the backend's below.
        #expect { try IssuerConfig(url) } throws: { error in
            guard case .usage = error as? CredentialError else { return false }
            return true
        }
        do {
            _ = try BackendConfig(url)
            Issue.record("accepted \(url)")
        } catch let e as CredentialError {
            guard case .usage(let m, _) = e else { Issue.record("\(e)"); return }
            #expect(e.exitCode == 2)
            #expect(m.hasPrefix("CHATGPT_CREDENTIAL_BACKEND='"), "\(m)")
            #expect(!m.unicodeScalars.contains { $0.value == 0x1b })
        } catch { Issue.record("\(error)") }
    }
}
