import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Signals during the spend-to-save window (man page, SIGNALS): SIGINT, SIGTERM, SIGHUP and
/// SIGQUIT sent while a refresh (or a sign-in's code exchange) is at the issuer wait until the
/// rotated tokens are saved; the process then exits 128 + the signal's number with nothing on
/// stdout, and the next `get` works without a reused refresh token. The issuer answers after
/// 2 s and rotates whether or not the client is still there, as the real one does.
@Suite(.serialized) struct SignalDeferralTests {
    struct Failure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    static let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil

    /// A sandbox signed in to a fresh token family in `store` (refresh due unless `expiresIn` says otherwise).
    final class World {
        let issuer: TestIssuer
        let sandbox: Sandbox
        let profile: String
        let store: String
        let tokens: TestIssuer.SeededTokens

        init(store: String, expiresIn: Int64 = -10) throws {
            issuer = try TestIssuer()
            sandbox = Sandbox()
            sandbox.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
            sandbox.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
            self.store = store
            profile = uniqueProfile("sig")
            tokens = try issuer.seed(["expires_in": expiresIn])
            let r = run(["store"], stdin: tokens.storeJSON)
            guard r.status == 0 else { throw Failure("store failed: \(r.status) \(r.stderr)") }
        }

        deinit { _ = run(["erase", "--no-revoke"]) }

        var args: [String] { ["--profile", profile, "--store", store] }

        func run(_ a: [String], stdin: String? = nil, env: [String: String] = [:]) -> RunResult {
            sandbox.run(args + a, stdin: stdin, env: env, timeout: 60)
        }

        /// The stored document, read with the store's own tools (age / secret-tool).
        func stored() throws -> [String: Any]? {
            let r: RunResult
            if store == "file" {
                guard FileManager.default.fileExists(atPath: sandbox.dataDir + "/\(profile).age") else { return nil }
                r = Harness.run("/usr/bin/age", ["-d", "-i", sandbox.configDir + "/identity", sandbox.dataDir + "/\(profile).age"], env: sandbox.env)
            } else {
                r = Harness.run("/usr/bin/secret-tool", ["lookup", "service", "chatgpt-credential", "profile", profile], env: sandbox.env)
                if r.status != 0 && r.stdoutBytes.isEmpty { return nil }
            }
            guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
                throw Failure("cannot read the stored document: \(r.status) \(r.stderr)")
            }
            return o
        }

        /// Whether the stored refresh token is the live one of its family at the issuer.
        func storedRefreshTokenIsLive() throws -> Bool {
            guard let rt = try stored()?["refresh_token"] as? String else { return false }
            return (try issuer.stats()["active_refresh_tokens"] as? [String])?.contains(rt) == true
        }

