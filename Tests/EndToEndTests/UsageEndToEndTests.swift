import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `usage` through the built binary against the test issuer's `GET /backend-api/wham/usage`: the
/// windows as text and JSON, the token path (`get`'s, refresh first; one refresh and one retry on
/// a 401), failures and their exit codes, hostile answers, the backend URL rule, and how the
/// output looks on a terminal (a real pty) and off one.
@Suite(.serialized) struct UsageEndToEndTests {
    struct World {
        let sandbox: Sandbox
        let issuer: TestIssuer
        let tokens: TestIssuer.SeededTokens

        func usage(_ args: [String] = [], env: [String: String] = [:], timeout: Double = 60) -> RunResult {
            sandbox.run(["usage"] + args, env: env, timeout: timeout)
        }

        func counter(_ name: String) throws -> Int { try issuer.counter(name) }
        func last(_ name: String) throws -> String? { try issuer.stats()["last_" + name] as? String }
        func storedAccessToken(_ profile: String? = nil) throws -> String? {
            try sandbox.storedDocument(profile)?["access_token"] as? String
        }
    }

    /// A signed-in sandbox (file store) whose backend is the test issuer; local time is UTC.
    func world(_ seed: [String: Any] = [:]) throws -> World {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, seed)
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        s.env["TZ"] = "UTC"
        return World(sandbox: s, issuer: issuer, tokens: t)
    }

    static func now() -> Int { Int(Date().timeIntervalSince1970) }

    /// How the tool writes a local time (TZ=UTC here): `HH:MM` today, else `Www D Mon HH:MM`.
    static func clock(_ seconds: Int) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd"
        let date = Date(timeIntervalSince1970: TimeInterval(seconds))
        let sameDay = f.string(from: date) == f.string(from: Date())
        f.dateFormat = sameDay ? "HH:mm" : "EEE d MMM HH:mm"
        return f.string(from: date)
    }

    /// Both windows with absolute reset times, so two runs print the same lines.
    static func twoWindows(_ now: Int) -> [String: Any] {
        ["plan_type": "pro",
         "rate_limit": ["allowed": true, "limit_reached": false,
                        "primary_window": ["used_percent": 42, "limit_window_seconds": 18000, "reset_at": now + 7410],
                        "secondary_window": ["used_percent": 12.5, "limit_window_seconds": 604800, "reset_at": now + 367230]],
         "credits": ["has_credits": true, "unlimited": false, "balance": "12.50"]]
    }

    static func expectedTwoWindows(_ now: Int) -> String {
        """
        Plan: pro
        5 h       42 % used   resets \(clock(now + 7410)) (in 2 h 3 min)
        7 d     12.5 % used   resets \(clock(now + 367230)) (in 4 d 6 h)
        Credits: 12.50

        """
    }

    // MARK: what it shows

    @Test func bothWindowsWithPercentagesAndResetTimes() throws {
        let w = try world()
        let now = Self.now()
        try w.issuer.configure(["usage_body": Self.twoWindows(now)])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == Self.expectedTwoWindows(now))
        #expect(r.stderr.isEmpty)
        // The request: the stored token, its account, this tool's name and version.
        #expect(try w.last("usage_bearer") == w.tokens.accessToken)
        #expect(try w.last("usage_account_id") == w.tokens.accountId)
        let version = w.sandbox.run(["--version"]).stdout.split(separator: " ").last.map { String($0.dropLast()) } ?? "?"
        #expect(try w.last("usage_user_agent") == "chatgpt-credential/\(version)")
        #expect(try w.counter("usage_requests") == 1)
        #expect(try w.counter("refresh_requests") == 0) // the token was fresh
    }

    @Test func defaultAnswerShowsAdditionalLimitsUnderTheirNames() throws {
        let w = try world()
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(r.stdout)")
        #expect(lines[0] == "Plan: plus")
        #expect(lines[1].hasPrefix("5 h       42 % used   resets ") && lines[1].hasSuffix("(in 2 h 3 min)"), "\(lines[1])")
        #expect(lines[2].hasPrefix("7 d     12.5 % used   resets ") && lines[2].hasSuffix("(in 4 d 6 h)"), "\(lines[2])")
        #expect(lines[3] == "Credits: none")
        #expect(lines[4] == "GPT-5-Codex-Mini")
        #expect(lines[5].hasPrefix("  5 h      3 % used   resets ") && lines[5].hasSuffix("(in 1 h 0 min)"), "\(lines[5])")
    }

    @Test func jsonHasExactlyTheNormalisedFields() throws {
        let w = try world()
        let now = Self.now()
        let r = w.usage(["--json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("}\n") && r.stdout.filter { $0 == "\n" }.count == 1)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any])
        #expect(Set(o.keys) == ["plan", "allowed", "limit_reached", "windows", "credits", "additional_limits"])
        #expect(o["plan"] as? String == "plus")
        #expect(o["allowed"] as? Bool == true)
        #expect(o["limit_reached"] as? Bool == false)
        let windows = try #require(o["windows"] as? [[String: Any]])
        #expect(windows.count == 2)
        for window in windows { #expect(Set(window.keys) == ["name", "label", "window_seconds", "used_percent", "resets_at"]) }
        #expect(windows.map { $0["label"] as? String } == ["5h", "7d"])
        #expect(windows.map { $0["name"] as? String } == ["primary", "secondary"])
        #expect(windows.map { $0["window_seconds"] as? Int } == [18000, 604800])
        #expect(windows.map { $0["used_percent"] as? Double } == [42, 12.5])
        let iso = ISO8601DateFormatter()
        let resets = windows.compactMap { ($0["resets_at"] as? String).flatMap(iso.date) }.map { Int($0.timeIntervalSince1970) }
        #expect(resets.count == 2)
        #expect(abs(resets[0] - (now + 7410)) <= 5 && abs(resets[1] - (now + 367230)) <= 5, "\(resets) vs \(now)")
        #expect((windows[0]["resets_at"] as? String)?.hasSuffix("Z") == true)
        let credits = try #require(o["credits"] as? [String: Any])
        #expect(Set(credits.keys) == ["has_credits", "unlimited", "balance"])
        #expect(credits["has_credits"] as? Bool == false && credits["unlimited"] as? Bool == false && credits["balance"] as? String == "0")
        let extra = try #require(o["additional_limits"] as? [[String: Any]])
        #expect(extra.count == 1)
        #expect(Set(extra[0].keys) == ["name", "metered_feature", "allowed", "limit_reached", "windows"])
        #expect(extra[0]["name"] as? String == "GPT-5-Codex-Mini" && extra[0]["metered_feature"] as? String == "codex_mini")
        #expect((extra[0]["windows"] as? [[String: Any]])?.first?["used_percent"] as? Double == 3)
        for secret in w.tokens.secrets { #expect(!r.allOutput.contains(secret)) }
    }

    @Test func emptyAnswerSaysNoLimitsReported() throws {
        let w = try world()
        try w.issuer.configure(["usage_answer": "empty"])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Plan: plus\nno limits reported\n") // the plan from the token's claims
        #expect(r.stderr.isEmpty)
        let j = w.usage(["--json"])
        #expect(j.status == 0)
        #expect(j.stdout == #"{"plan":"plus","allowed":null,"limit_reached":null,"windows":[],"credits":null,"additional_limits":[]}"# + "\n")
    }

    // MARK: the token

    @Test func tokenInsideTheRefreshWindowIsRefreshedFirst() throws {
        let w = try world(["expires_in": 200])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try w.counter("refresh_requests") == 1)
        #expect(try w.counter("usage_requests") == 1)
        let stored = try #require(try w.storedAccessToken())
        #expect(stored != w.tokens.accessToken)
        #expect(try w.last("usage_bearer") == stored) // the new token, saved before it was used
        #expect(try w.counter("usage_unauthorized") == 0)
    }

    @Test func unauthorizedOnceMeansOneRefreshAndOneRetry() throws {
        let w = try world()
        try w.issuer.configure(["usage_faults": [["status": 401, "body": ["detail": "Could not validate your credentials"]]]])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("Plan: plus\n5 h "), "\(r.stdout)")
        #expect(try w.counter("refresh_requests") == 1)
        #expect(try w.counter("usage_requests") == 2)
        let stored = try #require(try w.storedAccessToken())
        #expect(stored != w.tokens.accessToken)
        #expect(try w.last("usage_bearer") == stored)
        #expect(try w.counter("refresh_reused") == 0)
    }

    /// The issuer's own check (no scripted fault): a stored account id that is not the token's
    /// family's gets a real 401; the refresh brings the right one and the retry passes.
    @Test func wrongAccountHeaderIsRefusedThenRefreshed() throws {
        let w = try world()
        let now = Self.now()
        try w.sandbox.plantDocument(["version": 1, "access_token": w.tokens.accessToken, "refresh_token": w.tokens.refreshToken,
                                     "id_token": w.tokens.idToken, "account_id": "acct-someone-else",
                                     "expires_at": now + 3000, "last_refresh": now], profile: "planted")
        let r = w.sandbox.run(["--profile", "planted", "usage"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try w.counter("usage_unauthorized") == 1)
        #expect(try w.counter("usage_ok") == 1)
        #expect(try w.counter("refresh_requests") == 1)
        #expect(try w.last("usage_account_id") == w.tokens.accountId)
    }

    @Test func refusedAgainAfterTheRefreshIsExit3() throws {
        let w = try world()
        try w.issuer.configure(["usage_fault_always": ["status": 401]])
        let r = w.usage()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("rejected the access token")
                && r.stderr.contains("chatgpt-credential --profile \(w.sandbox.profile) login"), "\(r.stderr)")
        #expect(try w.counter("refresh_requests") == 1) // one refresh, one retry, no more
        #expect(try w.counter("usage_requests") == 2)
        #expect(try w.sandbox.storedDocument()?["refresh_token"] as? String != nil) // kept
    }

    /// Another machine spent the refresh token: the backend refuses the stale access token (the
    /// issuer's real check), the refresh is rejected as reused: sign-in needed, no retry.
    @Test func unauthorizedWithASpentRefreshTokenIsExit3() throws {
        let w = try world()
        let (status, _) = try w.issuer.request("POST", "/oauth/token", json: [
            "grant_type": "refresh_token", "refresh_token": w.tokens.refreshToken, "client_id": "app_EMoamEEZ73f0CkXaXp7hrann"])
        #expect(status == 200)
        let r = w.usage()
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("refresh_token_reused") && r.stderr.contains("sign in again"), "\(r.stderr)")
        #expect(try w.counter("usage_unauthorized") == 1)
        #expect(try w.counter("usage_requests") == 1)
        #expect(try w.counter("refresh_reused") == 1)
    }

    @Test func notSignedInIsExit3WithoutARequest() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        // The default profile's wording (nothing is written, so the shared profile name is safe).
        let r = s.run(["usage"], env: ["CHATGPT_CREDENTIAL_ISSUER": issuer.url, "CHATGPT_CREDENTIAL_BACKEND": issuer.url + "/backend-api",
                                       "CHATGPT_CREDENTIAL_PROFILE": "default"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "chatgpt-credential: not signed in; run: chatgpt-credential login\n")
        #expect(try issuer.counter("usage_requests") == 0)
    }

    // MARK: failures

    @Test func serverErrorIsExit4WithinTheRetryBudget() throws {
        let w = try world()
        try w.issuer.configure(["usage_fault_always": ["status": 500]])
        let started = Date()
        let r = w.usage()
        let elapsed = Date().timeIntervalSince(started)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "chatgpt-credential: the ChatGPT backend is unavailable (HTTP 500); try again later\n")
        #expect(try w.counter("usage_requests") == 3) // RetryPolicy.standard: three attempts
        // Two pauses of 0.5-1 s and 1-2 s: about 1.5-3 s; the policy's budget is 20 s.
        #expect(elapsed >= 1.4 && elapsed < 10, "took \(elapsed) s")
        #expect(try w.counter("refresh_requests") == 0)
    }

    @Test func serverErrorsThatStopAreRetriedThrough() throws {
        let w = try world()
        try w.issuer.configure(["usage_faults": [["status": 503], ["status": 429, "retry_after": 1]]])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try w.counter("usage_requests") == 3)
        #expect(try w.counter("usage_ok") == 1)
    }

    @Test func longRetryAfterIsExit4AtOnce() throws {
        let w = try world()
        try w.issuer.configure(["usage_faults": [["status": 429, "retry_after": 3600]]])
        let started = Date()
        let r = w.usage()
        #expect(r.status == 4, "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stderr.contains("HTTP 429, retry after 3600 s"), "\(r.stderr)")
        #expect(try w.counter("usage_requests") == 1)
    }

    @Test func refusalOtherThan401IsExit1() throws {
        let w = try world()
        try w.issuer.configure(["usage_faults": [["status": 403, "body": ["detail": "Access denied\u{1b}[2J"]]]])
        let r = w.usage()
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr == "chatgpt-credential: the ChatGPT backend refused the usage request (HTTP 403: Access denied[2J)\n")
        #expect(try w.counter("refresh_requests") == 0)
    }

    // MARK: hostile and broken answers

    @Test func hostileNamesNeverReachTheTerminal() throws {
        let w = try world()
        try w.issuer.configure(["usage_answer": "hostile_names"])
        for args in [[], ["--json"]] {
            let r = w.usage(args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            #expect(Hostile.controlScalars(r.stdout).isEmpty, "\(args): \(Hostile.controlScalars(r.stdout))")
            #expect(Hostile.controlScalars(r.stderr).isEmpty)
        }
        let r = w.usage()
        #expect(r.stdout.contains("\nevil]52;c;ZWNobyBwd25lZA==31m[2J\n  1 h     20 % used"), "\(r.stdout)")
        #expect(r.stdout.hasPrefix("Plan: pro[31m\n"))
        #expect(r.stdout.contains("Credits: 1]52;c;ZWNobyBwd25lZA==2\n"))
    }

    @Test(arguments: ["huge_numbers", "nonsense_windows"])
    func nonsenseValuesAreUnknown(_ answer: String) throws {
        let w = try world()
        try w.issuer.configure(["usage_answer": answer])
        let r = w.usage()
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(Array(lines.prefix(3)) == ["Plan: plus", "primary    unknown      reset time unknown", "secondary  unknown      reset time unknown"], "\(r.stdout)")
        let j = w.usage(["--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(j.stdoutBytes)) as? [String: Any])
        for window in try #require(o["windows"] as? [[String: Any]]) {
            for key in ["window_seconds", "used_percent", "resets_at"] { #expect(window[key] is NSNull, "\(key): \(window)") }
        }
    }

    @Test(arguments: [
        (IssuerSettings(["usage_answer": "malformed"]), "the ChatGPT backend's usage answer is not a JSON object (HTTP 200)"),
        (IssuerSettings(["usage_answer": "not_object"]), "the ChatGPT backend's usage answer is not a JSON object (HTTP 200)"),
        (IssuerSettings(["usage_faults": [["html": true]]]), "the ChatGPT backend answered with an HTML page instead of JSON (HTTP 200)"),
        (IssuerSettings(["usage_faults": [["huge": 10 << 20]]]), "sent a response larger than 1048576 bytes"),
        (IssuerSettings(["usage_faults": [["huge": 10 << 20, "chunked_unknown_length": true]]]), "sent a response larger than 1048576 bytes"),
    ] as [(IssuerSettings, String)])
    func unusableAnswerIsExit4AndBounded(_ config: IssuerSettings, _ message: String) throws {
        let w = try world()
        try w.issuer.configure(config.values)
        let started = Date()
        let r = w.usage()
        #expect(r.status == 4, "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(try w.counter("usage_requests") == 1) // not retried
        #expect(try w.sandbox.storedDocument()?["access_token"] as? String == w.tokens.accessToken)
    }

    // MARK: where the token may go

    func runOffline(_ s: Sandbox, backend: String) -> RunResult {
        var env = s.env
        env["CHATGPT_CREDENTIAL_BACKEND"] = backend
        return Harness.run(Hostile.unshare, ["-rn", Harness.binary, "usage"], env: env, timeout: 30)
    }

    /// With an expired token, so that a refresh would come first: the URL is refused before it.
    @Test(.enabled(if: Hostile.canUnshareNetwork),
          arguments: ["http://chatgpt.com/backend-api", "http://10.0.0.1/backend-api", "http://127.0.0.1.evil.com",
                      "ftp://127.0.0.1/", "https://user:pw@chatgpt.com/backend-api", "https://chatgpt.com/backend-api?x=\u{1b}[2J"])
    func disallowedBackendExits2BeforeAnyNetworkIO(_ url: String) throws {
        let w = try world(["expires_in": -10])
        let started = Date()
        let r = runOffline(w.sandbox, backend: url)
        #expect(r.status == 2, "\(url): \(r.status) \(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("CHATGPT_CREDENTIAL_BACKEND") && r.stderr.contains("is not allowed"), "\(r.stderr)")
        #expect(Hostile.controlScalars(r.stderr).isEmpty)
        #expect(try w.counter("refresh_requests") == 0)
        #expect(try w.counter("usage_requests") == 0)
        #expect(try w.sandbox.storedDocument()?["refresh_token"] as? String == w.tokens.refreshToken)
    }

    /// The control: a loopback backend is allowed, but inside the namespace nothing is reachable,
    /// so the refresh it needs first fails with exit 4, not 2.
    @Test(.enabled(if: Hostile.canUnshareNetwork))
    func allowedBackendInTheNamespaceIsExit4() throws {
        let w = try world(["expires_in": -10])
        let r = runOffline(w.sandbox, backend: w.issuer.url + "/backend-api")
        #expect(r.status == 4, "\(r.stderr)")
        #expect(try w.counter("refresh_requests") == 0)
    }

    // MARK: terminal or not

    /// Runs the binary with stdout and stderr on a new pty (a small Python harness), returns what
    /// the terminal received with its CR LF turned back into LF.
    static func runOnPty(_ s: Sandbox, _ args: [String], env extra: [String: String]) -> RunResult {
        let harness = """
        import os, pty, select, subprocess, sys
        master, slave = pty.openpty()
        p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        out = b""
        while True:
            r, _, _ = select.select([master], [], [], 30)
            if not r:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        sys.stdout.buffer.write(out)
        sys.exit(p.wait())
        """
        var env = s.env
        for (k, v) in extra { env[k] = v }
        var r = Harness.run("/usr/bin/env", ["python3", "-c", harness, Harness.binary] + args, env: env, timeout: 60)
        r.stdoutBytes = Array(String(decoding: r.stdoutBytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n").utf8)
        return r
    }

    @Test func terminalGetsBarsAndColourPipesAndNoColorGetPlainLines() throws {
        let w = try world()
        let now = Self.now()
        try w.issuer.configure(["usage_body": Self.twoWindows(now)])
        let plain = Self.expectedTwoWindows(now)
        #expect(w.usage().stdout == plain) // a pipe

        let tty = Self.runOnPty(w.sandbox, ["usage"], env: ["TERM": "xterm-256color"])
        #expect(tty.status == 0, "\(tty.stdout)")
        let lines = tty.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(tty.stdout)")
        #expect(lines[0] == "\u{1b}[1mPlan:\u{1b}[0m pro")
        #expect(lines[1] == "5 h     \u{1b}[32m" + String(repeating: "█", count: 8) + "\u{1b}[0m\u{1b}[2m" + String(repeating: "░", count: 12)
                + "\u{1b}[0m    42 % used   resets \(Self.clock(now + 7410)) (in 2 h 3 min)", "\(lines[1].debugDescription)")
        #expect(lines[2].hasPrefix("7 d     \u{1b}[32m" + String(repeating: "█", count: 3) + "\u{1b}[0m"), "\(lines[2].debugDescription)")
        #expect(lines[3] == "\u{1b}[1mCredits:\u{1b}[0m 12.50")

        // Without UTF-8 the bar is ASCII.
        let ascii = Self.runOnPty(w.sandbox, ["usage"], env: ["TERM": "xterm", "LC_ALL": "C"]) // LC_ALL: Python would coerce a bare C LANG to UTF-8
        #expect(ascii.stdout.contains("\u{1b}[32m########\u{1b}[0m\u{1b}[2m------------\u{1b}[0m"), "\(ascii.stdout.debugDescription)")

        // NO_COLOR and TERM=dumb on a terminal: exactly the plain lines.
        for env in [["TERM": "xterm-256color", "NO_COLOR": "1"], ["TERM": "dumb"], ["TERM": ""]] {
            let r = Self.runOnPty(w.sandbox, ["usage"], env: env)
            #expect(r.status == 0)
            #expect(r.stdout == plain, "\(env): \(r.stdout.debugDescription)")
        }
        // --json is never coloured.
        let json = Self.runOnPty(w.sandbox, ["usage", "--json"], env: ["TERM": "xterm-256color"])
        #expect(json.stdout.hasPrefix(#"{"plan":"pro","#) && !json.stdout.contains("\u{1b}"), "\(json.stdout.debugDescription)")
    }

    /// On a terminal the only escapes are the tool's own colours, whatever the answer holds.
    @Test func hostileNamesOnATerminalCarryOnlyOurColours() throws {
        let w = try world()
        try w.issuer.configure(["usage_answer": "hostile_names"])
        let r = Self.runOnPty(w.sandbox, ["usage"], env: ["TERM": "xterm-256color"])
        #expect(r.status == 0, "\(r.stdout)")
        var rest = r.stdout
        for sgr in ["\u{1b}[0m", "\u{1b}[1m", "\u{1b}[2m", "\u{1b}[32m", "\u{1b}[1;31m"] { rest = rest.replacingOccurrences(of: sgr, with: "") }
        #expect(Hostile.controlScalars(rest).isEmpty, "\(rest.debugDescription)")
    }

    // MARK: stdout that cannot be written

    @Test func failedWriteToStdoutIsExit1() throws {
        let w = try world()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Harness.binary)
        p.arguments = ["usage"]
        p.environment = w.sandbox.env
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
        let err = Pipe()
        p.standardError = err
        try p.run()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(try w.counter("usage_requests") == 1)
        // man page, `get`: a failed write to stdout is exit 1 with one line on stderr, never 0.
        #expect(p.terminationStatus == 1)
        #expect(Hostile.isOneLine(stderr) && stderr.contains("cannot write to standard output"), "\(stderr)")
    }
}

/// A test issuer's settings as a test's argument. `@unchecked Sendable`: they are JSON literals
/// (strings, numbers, booleans, and arrays and dictionaries of them), values no thread can change.
struct IssuerSettings: @unchecked Sendable {
    let values: [String: Any]
    init(_ values: [String: Any]) { self.values = values }
}
