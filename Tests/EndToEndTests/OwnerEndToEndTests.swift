import Foundation
import Testing
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One owner for every change to a credential (ARCHITECTURE.md, "Rules of thumb"),
/// through the built binary against the test issuer and real keyrings: every case issue 12
/// found on the old main, each failing there and passing here.
@Suite(.serialized) struct OwnerEndToEndTests {
    struct Failure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    /// A sandbox signed in to `profile` in `store` with a fresh token family of the test issuer.
    final class World {
        let issuer: TestIssuer
        let sandbox: Sandbox
        let profile: String
        let store: String
        var tokens: TestIssuer.SeededTokens

        init(expiresIn: Int64, store: String = "file", bus: Sandbox.Bus = .inherit, profile: String? = nil) throws {
            issuer = try TestIssuer()
            sandbox = Sandbox(bus: bus)
            sandbox.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
            self.store = store
            self.profile = profile ?? uniqueProfile("owner")
            tokens = try issuer.seed(["expires_in": expiresIn])
            let r = run(["store"], stdin: tokens.storeJSON)
            guard r.status == 0 else { throw Failure("store failed: \(r.status) \(r.stderr)") }
        }

        deinit { _ = run(["erase", "--no-revoke"]) }

        /// `chatgpt-credential --profile P --store S ARGS…`
        func run(_ args: [String], stdin: String? = nil, env: [String: String] = [:], store: String? = nil, timeout: Double = 60) -> RunResult {
            sandbox.run(["--profile", profile, "--store", store ?? self.store] + args, stdin: stdin, env: env, timeout: timeout)
        }

        /// The same, started in the background.
        func start(_ args: [String], env: [String: String] = [:]) throws -> Background {
            var e = sandbox.env
            for (k, v) in env { e[k] = v }
            return try Background(Harness.binary, ["--profile", profile, "--store", store] + args, env: e)
        }

        func counter(_ name: String) throws -> Int { try issuer.counter(name) }
    }

    static let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil

    // MARK: erase during a refresh

    @Test(arguments: ["file", "secret-service"])
    func eraseDuringARefreshStaysErased(store: String) throws {
        guard store == "file" || Self.bus else { return }
        let w = try World(expiresIn: 3600, store: store)
        try w.issuer.configure(["refresh_delay": 3])
        let get = try w.start(["get", "--force-refresh"])
        // The fact waited for: the refresh is at the issuer (3 s), so get holds the lock erase needs.
        #expect(try Hostile.waitUntil(15) { try w.counter("refresh_requests") >= 1 }, "the refresh never reached the issuer")
        let erase = w.run(["erase", "--no-revoke"])
        let got = get.finish()
        #expect(got.status == 0, "\(got.stderr)")
        #expect(got.stdout.hasPrefix("eyJ") && got.stdout != w.tokens.accessToken + "\n")
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(erase.stderr.contains("erased profile '\(w.profile)'"), "\(erase.stderr)")
        // erase waited for the refresh (one lock), then removed what it had saved.
        let status = w.run(["status"])
        #expect(status.status == 3, "\(status.stdout) \(status.stderr)")
        #expect(w.run(["get"]).status == 3)
        #expect(try w.counter("refresh_success") == 1)
    }

    // MARK: two data directories, one keyring