        /// Waits until the issuer has received `n` refresh requests (the window is open).
        func waitForRefreshRequests(_ n: Int = 1, _ timeout: Double = 15) throws -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if try issuer.counter("refresh_requests") >= n { return true }
                usleep(5_000)
            }
            return false
        }
    }

    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: return "SIGINT"
        case SIGTERM: return "SIGTERM"
        case SIGHUP: return "SIGHUP"
        case SIGQUIT: return "SIGQUIT"
        default: return "signal \(signal)"
        }
    }

    /// `args` started with the refresh answered after 2 s; `signal` sent 1 s into the refresh.
    /// Returns the run, after checking that the next `get` works with a new token and no reuse.
    @discardableResult
    func interruptedRefresh(_ w: World, _ args: [String], signal: Int32, stdin: String? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) throws -> RunResult {
        try w.issuer.configure(["refresh_delay": 2])
        let p = try Background(Harness.binary, w.args + args, env: w.sandbox.env, stdin: stdin.map { Array($0.utf8) })
        #expect(try w.waitForRefreshRequests(), "the refresh never reached the issuer", sourceLocation: sourceLocation)
        usleep(1_000_000)
        kill(p.pid, signal)
        let r = p.finish()
        #expect(!r.signaled && r.status == 128 + signal,
                "\(Self.name(signal)): expected exit \(128 + signal), got \(r.signaled ? "killed by signal " : "")\(r.status): \(r.stderr)",
                sourceLocation: sourceLocation)
        #expect(r.stdoutBytes.isEmpty, "stdout after \(Self.name(signal)): \(r.stdout)", sourceLocation: sourceLocation)
        #expect(try w.issuer.counter("refresh_success") == 1, sourceLocation: sourceLocation)
        // The rotation was saved: the next get prints the new token without asking the issuer again.
        try w.issuer.configure(["refresh_delay": 0])
        let next = w.run(["get"])
        #expect(next.status == 0, "next get after \(Self.name(signal)): \(next.status) \(next.stderr)", sourceLocation: sourceLocation)
        #expect(next.stdout.hasPrefix("eyJ") && next.stdout != w.tokens.accessToken + "\n", sourceLocation: sourceLocation)
        #expect(try w.stored()?["access_token"] as? String == next.stdout.trimmingCharacters(in: .newlines), sourceLocation: sourceLocation)
        #expect(try w.storedRefreshTokenIsLive(), sourceLocation: sourceLocation)
        #expect(try w.issuer.counter("refresh_requests") == 1, sourceLocation: sourceLocation)
        #expect(try w.issuer.counter("refresh_reused") == 0, sourceLocation: sourceLocation)
        // And it can be refreshed again: the stored refresh token is the live one.
        let again = w.run(["get", "--force-refresh"])
        #expect(again.status == 0, "\(again.stderr)", sourceLocation: sourceLocation)
        #expect(try w.issuer.counter("refresh_reused") == 0, sourceLocation: sourceLocation)
        return r
    }

    // MARK: get, each signal, each store

    @Test(arguments: ["file", "secret-service"], [SIGTERM, SIGINT, SIGHUP, SIGQUIT])
    func getFinishesTheSaveThenExits128PlusTheSignal(store: String, signal: Int32) throws {
        if store == "secret-service" && !Self.bus { Issue.record("no D-Bus session: run the suite through scripts/with-keyring"); return }
        let w = try World(store: store)
        try interruptedRefresh(w, ["get"], signal: signal)
    }

    @Test func everyFormatOfGetDefersTheSignal() throws {
        let w = try World(store: "file")
        try interruptedRefresh(w, ["get", "--json"], signal: SIGTERM)
        let w2 = try World(store: "file")
        try interruptedRefresh(w2, ["get", "--header"], signal: SIGINT)
    }

    // MARK: the other callers of a refresh

    /// `sink run` (man page (7), SINKS): the same deferral as `get`; the sink holds the token that
    /// was saved.
    @Test func sinkRunDefersTheSignalAndTheSinkHoldsTheSavedToken() throws {
        let w = try World(store: "file")
        let path = w.sandbox.env["HOME"]! + "/sink.token"
        let add = w.run(["sink", "add", "--format", "token", "--path", path])
        #expect(add.status == 0, "\(add.stderr)")
        try interruptedRefresh(w, ["sink", "run"], signal: SIGTERM)
        let stored = try #require(try w.stored())
        // interruptedRefresh's own force-refresh at the end rewrote it again: it is what is stored.
        #expect(FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } == (stored["access_token"] as? String).map { $0 + "\n" })
    }

    @Test func usageRefreshDefersTheSignal() throws {
        let w = try World(store: "file")
        try interruptedRefresh(w, ["usage"], signal: SIGTERM)
        #expect(try w.issuer.counter("usage_requests") == 0) // nothing after the signal
    }

    /// A refresh that failed while a signal waited: the run ends with 128 + the signal and prints
    /// no token, so its stderr line says what happened without claiming to print the stored one.
    @Test func aFailedRefreshUnderASignalDoesNotClaimToPrint() throws {
        let w = try World(store: "file", expiresIn: 200)
        try w.issuer.configure(["faults": [["delay": 2, "status": 500], ["status": 500], ["status": 500]]])
        let p = try Background(Harness.binary, w.args + ["get"], env: w.sandbox.env)
        #expect(try w.waitForRefreshRequests(), "the refresh never reached the issuer")
        usleep(500_000)
        kill(p.pid, SIGTERM)
        let r = p.finish()
        #expect(!r.signaled && r.status == 128 + SIGTERM, "\(r.status): \(r.stderr)")
        #expect(r.stdoutBytes.isEmpty, "\(r.stdout)")
        #expect(r.stderr.contains("could not refresh the token") && !r.stderr.contains("printing"), "\(r.stderr)")
    }

    /// `usage --all`: a signal deferred during one profile's refresh ends the whole run once that
    /// save is done — no other profile's refresh token is spent after it, nothing on stdout,
    /// 128 + the signal (it went on through every profile and printed a report of errors).
    @Test func usageOfAllStopsAfterTheSignalsSave() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
        let names = (1...3).map { _ in uniqueProfile("sigall") }
        for name in names {
            let t = try issuer.seed(["expires_in": -10])
            #expect(s.run(["--profile", name, "store"], stdin: t.storeJSON).status == 0)
        }
        defer { for name in names { _ = s.run(["--profile", name, "erase", "--no-revoke"]) } }
        try issuer.configure(["refresh_delay": 2])
        let p = try Background(Harness.binary, ["usage", "--all", "--json"], env: s.env)
        let deadline = Date().addingTimeInterval(15)
        while try issuer.counter("refresh_requests") < 1 && Date() < deadline { usleep(5_000) }
        #expect(try issuer.counter("refresh_requests") == 1, "the first refresh never reached the issuer")
        usleep(1_000_000)
        kill(p.pid, SIGTERM)
        let r = p.finish()
        #expect(!r.signaled && r.status == 128 + SIGTERM, "\(r.status): \(r.stderr)")
        #expect(r.stdoutBytes.isEmpty, "stdout after SIGTERM: \(r.stdout)")
        #expect(!r.stderr.contains("DeferredSignal"), "\(r.stderr)")
        #expect(try issuer.counter("refresh_requests") == 1, "refresh tokens spent after the signal")
        #expect(try issuer.counter("refresh_reused") == 0)
    }

    /// usage's own path: the backend refuses a still-valid token (401), the one refresh is interrupted.
    @Test func usageRefreshAfterA401DefersTheSignal() throws {
        let w = try World(store: "file", expiresIn: 3600)
        try w.issuer.configure(["usage_faults": [["status": 401, "body": ["detail": "Could not validate your credentials"]]]])
        try interruptedRefresh(w, ["usage"], signal: SIGHUP)
        #expect(try w.issuer.counter("usage_requests") == 1) // the refused one; no retry after the signal
    }

    @Test(arguments: ["file", "secret-service"])
    func gitGetDefersTheSignal(store: String) throws {
        if store == "secret-service" && !Self.bus { Issue.record("no D-Bus session: run the suite through scripts/with-keyring"); return }
        let w = try World(store: store)
        try interruptedRefresh(w, ["--protocol", "git", "get"], signal: SIGTERM, stdin: "protocol=https\nhost=chatgpt.com\n\n")
    }

    @Test func dockerGetDefersTheSignalAndPrintsNothing() throws {
        let w = try World(store: "file")
        // docker's helpers report errors on stdout: not this one.
        try interruptedRefresh(w, ["--protocol", "docker", "get"], signal: SIGINT, stdin: "https://chatgpt.com")
    }

    @Test func execDefersTheSignalAndRunsNothing() throws {
        let w = try World(store: "file")
        let marker = w.sandbox.root + "/ran"
        try interruptedRefresh(w, ["exec", "--", "/usr/bin/touch", marker], signal: SIGTERM)
        #expect(!FileManager.default.fileExists(atPath: marker), "exec ran its command after SIGTERM")
    }

    /// exec's program gets the signals as the caller left them: SIGPIPE not ignored when the
    /// caller did not ignore it (the tool ignores it for itself), ignored when the caller did;
    /// none of the four deferred ones blocked or ignored, after a refresh too. env(1) sets
    /// SIGPIPE for the binary, whatever the test runner's own disposition is.
    @Test(arguments: [false, true])
    func execChildGetsTheCallersSignalState(callerIgnoresSIGPIPE: Bool) throws {
        let w = try World(store: "file")
        let setPIPE = callerIgnoresSIGPIPE ? "--ignore-signal=PIPE" : "--default-signal=PIPE"
        let r = try Background("/usr/bin/env", [setPIPE, Harness.binary] + w.args + ["exec", "--", "/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"],
                          env: w.sandbox.env).finish()
        #expect(r.status == 0, "\(r.stderr)")
        func mask(_ name: String) -> UInt64? {
            r.stdout.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .flatMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) }
        }
        let ignored = try #require(mask("SigIgn")), blocked = try #require(mask("SigBlk"))
        func bit(_ s: Int32) -> UInt64 { 1 << UInt64(s - 1) }
        #expect((ignored & bit(SIGPIPE) != 0) == callerIgnoresSIGPIPE, "SIGPIPE in exec's program: SigIgn \(String(ignored, radix: 16))")
        for s in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            #expect(ignored & bit(s) == 0 && blocked & bit(s) == 0, "\(Self.name(s)) ignored or blocked in exec's program")
        }
    }

    /// `timeout 1 chatgpt-credential get --force-refresh` against an issuer that answers in 2 s.
    @Test func timeoutOneSecondDuringAForcedRefresh() throws {
        let w = try World(store: "file", expiresIn: 3600)
        try w.issuer.configure(["refresh_delay": 2])
        let r = try Background("/usr/bin/timeout", ["1", Harness.binary] + w.args + ["get", "--force-refresh"], env: w.sandbox.env).finish()
        #expect(r.status == 124, "timeout's own exit status for a command it stopped: \(r.status) \(r.stderr)")
        #expect(r.stdoutBytes.isEmpty)
        #expect(try w.issuer.counter("refresh_success") == 1)
        #expect(try w.storedRefreshTokenIsLive(), "the rotation was not saved")
        try w.issuer.configure(["refresh_delay": 0])
        let next = w.run(["get", "--force-refresh"])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try w.issuer.counter("refresh_reused") == 0)
    }

    // MARK: outside the window

    /// Waiting for the lock another process holds is outside the window: SIGTERM acts at once.
    @Test func aSignalWhileWaitingForTheLockActsAtOnce() throws {
        let w = try World(store: "file")
        try w.issuer.configure(["refresh_delay": 3])
        let holder = try Background(Harness.binary, w.args + ["get"], env: w.sandbox.env)
        #expect(try w.waitForRefreshRequests())
        let waiter = try Background(Harness.binary, w.args + ["get"], env: w.sandbox.env)
        // The fact waited for: the waiter has opened the profile's lock file, which the holder
        // keeps locked through its refresh, so it is now in the lock's wait (FileLock.lock).
        #expect(Hostile.waitUntil(15) { Hostile.hasOpen(waiter.pid, w.sandbox.lockFile(w.profile)) },
                "the waiter never reached the lock \(w.sandbox.lockFile(w.profile))")
        #expect(try w.issuer.counter("refresh_success") == 0, "the holder's refresh ended before the waiter reached the lock")
        let sent = Date()
        kill(waiter.pid, SIGTERM)
        let r = waiter.finish()
        #expect(Date().timeIntervalSince(sent) < 1, "the waiter took \(Date().timeIntervalSince(sent)) s to stop")
        #expect(r.signaled && r.status == SIGTERM, "\(r.status) \(r.stderr)")
        #expect(holder.finish().status == 0)
    }

    /// On a terminal the handler says why the process does not stop at once.
    @Test func onATerminalItSaysItIsFinishingTheSave() throws {
        let w = try World(store: "file")
        try w.issuer.configure(["refresh_delay": 2])
        // script(1) gives the binary a pty for stdin, stdout and stderr.
        let command = ([Harness.binary] + w.args + ["get"]).map { "'\($0)'" }.joined(separator: " ")
        let p = try Background("/usr/bin/script", ["-qefc", command, "/dev/null"], env: w.sandbox.env)
        #expect(try w.waitForRefreshRequests())
        usleep(1_000_000)
        let pids = Hostile.children(of: p.pid)
        #expect(pids.count == 1)
        for pid in pids { kill(pid, SIGTERM) }
        let r = p.finish()
        #expect(r.stdout.contains("finishing saving the new tokens"), "\(r.stdout)")
        #expect(!r.stdout.contains("eyJ"), "the token was printed: \(r.stdout)")
        #expect(try w.storedRefreshTokenIsLive())
    }

    // MARK: login

    /// The device flow's code exchange: SIGTERM while the issuer takes 2 s to answer. The
    /// credential is saved, exit 143; Ctrl-C while polling still cancels at once (LoginTests).
    @Test(arguments: [SIGTERM, SIGINT])
    func deviceLoginExchangeDefersTheSignal(signal: Int32) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        try issuer.configure(["interval": 0, "approve_after": 0, "exchange_faults": [["delay": 2]]])
        let p = try Background(Harness.binary, ["login", "--device"], env: s.env)
        let deadline = Date().addingTimeInterval(15)
        while try issuer.counter("faults_served") == 0 && Date() < deadline { usleep(5_000) }
        #expect(try issuer.counter("faults_served") == 1, "the exchange never reached the issuer")
        usleep(1_000_000)
        kill(p.pid, signal)
        let r = p.finish()
        #expect(!r.signaled && r.status == 128 + signal, "\(r.status) \(r.stderr)")
        #expect(r.stdoutBytes.isEmpty)
        #expect(try issuer.counter("code_exchanges") == 1)
        let get = s.run(["get"])
        #expect(get.status == 0, "the sign-in was not saved: \(get.status) \(get.stderr)")
        #expect(get.stdout.hasPrefix("eyJ"))
    }

    /// The paste-back sign-in: SIGHUP (the terminal closed) while the pasted code is exchanged.
    @Test func pasteBackLoginExchangeDefersTheSignal() throws {
        let f = try LoginFixture(["exchange_faults": [["delay": 2]]])
        let live = try LiveRun(f.sandbox, ["login", "--no-browser"])
        #expect(live.waitFor("press Enter"))
        let paste = PasteBackLoginTests()
        let url = try #require(paste.authorizeURL(in: live.stderr))
        let address = try #require(paste.finalAddress(url, issuerPort: f.issuer.port))
        live.send(address + "\n")
        let deadline = Date().addingTimeInterval(15)
        while try f.issuer.counter("faults_served") == 0 && Date() < deadline { usleep(5_000) }
        usleep(1_000_000)
        live.signal(SIGHUP)
        let status = live.wait(timeout: 30)
        #expect(status == 128 + SIGHUP, "\(String(describing: status)) \(live.stderr)")
        #expect(try f.issuer.counter("code_exchanges") == 1)
        let get = f.run(["get"])
        #expect(get.status == 0, "the sign-in was not saved: \(get.status) \(get.stderr)")
    }
}

