import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `usage --all` through the built binary against the test issuer's backend: every profile of
/// the file store asked as `usage --profile NAME` would ask, one block (or one JSON member) per
/// profile in name order, a failing profile shown in its place without hiding the others, the
/// exit code of the first failing profile, and at most four requests in flight.
@Suite(.serialized) struct UsageAllEndToEndTests {
    struct World {
        let sandbox: Sandbox
        let issuer: TestIssuer
        var tokens: [String: TestIssuer.SeededTokens] = [:]
    }

    /// alpha (plus) and gamma (pro) are signed in; beta's access token has expired and its
    /// refresh token is refused (`refresh_token_expired`): signed out, exit 3.
    func threeProfiles() throws -> World {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        var w = World(sandbox: s, issuer: issuer)
        w.tokens["alpha"] = try s.storeSeeded(issuer, profile: "alpha", ["plan": "plus", "email": "a@example.com", "account_id": "acct-alpha"])
        w.tokens["beta"] = try s.storeSeeded(issuer, profile: "beta", ["expires_in": -10, "refresh_expired": true, "account_id": "acct-beta"])
        w.tokens["gamma"] = try s.storeSeeded(issuer, profile: "gamma", ["plan": "pro", "email": "g@example.com", "account_id": "acct-gamma"])
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        s.env["TZ"] = "UTC"
        return w
    }

    static let betaError = "error (exit 3): "

    /// The block `usage --profile NAME` prints for the realistic answer, under its heading.
    func expectBlock(_ block: Substring, _ name: String, plan: String, sourceLocation: SourceLocation = #_sourceLocation) {
        // Issue 29: `Profile NAME`, then the block `usage` prints, indented under it: a heading an
        // extra limit's name (GPT-5-Codex-Mini) cannot be taken for.
        let lines = block.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            .map { $0.offset == 0 ? String($0.element) : String($0.element.dropFirst(2)) }
        #expect(block.split(separator: "\n").dropFirst().allSatisfy { $0.hasPrefix("  ") }, "\(block)", sourceLocation: sourceLocation)
        #expect(lines.count == 7, "\(block)", sourceLocation: sourceLocation)
        guard lines.count == 7 else { return }
        #expect(lines[0] == "Profile " + name, sourceLocation: sourceLocation)
        #expect(lines[1] == "Plan: \(plan)", sourceLocation: sourceLocation)
        #expect(lines[2].hasPrefix("5 h       42 % used   resets ") && lines[2].hasSuffix("(in 2 h 3 min)"), "\(lines[2])", sourceLocation: sourceLocation)
        #expect(lines[3].hasPrefix("7 d     12.5 % used   resets "), "\(lines[3])", sourceLocation: sourceLocation)
        #expect(lines[4] == "Credits: none", sourceLocation: sourceLocation)
        #expect(lines[5] == "GPT-5-Codex-Mini", sourceLocation: sourceLocation)
        #expect(lines[6].hasPrefix("  5 h      3 % used"), "\(lines[6])", sourceLocation: sourceLocation)
    }