    @Test(.enabled(if: OwnerEndToEndTests.bus, "needs the keyring make test provides"))
    func twoDataDirectoriesShareOneLock() throws {
        let w = try World(expiresIn: 100, store: "auto") // auto with the keyring: stored there
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/\(w.profile).age"))
        let sandboxed = w.sandbox.root + "/home/.var/app/com.example.IDE/data"
        mkdir(w.sandbox.root + "/home/.var", 0o700)
        mkdir(w.sandbox.root + "/home/.var/app", 0o700)
        mkdir(w.sandbox.root + "/home/.var/app/com.example.IDE", 0o700)
        mkdir(sandboxed, 0o700)
        let base = w.sandbox.env
        let results = concurrentRuns(10) { [profile = w.profile] in
            var e = base
            if Int.random(in: 0..<2) == 1 { e["XDG_DATA_HOME"] = sandboxed }
            return Harness.run(Harness.binary, ["--profile", profile, "get"], env: e, timeout: 60)
        }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(Set(results.map(\.stdout)).count == 1)
        #expect(try w.counter("refresh_requests") == 1)
        #expect(try w.counter("refresh_reused") == 0)
        var other = base
        other["XDG_DATA_HOME"] = sandboxed
        let after = Harness.run(Harness.binary, ["--profile", w.profile, "get"], env: other)
        #expect(after.status == 0 && after.stdout == results[0].stdout, "\(after.stderr)")
    }

    // MARK: a full disk at refresh time

