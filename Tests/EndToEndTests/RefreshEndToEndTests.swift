import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `get` through the real binary against the loopback test issuer: the refresh rule, single-use
/// refresh tokens under concurrency and crashes, failure classes, output formats, exec, erase.
@Suite(.serialized) struct RefreshEndToEndTests {
    /// A signed-in sandbox: tokens seeded at the test issuer and stored with `store`.
    struct World {
        let sandbox: Sandbox
        let issuer: TestIssuer
        let tokens: TestIssuer.SeededTokens
        let profile: String
        let store: String

        func get(_ args: [String] = [], env: [String: String] = [:], timeout: Double = 60) -> RunResult {
            sandbox.run(["--profile", profile, "--store", store, "get"] + args, env: env, timeout: timeout)
        }

        /// The document as stored, read with the store's own reference tools (age / secret-tool).
        func stored() throws -> [String: Any] {
            let r: RunResult
            if store == "file" {
                r = Harness.run("/usr/bin/age", ["-d", "-i", sandbox.configDir + "/identity", sandbox.dataDir + "/\(profile).age"], env: sandbox.env)
            } else {
                r = Harness.run("/usr/bin/secret-tool", ["lookup", "service", "chatgpt-credential", "profile", profile], env: sandbox.env)
            }
            guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
                throw Failure("cannot read the stored document: \(r.stderr)")
            }
            return o
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    func world(expiresIn: Int64, store: String = "file") throws -> World {
        let issuer = try TestIssuer()
        let sandbox = Sandbox()
        sandbox.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let tokens = try issuer.seed(["expires_in": expiresIn])
        let profile = uniqueProfile("refresh")
        let input = #"{"access_token":"\#(tokens.accessToken)","refresh_token":"\#(tokens.refreshToken)","id_token":"\#(tokens.idToken)"}"#
        let r = sandbox.run(["--profile", profile, "--store", store, "store"], stdin: input)
        guard r.status == 0 else { throw Failure("store failed: \(r.status) \(r.stderr)") }
        return World(sandbox: sandbox, issuer: issuer, tokens: tokens, profile: profile, store: store)
    }

    static var hasBus: Bool { ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil }

    @Test func freshTokenMakesNoIssuerRequest() throws {
        let w = try world(expiresIn: 3600)
        let r = w.get()
        #expect(r.status == 0)
        #expect(r.stdout == w.tokens.accessToken + "\n")
        #expect(r.stderr.isEmpty)
        let requests = try w.issuer.stats()["requests"] as? [String: Int] ?? [:]
        #expect(requests.filter { !$0.key.hasPrefix("/__admin") }.values.reduce(0, +) == 0)
    }

    @Test func expiringTokenIsRefreshedOnceAndPersisted() throws {
        let w = try world(expiresIn: 200) // inside the 300 s window
        let r = w.get()
        #expect(r.status == 0)
        #expect(r.stdout != w.tokens.accessToken + "\n")
        #expect(try w.issuer.counter("refresh_requests") == 1)
        #expect(try w.issuer.stats()["last_refresh_token_seen"] as? String == w.tokens.refreshToken)
        let doc = try w.stored()
        let newRefresh = try #require(doc["refresh_token"] as? String)
        #expect(newRefresh != w.tokens.refreshToken)
        #expect(doc["access_token"] as? String == r.stdout.trimmingCharacters(in: .newlines))
        // The rotated token is what the issuer holds as active, and the old one is never sent again.
        #expect((try w.issuer.stats()["active_refresh_tokens"] as? [String])?.contains(newRefresh) == true)
        #expect(w.get(["--force-refresh"]).status == 0)
        #expect(try w.issuer.stats()["last_refresh_token_seen"] as? String == newRefresh)
        #expect(try w.issuer.counter("refresh_reused") == 0)
    }

    @Test func minTTLBeyondExpiryRefreshes() throws {
        let w = try world(expiresIn: 1000)
        #expect(w.get(["--min-ttl", "600"]).status == 0)
        #expect(try w.issuer.counter("refresh_requests") == 0)
        #expect(w.get(["--min-ttl", "2000"]).status == 0)
        #expect(try w.issuer.counter("refresh_requests") == 1)
    }

