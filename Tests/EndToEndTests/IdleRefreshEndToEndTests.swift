import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The idle rule, `refresh` and `status`'s last/next refresh (man page, REFRESH, `refresh`, KEEP
/// AN IDLE SIGN-IN ALIVE) through the built binary against the loopback test issuer, with the
/// file store and the kernel's access cache.
@Suite(.serialized) struct IdleRefreshEndToEndTests {
    static let day: Int64 = 86400
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    static func rfc3339(_ t: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(t)))
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// A file-store sandbox pointed at a fresh test issuer.
    static func sandbox() throws -> (Sandbox, TestIssuer) {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        return (s, issuer)
    }

    /// Seeds tokens valid for `expiresIn` and stores them in Codex's shape with the given last refresh.
    @discardableResult
    static func storeCodex(_ s: Sandbox, _ issuer: TestIssuer, profile: String, lastRefresh: Int64,
                           expiresIn: Int64 = 5 * day, refreshToken: String? = nil) throws -> TestIssuer.SeededTokens {
        let t = try issuer.seed(["expires_in": expiresIn])
        let input = #"{"tokens":{"id_token":"\#(t.idToken)","access_token":"\#(t.accessToken)","refresh_token":"\#(refreshToken ?? t.refreshToken)","account_id":"\#(t.accountId)"},"last_refresh":"\#(rfc3339(lastRefresh))"}"#
        let r = s.run(["--profile", profile, "store"], stdin: input)
        guard r.status == 0 else { throw Failure(description: "store failed (\(r.status)): \(r.stderr)") }
        return t
    }

    static func json(_ r: RunResult) throws -> [String: Any] {
        guard let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw Failure(description: "not a JSON object: \(r.stdout)")
        }
        return o
    }

    // MARK: the idle rule through get

    @Test func aCredentialLastRefreshedNineDaysAgoIsRefreshedExactlyOnce() throws {
        let (s, issuer) = try Self.sandbox()
        let t = try Self.storeCodex(s, issuer, profile: "idle", lastRefresh: Self.now - 9 * Self.day)
        let first = s.run(["--profile", "idle", "get"])
        #expect(first.status == 0, "get: \(first.stderr)")
        #expect(first.stdout != t.accessToken + "\n", "the 9-day-idle token was printed without a refresh")
        #expect(first.stderr.isEmpty, "stderr: \(first.stderr)")
        #expect(try issuer.counter("refresh_requests") == 1)
        #expect(try issuer.stats()["last_refresh_token_seen"] as? String == t.refreshToken)
        let second = s.run(["--profile", "idle", "get"])
        #expect(second.status == 0 && second.stdout == first.stdout)
        let third = s.run(["--profile", "idle", "--no-cache", "get"]) // from the store, not the cache
        #expect(third.status == 0 && third.stdout == first.stdout)
        #expect(try issuer.counter("refresh_requests") == 1, "the idle rule refreshed again")
        let stored = try #require(try s.storedDocument("idle"))
        let last = try #require(stored["last_refresh"] as? String)
        #expect(abs(try #require(ISO8601DateFormatter().date(from: last)).timeIntervalSince1970 - Double(Self.now)) < 60)
    }

    @Test func aCredentialLastRefreshedADayAgoIsLeftAlone() throws {
        let (s, issuer) = try Self.sandbox()
        let t = try Self.storeCodex(s, issuer, profile: "recent", lastRefresh: Self.now - Self.day)
        for args in [["get"], ["--no-cache", "get"], ["get"]] {
            let r = s.run(["--profile", "recent"] + args)
            #expect(r.status == 0 && r.stdout == t.accessToken + "\n", "\(args): \(r.status) \(r.stderr)")
        }
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    @Test func aCredentialStoredWithoutALastRefreshIsCountedFromTheStore() throws {
        let (s, issuer) = try Self.sandbox()
        let t = try s.storeSeeded(issuer, profile: "bare", ["expires_in": 5 * Self.day])
        var doc = try #require(try s.storedDocument("bare"))
        let storedAt = try #require(doc["stored_at"] as? String, "no stored_at in \(doc.keys.sorted())")
        #expect(abs(try #require(ISO8601DateFormatter().date(from: storedAt)).timeIntervalSince1970 - Double(Self.now)) < 60)
        let get = s.run(["--profile", "bare", "--no-cache", "get"])
        #expect(get.status == 0 && get.stdout == t.accessToken + "\n", "refreshed at once: \(get.stderr)")
        #expect(try issuer.counter("refresh_requests") == 0)
        let status = try Self.json(s.run(["--profile", "bare", "status", "--json"]))
        #expect(status["last_refresh"] is NSNull)
        #expect(status["stored_at"] as? String == storedAt)

        // The same document stored nine days ago: now the rule applies.
        doc["stored_at"] = Self.rfc3339(Self.now - 9 * Self.day)
        try s.writeDocument(doc, profile: "bare")
        let late = s.run(["--profile", "bare", "--no-cache", "get"])
        #expect(late.status == 0 && late.stdout != t.accessToken + "\n", "not refreshed: \(late.stderr)")
        #expect(try issuer.counter("refresh_requests") == 1)
        #expect(try s.storedDocument("bare")?["stored_at"] == nil, "stored_at kept after a refresh")
    }

    /// An entry of the access cache is not served once its credential turns idle: the entry is
    /// filled seconds before the 8 days are up and asked again after.
    @Test func theAccessCacheDoesNotHideTheIdleRule() throws {
        let (s, issuer) = try Self.sandbox()
        // Room for store, get and status on a loaded machine before the 8 days are up.
        let margin: Int64 = 15
        let start = Self.now
        let t = try Self.storeCodex(s, issuer, profile: "turning", lastRefresh: start - 8 * Self.day + margin)
        let warm = s.run(["--profile", "turning", "get"])
        #expect(warm.status == 0 && warm.stdout == t.accessToken + "\n", "\(warm.stderr)")
        let cached = try Self.json(s.run(["--profile", "turning", "status", "--json"]))
        #expect(cached["cached"] as? Bool == true, "the entry was not filled: \(cached)")
        #expect(Self.now < start + margin, "too slow to test: the credential turned idle before the entry was checked")
        // The fact waited for: the binary's own clock puts the credential past the idle rule's
        // day — its status, read from the store (not the entry), says the refresh is due.
        #expect(Hostile.waitUntil(Double(margin) + 30) {
            s.run(["--profile", "turning", "--no-cache", "status"]).stdout.contains("  next refresh:  at the next get\n")
        }, "the credential never turned idle")
        let after = s.run(["--profile", "turning", "get"])
        #expect(after.status == 0 && after.stdout != t.accessToken + "\n", "the cached token was served: \(after.stderr)")
        #expect(try issuer.counter("refresh_requests") == 1)
    }

    // MARK: refresh

    @Test func refreshAllIfIdleSevenRefreshesOnlyTheIdleOneAndReportsEachProfile() throws {
        let (s, issuer) = try Self.sandbox()
        let idle = try Self.storeCodex(s, issuer, profile: "a-idle", lastRefresh: Self.now - 9 * Self.day)
        let recent = try Self.storeCodex(s, issuer, profile: "b-recent", lastRefresh: Self.now - Self.day)
        // Idle too, but its refresh token is one the issuer never issued: rejected.
        try Self.storeCodex(s, issuer, profile: "c-rejected", lastRefresh: Self.now - 10 * Self.day, refreshToken: "rt-unknown-to-the-issuer")
        let r = s.run(["refresh", "--all", "--if-idle", "7"])
        #expect(r.status == 3, "exit \(r.status), expected 3 (the rejected profile): \(r.stderr)")
        #expect(r.stdout.isEmpty, "stdout: \(r.stdout)")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "lines: \(lines)")
        #expect(lines.contains { $0.hasPrefix("chatgpt-credential: profile 'a-idle': refreshed; the new access token is valid until ") })
        #expect(lines.contains { $0.hasPrefix("chatgpt-credential: profile 'b-recent': not idle (last refreshed 1 d 0 h ago, less than 7 d); skipped") })
        #expect(lines.contains { $0.hasPrefix("chatgpt-credential: profile 'c-rejected': error: the issuer rejected the refresh token (refresh_token_invalidated)") })
        #expect(try issuer.counter("refresh_requests") == 2)
        #expect(try issuer.counter("refresh_success") == 1)
        #expect(!r.allOutput.contains(idle.refreshToken) && !r.allOutput.contains(idle.accessToken))

        // The idle one holds rotated tokens, the recent one its own; neither asks the issuer now.
        let a = s.run(["--profile", "a-idle", "get"])
        #expect(a.status == 0 && a.stdout != idle.accessToken + "\n")
        let b = s.run(["--profile", "b-recent", "get"])
        #expect(b.status == 0 && b.stdout == recent.accessToken + "\n")
        #expect(try issuer.counter("refresh_requests") == 2)

        // Run again: nothing is idle now but the rejected one, which stays an error (no new request).
        let again = s.run(["refresh", "--all", "--if-idle", "7"])
        #expect(again.status == 3, "\(again.stderr)")
        #expect(again.stderr.contains("profile 'a-idle': not idle (last refreshed "), "\(again.stderr)")
        #expect(try issuer.counter("refresh_requests") == 2)
    }

    @Test func refreshOfOneProfileRefreshesWhateverTheAgeAndPrintsNothing() throws {
        let (s, issuer) = try Self.sandbox()
        let t = try Self.storeCodex(s, issuer, profile: "p", lastRefresh: Self.now - 3600)
        let r = s.run(["--profile", "p", "refresh"])
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.status) \(r.stderr)")
        #expect(r.stderr.hasPrefix("chatgpt-credential: profile 'p': refreshed;"))
        #expect(try issuer.counter("refresh_requests") == 1)
        let get = s.run(["--profile", "p", "get"])
        #expect(get.status == 0 && get.stdout != t.accessToken + "\n")
        #expect(try issuer.counter("refresh_requests") == 1)
    }

    @Test func refreshExitCodes() throws {
        let (s, issuer) = try Self.sandbox()
        for bad in ["0", "366", "x"] {
            let r = s.run(["refresh", "--all", "--if-idle", bad])
            #expect(r.status == 2, "--if-idle \(bad): exit \(r.status)")
            #expect(r.stderr == "chatgpt-credential: invalid value '\(bad)' for --if-idle: a number of days from 1 to 365 (see: chatgpt-credential --help)\n")
        }
        let missing = s.run(["--profile", "nobody", "refresh"])
        #expect(missing.status == 3, "\(missing.stderr)")
        #expect(missing.stderr.contains("profile 'nobody': error: profile 'nobody' is not signed in"))
        let none = s.run(["refresh", "--all"])
        #expect(none.status == 0 && none.stderr.contains("no profile is signed in"), "\(none.status) \(none.stderr)")
        // A transient failure is exit 4, not a silent success with the stored token.
        try Self.storeCodex(s, issuer, profile: "down", lastRefresh: Self.now - 9 * Self.day)
        _ = try issuer.configure(["faults": Array(repeating: ["status": 500], count: 20)])
        let down = s.run(["--profile", "down", "refresh"], timeout: 60)
        #expect(down.status == 4, "exit \(down.status): \(down.stderr)")
        #expect(down.stdout.isEmpty)
    }

    // MARK: status

    @Test func statusShowsTheSameLastAndNextRefreshFromTheStoreAndFromTheCache() throws {
        let (s, issuer) = try Self.sandbox()
        let last = Self.now - Self.day
        try Self.storeCodex(s, issuer, profile: "shown", lastRefresh: last, expiresIn: 10 * Self.day)
        let fromStore = try Self.json(s.run(["--profile", "shown", "--no-cache", "status", "--json"]))
        #expect(fromStore["cached"] == nil)
        #expect(fromStore["last_refresh"] as? String == Self.rfc3339(last))
        // The idle rule's day comes before the expiry less 300 s.
        #expect(fromStore["next_refresh"] as? String == Self.rfc3339(last + 8 * Self.day))
        #expect(s.run(["--profile", "shown", "get"]).status == 0) // fills the entry
        let fromCache = try Self.json(s.run(["--profile", "shown", "status", "--json"]))
        #expect(fromCache["cached"] as? Bool == true, "not answered from the cache: \(fromCache)")
        for key in ["last_refresh", "next_refresh", "expires_at", "email", "plan", "account_id", "signed_in"] {
            #expect("\(fromCache[key] ?? "absent")" == "\(fromStore[key] ?? "absent")", "\(key) differs")
        }
        // Text in local time with the zone (TZ=UTC0: `2026-12-06 14:03 UTC`), labels aligned (issue 29).
        let text = s.run(["--profile", "shown", "--no-cache", "status"], env: ["TZ": "UTC0"]).stdout
        let cachedText = s.run(["--profile", "shown", "status"], env: ["TZ": "UTC0"]).stdout
        func local(_ t: Int64) -> String { Self.rfc3339(t).prefix(16).replacingOccurrences(of: "T", with: " ") + " UTC" }
        #expect(text.contains("  refreshed:     \(local(last)) (1 d 0 h ago)\n"), "\(text)")
        #expect(text.contains("  next refresh:  \(local(last + 8 * Self.day)) (in 6 d 23 h)\n") ||
                text.contains("  next refresh:  \(local(last + 8 * Self.day)) (in 7 d 0 h)\n"), "\(text)")
        #expect(text == cachedText, "text differs from the cache's:\n\(text)\n\(cachedText)")
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    @Test func nextRefreshIsTheExpiryLessTheMarginWhenThatComesFirst() throws {
        let (s, issuer) = try Self.sandbox()
        let t = try Self.storeCodex(s, issuer, profile: "soon", lastRefresh: Self.now - 3600, expiresIn: 3600)
        let o = try Self.json(s.run(["--profile", "soon", "--no-cache", "status", "--json"]))
        #expect(o["next_refresh"] as? String == Self.rfc3339(t.expiresAt - 300), "\(o)")
    }
}

extension Sandbox {
    /// Replaces the profile's encrypted file with `document`, encrypted by the `age` tool to the
    /// sandbox's identity (as another program writing the store would).
    func writeDocument(_ document: [String: Any], profile: String) throws {
        let plain = try JSONSerialization.data(withJSONObject: document)
        let path = credentialPath(profile)
        let r = Harness.run("/usr/bin/age", ["-e", "-i", identityFile, "-o", path + ".new"], env: env, stdin: Array(plain))
        guard r.status == 0 else { throw IdleRefreshEndToEndTests.Failure(description: "age -e: \(r.stderr)") }
        chmod(path + ".new", 0o600)
        guard rename(path + ".new", path) == 0 else { throw IdleRefreshEndToEndTests.Failure(description: "rename failed") }
    }
}