    @Test func fullDiskAtRefreshTimeSpendsNothing() throws {
        guard geteuid() == 0 else { Issue.record("mounting a tmpfs needs root (CI has it)"); return }
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let data = s.env["XDG_DATA_HOME"]!
        let mounted = Harness.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", data], env: ["PATH": "/usr/bin:/bin"])
        try #require(mounted.status == 0, "mount: \(mounted.stderr)")
        defer { _ = Harness.run("/bin/umount", ["-l", data], env: ["PATH": "/usr/bin:/bin"]) }
        let t = try issuer.seed(["expires_in": 200])
        #expect(s.run(["store"], stdin: t.storeJSON).status == 0)
        // Fill the rest of the tmpfs.
        _ = Harness.run("/bin/sh", ["-c", "cat /dev/zero > \"$0\"/filler 2>/dev/null; true", data], env: ["PATH": "/usr/bin:/bin"])

        let r = s.run(["get"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == t.accessToken + "\n") // the stored token, still valid for 200 s
        #expect(r.stderr.contains("not refreshing, the refreshed tokens could not be saved"), "\(r.stderr)")
        #expect(r.stderr.contains("free some space"), "\(r.stderr)")
        #expect(try issuer.counter("refresh_requests") == 0) // nothing spent
        // Without a usable token: exit 5 saying what to free.
        let strict = s.run(["get", "--min-ttl", "400"])
        #expect(strict.status == 5, "\(strict.stderr)")
        #expect(strict.stderr.contains("free some space"), "\(strict.stderr)")
        #expect(Hostile.isOneLine(strict.stderr))
        #expect(try issuer.counter("refresh_requests") == 0)

        // Once there is room again: one refresh, no reuse, still signed in.
        unlink(data + "/filler")
        let again = s.run(["get"])
        #expect(again.status == 0 && again.stdout != t.accessToken + "\n", "\(again.stderr)")
        #expect(try issuer.counter("refresh_success") == 1)
        #expect(try issuer.counter("refresh_reused") == 0)
        #expect(s.run(["get"]).stdout == again.stdout)
        #expect(Hostile.listing(s.dataDir) == ["\(s.profile).age", "\(s.profile).lock"]) // no reservation left behind
    }

    // MARK: a keyring that dies or stops

    /// A private D-Bus session with its own unlocked gnome-keyring, and the keyring daemon's pid.
    final class PrivateKeyring {
        let bus: PrivateBus
        let pid: Int32
        init(_ sandbox: Sandbox) throws {
            var env = sandbox.env
            env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
            guard let bus = PrivateBus(env: env) else { throw Failure("could not start dbus-daemon") }
            let unlock = bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/keyring.log")
            guard unlock.status == 0 else { throw Failure("gnome-keyring-daemon --unlock failed") }
            // The daemon claims the name shortly after --unlock returns.
            var owner = RunResult(status: -1, stdoutBytes: [], stderr: "")
            for _ in 0..<50 {
                owner = bus.sh("dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets")
                if owner.status == 0 { break }
                usleep(100_000)
            }
            guard let last = owner.stdout.split(separator: " ").last, let pid = Int32(last.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw Failure("no owner of org.freedesktop.secrets: \(owner.stdout) \(owner.stderr)")
            }
            self.bus = bus
            self.pid = pid
            sandbox.env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        }
        deinit {
            kill(pid, SIGCONT)
            kill(pid, SIGKILL)
        }
    }

    @Test func aStoppedKeyringIsNeverNotSignedIn() throws {
        let w = try World(expiresIn: 3600, store: "auto", bus: .none)
        let keyring = try PrivateKeyring(w.sandbox)
        // Into the keyring; the file copy the first store made is removed by this one.
        #expect(w.run(["store"], stdin: w.tokens.storeJSON, store: "secret-service").status == 0)
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/\(w.profile).age"))
        #expect(w.run(["get"]).stdout == w.tokens.accessToken + "\n")
        kill(keyring.pid, SIGSTOP)
        // While its access-cache entry is valid, the token is served without asking the keyring
        // (man page ACCESS CACHE); the store itself is never read as "not signed in".
        let cached = w.run(["get"], env: ["CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "1"], timeout: 20)
        #expect(cached.status == 0 && cached.stdout == w.tokens.accessToken + "\n", "\(cached.stderr)")
        let env = ["CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "1", "CHATGPT_CREDENTIAL_CACHE": "off"]
        for args in [["get"], ["status"], ["erase", "--no-revoke"]] {
            let started = Date()
            let r = w.run(args, env: env, timeout: 20)
            #expect(r.status == 5, "\(args): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("did not answer"), "\(args): \(r.stderr)")
            #expect(!r.stderr.contains("not signed in") && !r.stderr.contains("nothing to erase"), "\(args): \(r.stderr)")
            #expect(Date().timeIntervalSince(started) < 6, "\(args) took too long")
        }
        // erase removed the cache entry although the keyring copy remains: now get asks the keyring.
        let afterErase = w.run(["get"], env: ["CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "1"], timeout: 20)
        #expect(afterErase.status == 5 && afterErase.stderr.contains("did not answer"), "\(afterErase.stderr)")
        kill(keyring.pid, SIGCONT)
        // Nothing was deleted.
        let back = w.run(["get"])
        #expect(back.status == 0 && back.stdout == w.tokens.accessToken + "\n", "\(back.stderr)")
    }

    /// A keyring that stops answering under a running broker: every request that queued behind
    /// the first one's call on the profile's lock (a refresh is due for `min_ttl`, so each takes
    /// it to re-read the store) gets the same "did not answer" (503) at once, not one more
    /// deadline each (8 requests took 8 deadlines), and client mode exits 5; once the keyring
    /// answers again, so does the next request.
    @Test func aStoppedKeyringAnswersACrowdOfBrokerRequestsInOneDeadline() throws {
        let w = try World(expiresIn: 3600, store: "auto", bus: .none)
        let keyring = try PrivateKeyring(w.sandbox)
        #expect(w.run(["store"], stdin: w.tokens.storeJSON, store: "secret-service").status == 0)
        w.sandbox.env["CHATGPT_CREDENTIAL_DBUS_TIMEOUT"] = "1"
        let socket = w.sandbox.root + "/broker.sock"
        let broker = try LiveRun(w.sandbox, ["--store", "secret-service", "serve", "--socket", socket])
        defer { broker.signal(SIGTERM); _ = broker.wait(timeout: 10) }
        try #require(broker.waitFor("broker listening on", timeout: 20), "\(broker.stderr)")
        kill(keyring.pid, SIGSTOP)
        defer { kill(keyring.pid, SIGCONT) }
        let env = w.sandbox.env
        let results = Mutex<[(status: String, seconds: Double)]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let started = Date()
            let r = Harness.run("/usr/bin/curl", ["-sS", "--max-time", "30", "--unix-socket", socket, "-o", "/dev/null", "-w", "%{http_code}", "http://localhost/v1/token?min_ttl=3599"], env: env, timeout: 40)
            let seconds = Date().timeIntervalSince(started)
            results.withLock { $0.append((r.stdout, seconds)) }
        }
        for r in results.withLock({ $0 }) {
            #expect(r.status == "503", "\(r.status) \(broker.stderr)")
            #expect(r.seconds < 4, "a request waited \(r.seconds) s behind the others' calls")
        }
        let client = w.run(["--broker", "unix:" + socket, "get", "--min-ttl", "3599"], timeout: 20)
        #expect(client.status == 5 && client.stderr.contains("did not answer"), "\(client.status) \(client.stderr)")
        kill(keyring.pid, SIGCONT)
        let back = w.run(["--broker", "unix:" + socket, "get"], timeout: 20)
        #expect(back.status == 0 && back.stdout == w.tokens.accessToken + "\n", "\(back.stderr)")
    }

    @Test func aKeyringKilledMidRefreshSavesToTheFileAndPrintsTheNewToken() throws {
        let w = try World(expiresIn: 100, store: "auto", bus: .none)
        let keyring = try PrivateKeyring(w.sandbox)
        #expect(w.run(["store"], stdin: w.tokens.storeJSON, store: "secret-service").status == 0)
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/\(w.profile).age"))
        try w.issuer.configure(["refresh_delay": 2])
        let get = try w.start(["get"], env: ["CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "2"])
        // The fact waited for: the refresh is at the issuer (2 s), read from the keyring, not yet saved.
        #expect(try Hostile.waitUntil(15) { try w.counter("refresh_requests") >= 1 }, "the refresh never reached the issuer")
        kill(keyring.pid, SIGKILL)
        let r = get.finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("eyJ") && r.stdout != w.tokens.accessToken + "\n")
        #expect(r.stderr.contains("could not save the refreshed tokens to the Secret Service"), "\(r.stderr)")
        #expect(r.stderr.contains("saved them to \(w.sandbox.dataDir)/\(w.profile).age instead"), "\(r.stderr)")
        // The file copy is what auto serves now: the same token, no second refresh, no reuse.
        try w.issuer.configure(["refresh_delay": 0])
        let next = w.run(["get"])
        #expect(next.stdout == r.stdout, "\(next.stderr)")
        #expect(try w.counter("refresh_success") == 1)
        #expect(try w.counter("refresh_reused") == 0)
    }

    // MARK: an explicit store over a stale copy

    @Test(.enabled(if: OwnerEndToEndTests.bus, "needs the keyring make test provides"))
    func explicitStoreLoginRemovesTheStaleCopy() throws {
        let w = try World(expiresIn: 3600, store: "file")
        #expect(w.run(["get", "--account-id"]).stdout == w.tokens.accountId + "\n")
        try w.issuer.configure(["interval": 0, "approve_after": 0, "account_id": "acct-newer"])
        let login = w.run(["login", "--device"], store: "secret-service")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/\(w.profile).age"))
        let auto = w.run(["get", "--account-id"], store: "auto")
        #expect(auto.stdout == "acct-newer\n", "\(auto.stderr)")
    }

    // MARK: a crowd against a failing issuer

    @Test func aCrowdAgainstAFailingIssuerMakesAHandfulOfRequests() throws {
        let w = try World(expiresIn: 200, store: "file", bus: .none)
        try w.issuer.configure(["faults": Array(repeating: ["status": 500], count: 200)])
        let env = w.sandbox.env
        let started = Date()
        let results = concurrentRuns(40) { [profile = w.profile] in
            Harness.run(Harness.binary, ["--profile", profile, "--store", "file", "get"], env: env, timeout: 90)
        }
        let wall = Date().timeIntervalSince(started)
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.filter { $0.status != 0 }.map(\.stderr))")
        #expect(results.allSatisfy { $0.stdout == w.tokens.accessToken + "\n" })
        #expect(results.allSatisfy { $0.stderr.contains("could not refresh the token") })
        let requests = try w.counter("refresh_requests")
        #expect(requests >= 1 && requests <= 3, "\(requests) refresh requests")
        #expect(wall < 30, "\(wall) s")
        print("OwnerEndToEndTests: 40 gets against a failing issuer: \(requests) requests, \(String(format: "%.1f", wall)) s")
    }

    // MARK: no refresh loops

    @Test func minTTLBeyondTheIssuersLifetimeRefreshesOnce() throws {
        let w = try World(expiresIn: 3600, store: "file", bus: .none)
        let first = w.run(["get", "--min-ttl", "7200"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout != w.tokens.accessToken + "\n")
        #expect(first.stderr.contains("the issuer grants tokens valid for 1 h 0 min, less than the 7200 s asked for"), "\(first.stderr)")
        for _ in 0..<3 {
            let again = w.run(["get", "--min-ttl", "7200"])
            #expect(again.status == 0 && again.stdout == first.stdout)
            #expect(again.stderr.contains("less than the 7200 s asked for"), "\(again.stderr)")
        }
        #expect(try w.counter("refresh_requests") == 1)
    }

    @Test(arguments: [-7200, 7200])
    func anIssuerClockThatDisagreesCausesNoLoop(offset: Int) throws {
        let w = try World(expiresIn: 100, store: "file", bus: .none)
        try w.issuer.configure(["clock_offset": offset])
        let first = w.run(["get"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try w.counter("refresh_requests") == 1)
        for _ in 0..<3 { #expect(w.run(["get"]).stdout == first.stdout) }
        #expect(try w.counter("refresh_requests") == 1)
        // The expiry is receipt + expires_in, whatever the token's own exp says.
        let status = try #require(try JSONSerialization.jsonObject(with: Data(w.run(["status", "--json"]).stdoutBytes)) as? [String: Any])
        let left = status["expires_in"] as? Int ?? 0
        #expect(left > 3500 && left <= 3600, "\(status)")
    }

    @Test func withoutExpiresInATokenAlreadyExpiredOnArrivalIsNotRefreshedEveryCall() throws {
        let w = try World(expiresIn: 100, store: "file", bus: .none)
        try w.issuer.configure(["clock_offset": -7200, "omit_in_refresh": ["expires_in"]])
        let first = w.run(["get"])
        #expect(first.status == 0, "\(first.stderr)")
        let again = w.run(["get"])
        #expect(again.status == 0 && again.stdout == first.stdout, "\(again.stderr)")
        #expect(again.stderr.contains("is not refreshed again within 60 s"), "\(again.stderr)")
        #expect(try w.counter("refresh_requests") == 1)
    }

    // MARK: status

    @Test func statusExitCodesAndJSONAgree() throws {
        let w = try World(expiresIn: -10, store: "file", bus: .none)
        try w.issuer.configure(["faults": [["status": 401, "body": ["error": ["code": "refresh_token_reused"]]]]])
        #expect(w.run(["get"]).status == 3)
        let text = w.run(["status"])
        #expect(text.status == 3, "\(text.stderr)")
        #expect(text.stdout.hasPrefix("Sign-in needed for user@example.com (plus), account acct-test-0001\n"), "\(text.stdout)")
        #expect(text.stderr.contains("refresh_token_reused"))
        let json = w.run(["status", "--json"])
        #expect(json.status == 3)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [String: Any])
        #expect(o["signed_in"] as? Bool == false)
        #expect(o["needs_login"] as? Bool == true)
        #expect(o["refresh_rejected"] as? String == "refresh_token_reused")
        let all = w.run(["status", "--all"])
        #expect(all.status == 3)
        let row = all.stdout.split(separator: "\n").first { $0.dropFirst(2).hasPrefix(w.profile + " ") }
        #expect(row?.contains(" file ") == true && row?.hasSuffix("  sign in again") == true, "\(all.stdout)")
        // A new store makes it usable again: exit 0.
        let fresh = try w.issuer.seed()
        #expect(w.run(["store"], stdin: fresh.storeJSON).status == 0)
        #expect(w.run(["status"]).status == 0)
        #expect(w.run(["status", "--all"]).status == 0)
    }

    @Test func statusOfARejectedButStillValidTokenIsZeroAndSaysSo() throws {
        let w = try World(expiresIn: 200, store: "file", bus: .none)
        try w.issuer.configure(["faults": [["status": 401, "body": ["error": ["code": "refresh_token_invalidated"]]]]])
        #expect(w.run(["get"]).status == 0)
        let r = w.run(["status", "--json"])
        #expect(r.status == 0)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any])
        #expect(o["signed_in"] as? Bool == true && o["needs_login"] as? Bool == true)
        #expect(w.run(["status"]).stdout.contains("  sign-in:       needed before this token expires"))
        // status --all flags it too (exit 0: get still works), on the profile's row of the table.
        let all = w.run(["status", "--all"])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.hasPrefix("  PROFILE "), "\(all.stdout)")
        let row = all.stdout.split(separator: "\n").first { $0.dropFirst(2).hasPrefix(w.profile + " ") }
        #expect(row?.hasSuffix("  sign in again") == true, "\(all.stdout)")
    }

    @Test func statusOnALockedKeyringIsExit5NotNobody() throws {
        let s = Sandbox(bus: .none)
        var base = s.env
        base.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        base["XDG_RUNTIME_DIR"] = s.root + "/run1"
        mkdir(s.root + "/run1", 0o700)
        do { // create the keyring and an item, then come back without unlocking
            let bus = try #require(PrivateBus(env: base))
            #expect(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: s.root + "/k1.log").status == 0)
            #expect(bus.sh("secret-tool store --label=x service chatgpt-credential profile locked-one", stdin: "{}").status == 0)
        }
        base["XDG_RUNTIME_DIR"] = s.root + "/run2"
        mkdir(s.root + "/run2", 0o700)
        let bus = try #require(PrivateBus(env: base))
        #expect(bus.startDaemon("gnome-keyring-daemon --start --components=secrets", log: s.root + "/k2.log").status == 0)
        let r = Harness.run(Harness.binary, ["status", "--all"], env: bus.env)
        #expect(r.status == 5, "\(r.stdout) \(r.stderr)")
        #expect(!r.stdout.contains("No profiles signed in."))
        #expect(r.stderr.contains("locked"), "\(r.stderr)")
        let one = Harness.run(Harness.binary, ["--profile", "locked-one", "status"], env: bus.env)
        #expect(one.status == 5 && one.stderr.contains("locked"), "\(one.stderr)")
    }

    // MARK: stdout that cannot be written

    @Test(arguments: [">/dev/full", ">&-"])
    func anAnswerThatCannotBeWrittenIsExit1(redirect: String) throws {
        let w = try World(expiresIn: 3600, store: "file", bus: .none)
        var env = w.sandbox.env
        env["CCRED_BIN"] = Harness.binary
        env["CCRED_PROFILE"] = w.profile
        let r = Harness.run("/bin/sh", ["-c", "exec \"$CCRED_BIN\" --profile \"$CCRED_PROFILE\" --store file get \(redirect)"], env: env)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr) && r.stderr.contains("cannot write to standard output"), "\(r.stderr)")
        #expect(!r.stderr.contains(w.tokens.accessToken))
        // Nothing else received the answer: the lock directory holds only the lock.
        for name in Hostile.listing(w.sandbox.lockDir) {
            let bytes = FileManager.default.contents(atPath: w.sandbox.lockDir + "/" + name) ?? Data()
            #expect(!String(decoding: bytes, as: UTF8.self).contains(w.tokens.accessToken), "\(name)")
        }
    }

    // MARK: erase

    @Test(arguments: ["file", "secret-service"])
    func eraseRemovesADamagedCopy(store: String) throws {
        guard store == "file" || Self.bus else { return }
        let s = Sandbox()
        let profile = uniqueProfile("damaged")
        if store == "file" {
            mkdir(s.dataDir, 0o700)
            #expect(FileManager.default.createFile(atPath: s.dataDir + "/\(profile).age", contents: Data("age-encryption.org/v1\ngarbage".utf8),
                                                   attributes: [.posixPermissions: 0o600]))
        } else {
            #expect(Harness.run("/usr/bin/secret-tool", ["store", "--label=x", "service", "chatgpt-credential", "profile", profile],
                                env: s.env, stdin: Array("not json".utf8)).status == 0)
        }
        let get = s.run(["--profile", profile, "--store", store, "get"])
        #expect(get.status == 5, "\(get.stderr)")
        #expect(get.stderr.contains("remove it with 'chatgpt-credential --profile \(profile) erase' and sign in again"), "\(get.stderr)")
        let erase = s.run(["--profile", profile, "erase"])
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(s.run(["--profile", profile, "--store", store, "get"]).status == 3)
    }

    /// A passphrase file this run cannot decrypt (no passphrase at hand) is still ours: erase
    /// removes it (unrevoked, and says so) instead of reporting "nothing to erase".
    @Test func eraseRemovesAPassphraseFileItCannotRead() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let pass = s.root + "/pass"
        #expect(FileManager.default.createFile(atPath: pass, contents: Data("hunter2\n".utf8), attributes: [.posixPermissions: 0o600]))
        let t = try issuer.seed()
        #expect(s.run(["store"], stdin: t.storeJSON, env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pass]).status == 0)
        #expect(FileManager.default.fileExists(atPath: s.credentialPath()))
        let r = s.run(["--non-interactive", "erase"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("could not be read") && r.stderr.contains("was not revoked"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.credentialPath()))
        #expect(try issuer.counter("revocations") == 0)
    }

    /// Another user's file at the store path is refused by erase, whatever its mode, and stays.
    @Test(arguments: [0o600, 0o644])
    func eraseRefusesAnotherUsersFile(mode: Int) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer)
        #expect(chown(s.credentialPath(), Hostile.nobody, Hostile.nobody) == 0)
        #expect(chmod(s.credentialPath(), mode_t(mode)) == 0)
        let r = s.run(["erase", "--no-revoke"])
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("belongs to another user"), "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: s.credentialPath()))
    }

    @Test(.enabled(if: OwnerEndToEndTests.bus, "needs the keyring make test provides"))
    func concurrentErasesAllSucceed() throws {
        let w = try World(expiresIn: 3600, store: "secret-service")
        let env = w.sandbox.env
        let results = concurrentRuns(8) { [profile = w.profile] in
            Harness.run(Harness.binary, ["--profile", profile, "erase", "--no-revoke"], env: env)
        }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(results.filter { $0.stderr.contains("erased profile") }.count == 1)
        #expect(w.run(["get"]).status == 3)
    }

    @Test func eraseOfACodexImportDoesNotRevoke() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let t = try issuer.seed()
        let codex = s.root + "/codex"
        mkdir(codex, 0o700)
        #expect(FileManager.default.createFile(atPath: codex + "/auth.json", contents: Data(t.codexAuthJSON.utf8), attributes: [.posixPermissions: 0o600]))
        #expect(s.run(["store", "--from-codex"], env: ["CODEX_HOME": codex]).status == 0)
        let r = s.run(["erase"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("the refresh token was not revoked: it came from Codex"), "\(r.stderr)")
        #expect(try issuer.counter("revocations") == 0)
        #expect(s.run(["get"]).status == 3)
        // A credential of our own is revoked.
        let own = try issuer.seed()
        #expect(s.run(["store"], stdin: own.storeJSON).status == 0)
        #expect(s.run(["erase"]).status == 0)
        #expect(try issuer.counter("revocations") == 1)
    }

    // MARK: soak: every pair of mutating verbs at once

    /// A few hundred rounds, each running two mutating verbs against one profile at the same
    /// time — every pair of store, login, erase (revoking or not), a forced refresh and git's
    /// erase. After every round exactly one consistent document is stored (its refresh token the
    /// live one of its family at the issuer, never marked rejected) or none; the issuer never sees
    /// a refresh token spent twice.
    @Test func everyPairOfMutatingVerbsAtOnce() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["interval": 0, "approve_after": 0])
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        #expect(s.run(["store"], stdin: try issuer.seed().storeJSON).status == 0)
        let verbs = ["store", "login", "erase", "erase-no-revoke", "refresh", "git-erase"]
        var pairs: [(String, String)] = []
        for (i, a) in verbs.enumerated() { for b in verbs[i...] { pairs.append((a, b)) } }
        var lastToken = ""
        var counts: [String: Int] = [:]
        let rounds = 300
        let started = Date()
        for round in 0..<rounds {
            let (a, b) = pairs[round % pairs.count]
            var inputs: [String: String] = [:]
            for verb in [a, b] where verb == "store" { inputs[verb] = try issuer.seed().storeJSON }
            let env = s.env
            let token = lastToken
            let given = inputs
            let results = concurrently([a, b].map { verb in { Self.runVerb(verb, env: env, inputs: given, token: token) } })
            for (verb, r) in zip([a, b], results) {
                counts[verb, default: 0] += 1
                let allowed: Set<Int32> = verb == "refresh" ? [0, 3] : [0]
                #expect(allowed.contains(r.status), "round \(round) \(a)+\(b): \(verb) exited \(r.status): \(r.stderr)")
                if verb == "refresh", r.status == 0 { lastToken = r.stdout.trimmingCharacters(in: .newlines) }
            }
            let stats = try issuer.stats()
            let active = Set(stats["active_refresh_tokens"] as? [String] ?? [])
            if let doc = try s.storedDocument() {
                let rt = doc["refresh_token"] as? String ?? ""
                #expect(active.contains(rt), "round \(round) \(a)+\(b): the stored refresh token is not live at the issuer")
                #expect(doc["refresh_rejected"] == nil, "round \(round) \(a)+\(b): marked rejected")
            }
            #expect(stats["refresh_reused"] as? Int == 0, "round \(round) \(a)+\(b): a refresh token was spent twice")
        }
        let elapsed = Date().timeIntervalSince(started)
        print("OwnerEndToEndTests.everyPairOfMutatingVerbsAtOnce: \(rounds) rounds of \(pairs.count) pairs in \(String(format: "%.1f", elapsed)) s; verbs run \(counts.sorted { $0.key < $1.key }); issuer refreshes \(try issuer.counter("refresh_success")), reused \(try issuer.counter("refresh_reused"))")
        #expect(try issuer.counter("refresh_reused") == 0)
    }

    static func runVerb(_ verb: String, env: [String: String], inputs: [String: String], token: String) -> RunResult {
        func run(_ args: [String], stdin: String? = nil) -> RunResult {
            Harness.run(Harness.binary, args, env: env, stdin: stdin.map { Array($0.utf8) }, timeout: 60)
        }
        switch verb {
        case "store": return run(["store"], stdin: inputs["store"])
        case "login": return run(["login", "--device"])
        case "erase": return run(["erase"])
        case "erase-no-revoke": return run(["erase", "--no-revoke"])
        case "refresh": return run(["get", "--force-refresh"])
        default: return run(["--protocol", "git", "erase"], stdin: "protocol=https\nhost=chatgpt.com\npassword=\(token)\n\n")
        }
    }
}

/// Runs each job on its own thread at once; the results in the jobs' order.
func concurrently(_ jobs: [@Sendable () -> RunResult]) -> [RunResult] {
    final class Results: @unchecked Sendable {
        var items: [RunResult?]
        let lock = NSLock()
        init(_ n: Int) { items = Array(repeating: nil, count: n) }
    }
    let results = Results(jobs.count)
    let group = DispatchGroup()
    for (i, job) in jobs.enumerated() {
        group.enter()
        Thread {
            let r = job()
            results.lock.lock(); results.items[i] = r; results.lock.unlock()
            group.leave()
        }.start()
    }
    group.wait()
    return results.items.map { $0! }
}