    @Test(arguments: ["file", "secret-service"])
    func fiftyConcurrentGetsMakeOneRefresh(store: String) throws {
        if store == "secret-service" && !Self.hasBus { Issue.record("no D-Bus session: run the suite through scripts/with-keyring"); return }
        let w = try world(expiresIn: -10, store: store)
        try w.issuer.configure(["refresh_delay": 0.3]) // keep the refresh in flight while the others queue
        let env = w.sandbox.env // what w.get() runs with, captured as a value for the threads
        let results = concurrentRuns(50) { [profile = w.profile, store = w.store] in
            Harness.run(Harness.binary, ["--profile", profile, "--store", store, "get"], env: env, timeout: 60)
        }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.filter { $0.status != 0 }.map(\.stderr))")
        #expect(Set(results.map(\.stdout)).count == 1)
        #expect(results[0].stdout != w.tokens.accessToken + "\n")
        #expect(try w.issuer.counter("refresh_requests") == 1)
        #expect(try w.issuer.counter("refresh_reused") == 0)
        #expect(try w.stored()["access_token"] as? String == results[0].stdout.trimmingCharacters(in: .newlines))
    }

    @Test func killedMidRefreshLeavesTheProfileUsable() throws {
        let w = try world(expiresIn: -10)
        try w.issuer.configure(["refresh_delay": 3, "abandon_if_disconnected": true])
        var env = w.sandbox.env
        env["CHATGPT_CREDENTIAL_ISSUER"] = w.issuer.url
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Harness.binary)
        p.arguments = ["--profile", w.profile, "--store", "file", "get"]
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Wait until its refresh request is at the issuer: it now holds the lock.
        let deadline = Date().addingTimeInterval(10)
        while try w.issuer.counter("refresh_requests") == 0 && Date() < deadline { usleep(20_000) }
        #expect(try w.issuer.counter("refresh_requests") == 1)
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        try w.issuer.configure(["refresh_delay": 0])
        let started = Date()
        let r = w.get(env: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "10"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5) // the lock died with the process
        #expect(try w.issuer.counter("refresh_reused") == 0)
        #expect(w.get().stdout == r.stdout) // still signed in, no further refresh needed
    }

    @Test func waitingForAnotherProcessTimesOutWithExit4() throws {
        let w = try world(expiresIn: -10)
        // Another process holds the profile's lock (flock on the lock file).
        let lockPath = w.sandbox.lockFile(w.profile)
        mkdir(w.sandbox.lockDir, 0o700)
        let fd = open(lockPath, O_RDWR | O_CREAT, 0o600)
        #expect(fd >= 0)
        #expect(flock(fd, LOCK_EX) == 0)
        defer { close(fd) }
        let started = Date()
        let r = w.get(env: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "1"])
        #expect(r.status == 4)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("waiting"))
        #expect(try w.issuer.counter("refresh_requests") == 0)
    }

    @Test(arguments: [(400, "refresh_token_reused"), (401, "refresh_token_reused"), (401, "refresh_token_invalidated"), (400, "refresh_token_expired")])
    func permanentRejectionOnExpiredToken(status: Int, code: String) throws {
        let w = try world(expiresIn: -10)
        try w.issuer.configure(["faults": [["status": status, "body": ["error": ["message": "Your session has ended.", "code": code]]]]])
        let r = w.get()
        #expect(r.status == 3)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("sign in again: chatgpt-credential --profile \(w.profile) login"))
        #expect(r.stderr.split(separator: "\n").count == 1)
        let doc = try w.stored()
        #expect(doc["refresh_token"] as? String == w.tokens.refreshToken) // kept, never deleted
        // A second get does not ask the issuer again.
        #expect(w.get().status == 3)
        #expect(try w.issuer.counter("refresh_requests") == 1)
        // A new store clears the mark.
        let fresh = try w.issuer.seed(["expires_in": 3600])
        #expect(w.sandbox.run(["--profile", w.profile, "--store", "file", "store"],
                              stdin: #"{"access_token":"\#(fresh.accessToken)","refresh_token":"\#(fresh.refreshToken)"}"#).status == 0)
        #expect(w.get().stdout == fresh.accessToken + "\n")
    }

    @Test func permanentRejectionOnStillValidTokenPrintsWithWarning() throws {
        let w = try world(expiresIn: 200)
        try w.issuer.configure(["faults": [["status": 401, "body": ["error": ["code": "refresh_token_reused"]]]]])
        let r = w.get()
        #expect(r.status == 0)
        #expect(r.stdout == w.tokens.accessToken + "\n")
        #expect(r.stderr.contains("sign in again"))
        #expect(w.get(["--min-ttl", "600"]).status == 3)
        #expect(try w.issuer.counter("refresh_requests") == 1)
    }

    @Test func transientErrorsAreRetried() throws {
        let w = try world(expiresIn: -10)
        try w.issuer.configure(["faults": [["status": 500], ["status": 502]]])
        let r = w.get()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout != w.tokens.accessToken + "\n")
        #expect(try w.issuer.counter("refresh_requests") == 3)
    }

    @Test func serverDownPrintsUnexpiredTokenOrExits4() throws {
        let w = try world(expiresIn: 200)
        let before = try w.stored()
        try w.issuer.configure(["faults": Array(repeating: ["status": 500], count: 20)])
        let r = w.get()
        #expect(r.status == 0)
        #expect(r.stdout == w.tokens.accessToken + "\n")
        #expect(r.stderr.contains("could not refresh"))
        let started = Date()
        let strict = w.get(["--min-ttl", "1000"])
        #expect(strict.status == 4)
        #expect(strict.stdout.isEmpty)
        #expect(Date().timeIntervalSince(started) < 30) // within the retry bound
        #expect(NSDictionary(dictionary: try w.stored()).isEqual(to: before)) // untouched
    }

    @Test func retryAfterIsHonoured() throws {
        let w = try world(expiresIn: -10)
        try w.issuer.configure(["faults": [["status": 429, "retry_after": 2]]])
        let started = Date()
        let r = w.get()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) >= 2)
        #expect(try w.issuer.counter("refresh_requests") == 2)
    }

    @Test func everyOutputFormatExactly() throws {
        let w = try world(expiresIn: 3600)
        let t = w.tokens
        #expect(w.get(["--account-id"]).stdout == t.accountId + "\n")
        #expect(w.get(["--id-token"]).stdout == t.idToken + "\n")
        #expect(w.get(["--header"]).stdout == "Authorization: Bearer \(t.accessToken)\nChatGPT-Account-ID: \(t.accountId)\n")
        #expect(w.get(["--env"]).stdout == "export CHATGPT_ACCESS_TOKEN='\(t.accessToken)'\nexport CHATGPT_ACCOUNT_ID='\(t.accountId)'\n")
        let json = w.get(["--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [String: Any])
        #expect(Set(o.keys) == ["access_token", "account_id", "expires_at", "email", "plan"])
        #expect(o["access_token"] as? String == t.accessToken)
        #expect(o["email"] as? String == t.email)
        #expect(o["plan"] as? String == t.plan)
        let iso = ISO8601DateFormatter()
        #expect(iso.date(from: o["expires_at"] as? String ?? "").map { Int64($0.timeIntervalSince1970) } == t.expiresAt)
        #expect(!json.stdout.contains(t.refreshToken))
        // eval of --env in a real shell gives the same values.
        let evald = Harness.run("/bin/sh", ["-c", "eval \"$(\"$0\" --profile \"$1\" --store file get --env)\"; printf '%s|%s' \"$CHATGPT_ACCESS_TOKEN\" \"$CHATGPT_ACCOUNT_ID\"",
                                            Harness.binary, w.profile], env: w.sandbox.env)
        #expect(evald.stdout == "\(t.accessToken)|\(t.accountId)")
    }

    /// Issue 29: `eval "$(chatgpt-credential get --env)"` exports, so a child process sees both
    /// values (exit 0 from the child's `test -n`; before `export`, exit 1).
    @Test func getEnvExportsToChildProcesses() throws {
        let w = try world(expiresIn: 3600)
        let r = Harness.run("/bin/sh", ["-c", "eval \"$(\"$0\" --profile \"$1\" --store file get --env)\" && sh -c 'test -n \"$CHATGPT_ACCESS_TOKEN\" && test -n \"$CHATGPT_ACCOUNT_ID\"'",
                                        Harness.binary, w.profile], env: w.sandbox.env)
        #expect(r.status == 0, "a child of the shell that ran eval must see CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID: \(r.stderr)")
    }

    @Test func execPassesTokensInEnvironmentAndExitStatus() throws {
        let w = try world(expiresIn: 3600)
        let r = w.sandbox.run(["--profile", w.profile, "--store", "file", "exec", "--", "sh", "-c",
                               #"printf '%s %s' "$CHATGPT_ACCESS_TOKEN" "$CHATGPT_ACCOUNT_ID"; tr '\0' ' ' < /proc/$$/cmdline >&2; exit 7"#])
        #expect(r.status == 7)
        #expect(r.stdout == "\(w.tokens.accessToken) \(w.tokens.accountId)")
        #expect(!r.stderr.contains(w.tokens.accessToken)) // not in the child's argv
        let missing = w.sandbox.run(["--profile", w.profile, "--store", "file", "exec", "--", "/nonexistent/cmd"])
        #expect(missing.status == 127)
    }

    @Test func eraseRevokesUnlessToldNot() throws {
        let w = try world(expiresIn: 3600)
        let r = w.sandbox.run(["--profile", w.profile, "--store", "file", "erase"])
        #expect(r.status == 0)
        #expect(try w.issuer.counter("revocations") == 1)
        #expect(try w.issuer.stats()["last_revoked_token"] as? String == w.tokens.refreshToken)
        #expect(w.get().status == 3)
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/\(w.profile).age"))

        let w2 = try world(expiresIn: 3600)
        #expect(w2.sandbox.run(["--profile", w2.profile, "--store", "file", "erase", "--no-revoke"]).status == 0)
        #expect(try w2.issuer.counter("revocations") == 0)
        #expect(w2.get().status == 3)
    }

    @Test func statusReportsWithoutSecrets() throws {
        let w = try world(expiresIn: 3600)
        let r = w.sandbox.run(["--profile", w.profile, "--store", "file", "status", "--json"])
        #expect(r.status == 0)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any])
        #expect(o["email"] as? String == w.tokens.email)
        #expect(o["account_id"] as? String == w.tokens.accountId)
        #expect(o["store"] as? String == "file")
        #expect(o["signed_in"] as? Bool == true)
        for secret in [w.tokens.accessToken, w.tokens.refreshToken, w.tokens.idToken] { #expect(!r.stdout.contains(secret)) }
        let text = w.sandbox.run(["--profile", w.profile, "--store", "file", "status"])
        #expect(text.stdout.hasPrefix("Signed in as \(w.tokens.email) (\(w.tokens.plan)), account \(w.tokens.accountId)\n"))
        #expect(w.sandbox.run(["--profile", "nobody", "--store", "file", "status"]).status == 3)
    }
}

/// Runs `body` `n` times at once, each on its own thread (GCD would cap it at the core count);
/// returns the results in order.
func concurrentRuns(_ n: Int, _ body: @escaping @Sendable () -> RunResult) -> [RunResult] {
    final class Results: @unchecked Sendable {
        var items: [RunResult?]
        let lock = NSLock()
        init(_ n: Int) { items = Array(repeating: nil, count: n) }
    }
    let results = Results(n)
    let group = DispatchGroup()
    for i in 0..<n {
        group.enter()
        let t = Thread {
            let r = body()
            results.lock.lock(); results.items[i] = r; results.lock.unlock()
            group.leave()
        }
        t.start()
    }
    group.wait()
    return results.items.map { $0! }
}
