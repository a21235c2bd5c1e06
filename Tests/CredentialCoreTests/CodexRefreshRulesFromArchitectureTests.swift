import Testing
@testable import CredentialCore
@testable import Secrets
import TestSupport

/// ARCHITECTURE.md, "Codex's refresh rules (for the codex sink)", applied to the `codex` sink at
/// every moment of `sink run`'s schedule (`SinkSchedule`), computed, not waited for.
@Suite struct CodexRefreshRulesFromArchitectureTests {
    static let day: Int64 = 86400

    /// What Codex reads from the sink's file at a moment: the access token's `exp` and `last_refresh`.
    struct CodexView {
        let exp: Int64?
        let lastRefresh: Int64?
    }

    /// Rules 1 and 2, the strictest of the versions: true when Codex would refresh (spend the empty
    /// refresh token) or find no token data.
    static func codexWouldRefresh(_ file: CodexView, now: Int64) -> Bool {
        guard let lastRefresh = file.lastRefresh else { return true } // rule 2: "Token data is not available"
        if let exp = file.exp, exp <= now + 5 * 60 { return true }     // rule 1, with the 5-minute window
        return lastRefresh < now - 8 * day                             // rule 1's 8 days (exp or not: older versions)
    }

    /// A JWT whose payload carries `exp`.
    static func jwt(exp: Int64) -> String {
        func b64(_ s: String) -> String {
            Base64.encode(Array(s.utf8), alphabet: .urlSafe, padded: false)
        }
        return b64(#"{"alg":"none"}"#) + "." + b64(#"{"exp":\#(exp),"https://api.openai.com/auth":{"chatgpt_account_id":"acct"}}"#) + ".sig"
    }

    /// What the codex sink's file says, read back as Codex reads it (its JSON, the JWT's `exp`).
    static func view(of document: TokenDocument) throws -> CodexView {
        let rendered = SinkRendering.render(.codex, document)?.unsafeString()
        let text = try #require(rendered)
        let json = try JSON.parse(text)
        let access = try #require(json["tokens"]?["access_token"]?.secretValue)
        let refresh = json["tokens"]?["refresh_token"]
        #expect(refresh?.secretValue?.isEmpty ?? (refresh?.stringValue == ""), "the codex sink holds a refresh token")
        let exp = JWTClaims.decode(access)?.expiresAt
        let last = json["last_refresh"]?.stringValue.flatMap(Clock.parseRFC3339)
        return CodexView(exp: exp, lastRefresh: last)
    }

    /// The credential as a refresh at `issued` leaves it, for tokens living `lifetime` seconds.
    static func issued(at t: Int64, lifetime: Int64) -> TokenDocument {
        var d = TokenDocument.fromTokens(accessToken: SecretToken(copying: jwt(exp: t + lifetime)), refreshToken: "rt",
                                         idToken: nil, expiresIn: lifetime, now: t)
        d.sinks = [SinkRecord(format: .codex, path: "/h/.codex/auth.json")]
        return d
    }

    /// Runs `sink run`'s schedule for 30 days: at each wake, a refresh when due (the file is
    /// rewritten at that moment); every minute in between, the file Codex would read is checked.
    @Test(arguments: [Int64(3600), Int64(10 * 86400)])
    func codexNeverWantsToRefreshTheSinkOverThirtyDays(lifetime: Int64) throws {
        let start: Int64 = 1_800_000_000
        var document = Self.issued(at: start, lifetime: lifetime)
        var now = start
        var wakes: [Int64] = []
        var refreshes = 0
        while now < start + 30 * Self.day {
            let due = SinkSchedule.due(expiresAt: document.expiresAt, issuedAt: document.lastRefresh, codex: true)
            let wake = SinkSchedule.nextWake(due: due, now: now)
            #expect(wake - now >= SinkSchedule.minimumSleep, "woke sooner than a minute after the last wake")
            // Every moment the file stands unchanged until that wake (minute by minute, and the last second).
            let file = try Self.view(of: document)
            var t = now
            while t < wake {
                #expect(!Self.codexWouldRefresh(file, now: t), "Codex would refresh at +\(t - start) s (lifetime \(lifetime) s)")
                if Self.codexWouldRefresh(file, now: t) { return }
                t += 60
            }
            #expect(!Self.codexWouldRefresh(file, now: wake - 1))
            now = wake
            wakes.append(wake)
            if wake >= SinkSchedule.due(expiresAt: document.expiresAt, issuedAt: document.lastRefresh, codex: true) {
                document = Self.issued(at: now, lifetime: lifetime)
                refreshes += 1
            }
        }
        // 1-hour tokens: one refresh every 50 min; 10-day tokens: one every 7 days (Codex's 8).
        let expected = lifetime == 3600 ? 30 * 24 * 60 / 50 : 30 / 7
        #expect(abs(refreshes - expected) <= 1, "\(refreshes) refreshes, about \(expected) expected")
        #expect(wakes.count <= 30 * 24 + refreshes, "\(wakes.count) wakes")
    }

    /// The check can fail: a schedule that waits for the token's own expiry, or for Codex's 8
    /// days, is caught.
    @Test func theCheckCatchesASinkLeftTooLong() throws {
        let start: Int64 = 1_800_000_000
        let shortLived = try Self.view(of: Self.issued(at: start, lifetime: 3600))
        #expect(shortLived.exp == start + 3600 && shortLived.lastRefresh == start)
        #expect(Self.codexWouldRefresh(shortLived, now: start + 3600 - 60))
        let noExp = CodexView(exp: nil, lastRefresh: start)
        #expect(Self.codexWouldRefresh(noExp, now: start + 8 * Self.day + 1))
        #expect(!Self.codexWouldRefresh(noExp, now: start + 7 * Self.day))
        #expect(Self.codexWouldRefresh(CodexView(exp: start + 10 * Self.day, lastRefresh: nil), now: start))
        #expect(Self.codexWouldRefresh(CodexView(exp: start + 10 * Self.day, lastRefresh: start), now: start + 8 * Self.day + 1))
    }

    @Test func theScheduleIsMax600sOrATenthBeforeExpiryAnd7DaysForCodex() {
        #expect(SinkSchedule.due(expiresAt: 3600, issuedAt: 0, codex: false) == 3000)
        #expect(SinkSchedule.due(expiresAt: 10 * Self.day, issuedAt: 0, codex: false) == 9 * Self.day)
        #expect(SinkSchedule.due(expiresAt: 10 * Self.day, issuedAt: 0, codex: true) == 7 * Self.day)
        #expect(SinkSchedule.nextWake(due: 0, now: 100) == 160)            // at most one wake a minute
        #expect(SinkSchedule.nextWake(due: 10 * Self.day, now: 0) == 3600) // at most an hour asleep
        #expect(SinkSchedule.nextWake(due: 0, now: 0, backoffUntil: 7200) == 7200)
    }
}