    @Test func threeProfilesOneSignedOutShowsTheOtherTwoAndExits3() throws {
        let w = try threeProfiles()
        let r = w.sandbox.run(["usage", "--all"], timeout: 60)
        #expect(r.status == 3, "\(r.stderr)")
        // Three blocks, in name order, a blank line apart.
        let blocks = r.stdout.dropLast().split(separator: "\n\n", omittingEmptySubsequences: false)
        #expect(blocks.count == 3, "\(r.stdout)")
        guard blocks.count == 3 else { return }
        expectBlock(blocks[0], "alpha", plan: "plus")
        #expect(blocks[1].hasPrefix("Profile beta\n  " + Self.betaError), "\(blocks[1])")
        #expect(blocks[1].contains("refresh_token_expired") && blocks[1].contains("--profile beta login"), "\(blocks[1])")
        #expect(blocks[1].split(separator: "\n").count == 2)
        expectBlock(blocks[2], "gamma", plan: "pro")
        // The failure is also the one stderr line `usage --profile beta` would print, named.
        let stderrLines = r.stderr.split(separator: "\n")
        #expect(stderrLines.contains { $0.hasPrefix("chatgpt-credential: beta: ") && $0.contains("refresh_token_expired") }, "\(r.stderr)")
        #expect(!r.stderr.contains("alpha") && !r.stderr.contains("gamma"), "\(r.stderr)")
        // Each signed-in profile asked once with its own token and account; beta never reached the backend.
        #expect(try w.issuer.counter("usage_requests") == 2)
        #expect(try w.issuer.counter("usage_ok") == 2)
        #expect(try w.issuer.counter("refresh_expired") == 1)
        for t in w.tokens.values { for secret in t.secrets { #expect(!r.allOutput.contains(secret)) } }
        // The same as asking one by one.
        let one = w.sandbox.run(["--profile", "beta", "usage"])
        #expect(one.status == 3)
        #expect(blocks[1].contains(String(one.stderr.dropFirst("chatgpt-credential: ".count).dropLast())), "\(one.stderr) vs \(blocks[1])")
    }

    @Test func jsonHasOneMemberPerProfileAndTheFailureWithItsCode() throws {
        let w = try threeProfiles()
        let r = w.sandbox.run(["usage", "--all", "--json"], timeout: 60)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("}\n") && r.stdout.filter { $0 == "\n" }.count == 1)
        #expect(r.stdout.hasPrefix(#"{"profiles":{"alpha":{"plan":"plus","#), "\(r.stdout)")
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any])
        #expect(Set(o.keys) == ["profiles"])
        let profiles = try #require(o["profiles"] as? [String: Any])
        #expect(Set(profiles.keys) == ["alpha", "beta", "gamma"])
        // Each signed-in member is exactly what `usage --profile NAME --json` prints.
        for (name, plan) in [("alpha", "plus"), ("gamma", "pro")] {
            let member = try #require(profiles[name] as? [String: Any])
            #expect(Set(member.keys) == ["plan", "allowed", "limit_reached", "windows", "credits", "additional_limits"])
            #expect(member["plan"] as? String == plan)
            let single = w.sandbox.run(["--profile", name, "usage", "--json"])
            let alone = try #require(try JSONSerialization.jsonObject(with: Data(single.stdoutBytes)) as? [String: Any])
            #expect(Set(alone.keys) == Set(member.keys))
            #expect((alone["windows"] as? [[String: Any]])?.map { $0["used_percent"] as? Double } == (member["windows"] as? [[String: Any]])?.map { $0["used_percent"] as? Double })
        }
        let beta = try #require(profiles["beta"] as? [String: Any])
        #expect(Set(beta.keys) == ["error", "exit"])
        #expect(beta["exit"] as? Int == 3)
        let message = try #require(beta["error"] as? String)
        #expect(message.contains("refresh_token_expired") && !message.contains("\n"), "\(message)")
        for t in w.tokens.values { for secret in t.secrets { #expect(!r.allOutput.contains(secret)) } }
    }

    @Test func everyProfileAnsweringIsExit0AndTheExitIsTheFirstFailingByName() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer, profile: "one")
        try s.storeSeeded(issuer, profile: "two")
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        let ok = s.run(["usage", "--all"], timeout: 60)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stderr.isEmpty, "\(ok.stderr)")
        #expect(ok.stdout.hasPrefix("Profile one\n  Plan: plus\n") && ok.stdout.contains("\n\nProfile two\n  Plan: plus\n"), "\(ok.stdout)")

        // "a-slow" fails late with exit 4 (backend 500 on each of its three attempts, about
        // 1.5-3 s); "b-fast" fails at once with exit 3 (signed out, no request): the exit is the
        // first failing profile by name, not the first to fail.
        try s.storeSeeded(issuer, profile: "a-slow")
        try s.storeSeeded(issuer, profile: "b-fast", ["expires_in": -10, "refresh_expired": true])
        try issuer.configure(["usage_fault_always": ["status": 500]])
        let both = s.run(["usage", "--all", "--json"], timeout: 60)
        #expect(both.status == 4, "\(both.stderr)")
        let o = try #require(try JSONSerialization.jsonObject(with: Data(both.stdoutBytes)) as? [String: Any])
        let profiles = try #require(o["profiles"] as? [String: [String: Any]])
        #expect(Set(profiles.keys) == ["a-slow", "b-fast", "one", "two"])
        #expect(profiles["a-slow"]?["exit"] as? Int == 4 && profiles["b-fast"]?["exit"] as? Int == 3, "\(profiles)")
        #expect(profiles["one"]?["exit"] as? Int == 4 && profiles["two"]?["exit"] as? Int == 4, "\(profiles)")
        #expect((profiles["a-slow"]?["error"] as? String)?.contains("HTTP 500") == true, "\(profiles)")
    }

    @Test func nobodySignedInSaysSoAndExits3() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        let r = s.run(["usage", "--all"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout == "No profiles signed in.\n")
        #expect(r.stderr == "chatgpt-credential: no profile is signed in; run: chatgpt-credential login\n")
        let j = s.run(["usage", "--all", "--json"])
        #expect(j.status == 3)
        #expect(j.stdout == #"{"profiles":{}}"# + "\n")
        #expect(try issuer.counter("usage_requests") == 0)
    }

    /// Five profiles whose every request takes 1.5 s: four at once, then the fifth, so about
    /// 3 s — not 7.5 s (one at a time), not 1.5 s (no bound).
    @Test func atMostFourRequestsInFlight() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        for i in 1...5 { try s.storeSeeded(issuer, profile: "p\(i)") }
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        try issuer.configure(["usage_fault_always": ["delay": 1.5]])
        let started = Date()
        let r = s.run(["usage", "--all", "--json"], timeout: 60)
        let elapsed = Date().timeIntervalSince(started)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try issuer.counter("usage_ok") == 5)
        #expect(elapsed >= 2.9 && elapsed < 6, "took \(elapsed) s")
    }

    /// Under `auto`, a profile in the Secret Service (the throwaway keyring) and one in the file
    /// store are both listed and asked, from worker threads.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil))
    func profilesInBothStoresAreShown() throws {
        let issuer = try TestIssuer()
        let s = Sandbox()
        let inKeyring = uniqueProfile("kr"), inFile = uniqueProfile("fl")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        let k = try issuer.seed(["plan": "pro"]), f = try issuer.seed(["plan": "team"])
        #expect(s.run(["--profile", inKeyring, "--store", "secret-service", "store"], stdin: k.storeJSON).status == 0)
        #expect(s.run(["--profile", inFile, "--store", "file", "store"], stdin: f.storeJSON).status == 0)
        defer { _ = s.run(["--profile", inKeyring, "erase", "--no-revoke"]) }
        let r = s.run(["usage", "--all", "--json"], timeout: 60)
        // The keyring is shared with tests running at the same time, whose profiles may fail
        // here: the exit status is theirs to decide, but these two must be there, answered.
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any], "\(r.stderr)")
        let profiles = try #require(o["profiles"] as? [String: [String: Any]])
        #expect(profiles[inKeyring]?["plan"] as? String == "pro", "\(profiles.keys)")
        #expect(profiles[inFile]?["plan"] as? String == "team", "\(profiles.keys)")
    }

    // MARK: terminal or not

    @Test func terminalGetsHeadingsBarsAndColourNoColorAndPipesGetPlainLines() throws {
        let w = try threeProfiles()
        let piped = w.sandbox.run(["usage", "--all"], timeout: 60)
        #expect(piped.status == 3)
        #expect(!piped.stdout.contains("\u{1b}"))

        let tty = UsageEndToEndTests.runOnPty(w.sandbox, ["usage", "--all"], env: ["TERM": "xterm-256color"])
        #expect(tty.status == 3, "\(tty.stdout)")
        // stderr shares the pty: its one line (beta's failure) comes after the report.
        var lines = tty.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.suffix(2).first?.hasPrefix("chatgpt-credential: beta: ") == true, "\(tty.stdout.debugDescription)")
        lines = lines.filter { !$0.hasPrefix("chatgpt-credential: ") }
        #expect(lines.first == "\u{1b}[1mProfile alpha\u{1b}[0m", "\(tty.stdout.debugDescription)")
        #expect(lines.contains("  \u{1b}[1mPlan:\u{1b}[0m plus") && lines.contains("  \u{1b}[1mPlan:\u{1b}[0m pro"), "\(tty.stdout.debugDescription)")
        #expect(lines.contains { $0.hasPrefix("  5 h     \u{1b}[32m" + String(repeating: "█", count: 8) + "\u{1b}[0m") }, "\(tty.stdout.debugDescription)")
        #expect(lines.contains("\u{1b}[1mProfile beta\u{1b}[0m") && lines.contains("\u{1b}[1mProfile gamma\u{1b}[0m"))
        #expect(lines.contains { $0.hasPrefix("  \u{1b}[1;31merror\u{1b}[0m (exit 3): ") }, "\(tty.stdout.debugDescription)")

        // NO_COLOR and TERM=dumb on a terminal: the piped lines, apart from stderr (same pty)
        // and the countdowns, which may have ticked.
        for env in [["TERM": "xterm-256color", "NO_COLOR": "1"], ["TERM": "dumb"]] {
            let r = UsageEndToEndTests.runOnPty(w.sandbox, ["usage", "--all"], env: env)
            #expect(r.status == 3)
            #expect(!r.stdout.contains("\u{1b}"), "\(env): \(r.stdout.debugDescription)")
            let shown = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("chatgpt-credential: ") }
            let plain = piped.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(shown.count == plain.count, "\(env): \(r.stdout)")
            for (a, b) in zip(shown, plain) { #expect(a.prefix(20) == b.prefix(20), "\(env): \(a) vs \(b)") }
        }
        // --json is never coloured.
        let json = UsageEndToEndTests.runOnPty(w.sandbox, ["usage", "--all", "--json"], env: ["TERM": "xterm-256color"])
        #expect(json.stdout.hasPrefix(#"{"profiles":{"alpha":"#) && !json.stdout.contains("\u{1b}"), "\(json.stdout.debugDescription)")
        #expect(json.status == 3)
    }
}
