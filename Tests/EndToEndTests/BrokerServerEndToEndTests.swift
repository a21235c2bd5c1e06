import Foundation
import Testing
import CredentialCore
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// `serve` through the built binary (man page BROKER): the broker started by hand and under the
/// real `systemd-socket-activate`, asked with the real `curl --unix-socket`; the answers are the
/// ones `get --json` and `usage --json` print, the refresh token never leaves, other users are
/// refused, 50 clients at once cause one refresh, and the audit line names the peer.
@Suite(.serialized) struct BrokerServerEndToEndTests {
    static let curl = "/usr/bin/curl"
    static let socketActivate = "/usr/bin/systemd-socket-activate"
    static let setpriv = "/usr/bin/setpriv"

    /// A signed-in sandbox (file store, the test issuer) and a broker it runs.
    final class World {
        let sandbox = Sandbox(bus: .none)
        let issuer: TestIssuer
        let tokens: TestIssuer.SeededTokens
        var broker: LiveRun?
        /// The socket, in a directory of its own (0755 where a test needs other users to reach it).
        let socketDir: String
        var socket: String { socketDir + "/broker.sock" }

        init(_ seed: [String: Any] = ["expires_in": 3600]) throws {
            issuer = try TestIssuer()
            tokens = try sandbox.signIn(issuer, seed)
            sandbox.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
            socketDir = sandbox.root + "/sock"
            mkdir(socketDir, 0o700)
        }

        /// Starts `serve --socket SOCKET ARGS` and waits until it listens.
        @discardableResult
        func serve(_ args: [String] = []) throws -> LiveRun {
            let run = try LiveRun(sandbox, ["serve", "--socket", socket] + args)
            broker = run
            guard run.waitFor("broker listening on", timeout: 20) else {
                throw TestIssuer.Failure(description: "the broker did not start: \(run.stderr)")
            }
            return run
        }

        /// `curl --unix-socket SOCKET http://localhost/PATH`: the body on stdout, then a line
        /// with the status (`-w`).
        func curl(_ path: String, as prefix: [String] = [], socket: String? = nil) -> (status: Int, body: String, result: RunResult) {
            let args = ["-sS", "--max-time", "20", "--unix-socket", socket ?? self.socket, "-w", "%{http_code}", "http://localhost" + path]
            let r = prefix.isEmpty ? Harness.run(BrokerServerEndToEndTests.curl, args, env: sandbox.env, timeout: 30)
                : Harness.run(prefix[0], Array(prefix.dropFirst()) + [BrokerServerEndToEndTests.curl] + args, env: sandbox.env, timeout: 30)
            // Every answer ends in a line feed; the status follows it.
            var lines = r.stdout.components(separatedBy: "\n")
            let status = Int(lines.popLast() ?? "") ?? -1
            return (status, lines.joined(separator: "\n"), r)
        }

        /// SIGTERM: the broker finishes, removes its socket and exits 0 (the status returned).
        @discardableResult
        func stop() -> Int32? {
            guard let b = broker, b.process.isRunning else { return nil }
            kill(b.process.processIdentifier, SIGTERM)
            return b.wait(timeout: 10)
        }

        deinit { stop() }
    }

    static func json(_ text: String) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    /// The audit lines of a broker's stderr.
    static func auditLines(_ run: LiveRun) -> [String] {
        run.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("chatgpt-credential: broker: 20") }
    }

    // MARK: by hand

    @Test func tokenIsWhatGetJSONPrintsAndNeverTheRefreshToken() throws {
        let w = try World()
        let broker = try w.serve()
        let get = w.sandbox.run(["get", "--json"])
        #expect(get.status == 0, "\(get.stderr)")
        let r = w.curl("/v1/token")
        #expect(r.status == 200, "\(r.result.stderr)")
        #expect(r.body == get.stdout.trimmingCharacters(in: .newlines))
        let o = try #require(Self.json(r.body))
        #expect(o["access_token"] as? String == w.tokens.accessToken)
        #expect(Set(o.keys) == ["access_token", "account_id", "expires_at", "email", "plan"])
        #expect(!r.body.contains(w.tokens.refreshToken) && !r.body.contains(w.tokens.idToken))
        // The same with the profile and min_ttl named.
        let named = w.curl("/v1/token?profile=\(w.sandbox.profile)&min_ttl=600")
        #expect(named.status == 200 && named.body == r.body)
        #expect(try w.issuer.counter("refresh_requests") == 0)

        let health = w.curl("/v1/health")
        #expect(health.status == 200 && health.body == #"{"ok":true}"#)

        // The socket is 0600 in the directory given; the broker printed nothing on stdout.
        var st = stat()
        #expect(lstat(w.socket, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK && st.st_mode & 0o777 == 0o600)
        #expect(w.stop() == 0)
        #expect(lstat(w.socket, &st) != 0, "the socket file outlived the broker")
        #expect(broker.stderr.hasSuffix("chatgpt-credential: broker: stopped by a signal; exiting\n"))
        #expect(!broker.stderr.contains(w.tokens.accessToken) && !broker.stderr.contains(w.tokens.refreshToken))
        let audit = Self.auditLines(broker)
        #expect(audit.count == 3, "\(broker.stderr)")
        #expect(audit.first?.contains(" uid=\(geteuid()) exe=\(Self.curl) path=/v1/token profile=\(w.sandbox.profile) status=200 ok") == true, "\(audit)")
    }

    @Test func minTTLBeyondTheExpiryRefreshesThroughTheOwner() throws {
        let w = try World(["expires_in": 1000])
        try w.serve()
        #expect(w.curl("/v1/token?min_ttl=600").status == 200)
        #expect(try w.issuer.counter("refresh_requests") == 0)
        let r = w.curl("/v1/token?min_ttl=2000")
        #expect(r.status == 200)
        #expect(try w.issuer.counter("refresh_requests") == 1)
        let token = Self.json(r.body)?["access_token"] as? String
        #expect(token != nil && token != w.tokens.accessToken)
        // What the broker served is what the store now holds: get prints the same token.
        #expect(w.sandbox.run(["get"]).stdout == (token ?? "") + "\n")
        #expect(!r.body.contains("refresh_token"))
    }

    @Test func usageIsWhatUsageJSONPrints() throws {
        let w = try World()
        let now = Int(Date().timeIntervalSince1970)
        try w.issuer.configure(["usage_body": UsageEndToEndTests.twoWindows(now)])
        try w.serve()
        let cli = w.sandbox.run(["usage", "--json"])
        #expect(cli.status == 0, "\(cli.stderr)")
        let r = w.curl("/v1/usage?profile=\(w.sandbox.profile)")
        #expect(r.status == 200)
        #expect(r.body == cli.stdout.trimmingCharacters(in: .newlines))
        #expect(!r.body.contains(w.tokens.accessToken))
        #expect(try w.issuer.counter("usage_requests") == 2)
    }

    @Test func failuresCarryTheStatusOfTheirExitCode() throws {
        let w = try World()
        // Without the access cache, so a store problem is seen at once.
        let broker = try w.serve(["--no-cache"])
        // Not signed in: 401, as get's exit 3.
        let missing = w.curl("/v1/token?profile=nobody")
        #expect(missing.status == 401)
        #expect(Self.json(missing.body)?["error"] as? String == "login_required")
        // Bad requests: 400.
        let badProfile = w.curl("/v1/token?profile=-rf")
        #expect(badProfile.status == 400 && Self.json(badProfile.body)?["error"] as? String == "bad_request")
        #expect(w.curl("/v1/token?min_ttl=soon").status == 400)
        let long = w.curl("/v1/token?profile=" + String(repeating: "a", count: 9000))
        #expect(long.status == 400, "\(long.result.stderr)")
        #expect(Self.json(long.body)?["message"] as? String == "the request head is larger than 8 KiB")
        // Unknown path and method.
        #expect(w.curl("/v1/refresh").status == 404)
        let post = Harness.run(Self.curl, ["-sS", "--max-time", "20", "--unix-socket", w.socket, "-o", "/dev/null", "-w", "%{http_code}",
                                          "-X", "POST", "http://localhost/v1/token"], env: w.sandbox.env)
        #expect(post.stdout == "405")
        // A store problem: 503, as exit 5 (the file store's identity made unreadable).
        chmod(w.sandbox.configDir + "/identity", 0o644)
        let store = w.curl("/v1/token")
        #expect(store.status == 503, "\(store.body)")
        #expect(Self.json(store.body)?["error"] as? String == "store_problem")
        chmod(w.sandbox.configDir + "/identity", 0o600)
        // The issuer down while a refresh is due: 502, as exit 4.
        let expired = try World(["expires_in": -10])
        try expired.serve()
        expired.issuer.stop()
        let down = expired.curl("/v1/token")
        #expect(down.status == 502, "\(down.body)")
        #expect(Self.json(down.body)?["error"] as? String == "temporary")
        w.stop()
        #expect(Self.auditLines(broker).map { $0.components(separatedBy: " status=").last ?? "" }
                == ["401 login_required", "400 bad_request", "400 bad_request", "400 bad_request", "404 not_found",
                    "405 method_not_allowed", "503 store_problem"])
    }

    @Test func theAuditLineNamesThePeerAndHoldsNoToken() throws {
        let w = try World()
        let broker = try w.serve()
        // Asked from this process, so its pid and executable are known here.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in w.socket.utf8.enumerated() { raw[i] = b } }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(rc == 0)
        let request = Array("GET /v1/token HTTP/1.1\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = [], buf = [UInt8](repeating: 0, count: 4096)
        while true { let n = recv(fd, &buf, buf.count, 0); if n <= 0 { break }; answer += buf[0..<n] }
        close(fd)
        #expect(String(decoding: answer, as: UTF8.self).contains(w.tokens.accessToken))
        w.stop()
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let line = try #require(Self.auditLines(broker).first)
        #expect(line.contains(" pid=\(getpid()) uid=\(geteuid()) exe=\(exe) path=/v1/token profile=\(w.sandbox.profile) status=200 ok"), "\(line)")
        let time = String(line.dropFirst("chatgpt-credential: broker: ".count).prefix(20))
        #expect(time.count == 20 && time.hasSuffix("Z") && time.contains("T"), "\(time)")
        for secret in [w.tokens.accessToken, w.tokens.refreshToken, w.tokens.idToken] {
            #expect(!broker.stderr.contains(secret))
        }
    }

    @Test func theDefaultSocketIsInTheUsersRuntimeDirectory() throws {
        let w = try World()
        let dir = Paths.userRuntimeDirectory()
        let run = try LiveRun(w.sandbox, ["serve", "--idle-exit", "1"])
        #expect(run.wait(timeout: 30) != nil)
        if run.stderr.contains("a broker is already listening") { return } // a broker of this user runs: not ours to stop
        #expect(run.process.terminationStatus == 0, "\(run.stderr)")
        #expect(run.stderr.hasPrefix("chatgpt-credential: broker listening on \(dir)/broker.sock; exits after 1 s without a connection\n"), "\(run.stderr)")
        var st = stat()
        #expect(lstat(dir, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && st.st_mode & 0o777 == 0o700 && st.st_uid == geteuid())
        #expect(lstat(dir + "/broker.sock", &st) != 0, "the socket file outlived the broker")
    }

    @Test func aSocketLeftByAKilledBrokerIsReplacedALiveOneIsNot() throws {
        let w = try World()
        let first = try w.serve()
        // A second broker on the same live socket is refused, and the first keeps serving.
        let second = w.sandbox.run(["serve", "--socket", w.socket, "--idle-exit", "1"])
        #expect(second.status == 1 && second.stderr.contains("a broker is already listening on \(w.socket)"), "\(second.stderr)")
        #expect(w.curl("/v1/health").status == 200)
        kill(first.process.processIdentifier, SIGKILL)
        _ = first.wait(timeout: 10)
        var st = stat()
        #expect(lstat(w.socket, &st) == 0) // left behind
        try w.serve()
        #expect(w.curl("/v1/health").status == 200)
        // Never follows a symlink put where the socket goes.
        w.stop()
        symlink(w.sandbox.root + "/elsewhere", w.socket)
        let linked = w.sandbox.run(["serve", "--socket", w.socket, "--idle-exit", "1"])
        #expect(linked.status == 1 && linked.stderr.contains("is not a socket of this user"), "\(linked.stderr)")
        #expect(lstat(w.sandbox.root + "/elsewhere", &st) != 0)
    }

    // MARK: who may ask

    @Test func anotherUserIsRefusedEvenWithTheSocketWorldWritable() throws {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: Self.setpriv) else {
            Issue.record("needs root and setpriv to run curl as nobody"); return
        }
        let w = try World()
        chmod(w.sandbox.root, 0o755)
        chmod(w.socketDir, 0o755)
        let broker = try w.serve()
        chmod(w.socket, 0o666)
        let nobody = [Self.setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
        let r = w.curl("/v1/token", as: nobody)
        #expect(r.status == 403, "\(r.result.stderr)")
        #expect(Self.json(r.body)?["error"] as? String == "peer_refused")
        #expect(!r.body.contains(w.tokens.accessToken))
        #expect(w.curl("/v1/health", as: nobody).status == 403)
        // Also when what it sends would be refused anyway (too long): 403, not 400.
        #expect(w.curl("/v1/token?profile=" + String(repeating: "a", count: 9000), as: nobody).status == 403)
        w.stop()
        let audit = Self.auditLines(broker)
        #expect(audit.count == 3 && audit.allSatisfy { $0.contains(" uid=65534 ") && $0.hasSuffix(" status=403 peer_refused") }, "\(audit)")

        // Named with --allow-uid, the same user is answered.
        let allowed = try World()
        chmod(allowed.sandbox.root, 0o755)
        chmod(allowed.socketDir, 0o755)
        try allowed.serve(["--allow-uid", "65534"])
        chmod(allowed.socket, 0o666)
        let ok = allowed.curl("/v1/token", as: nobody)
        #expect(ok.status == 200, "\(ok.body) \(ok.result.stderr)")
        #expect(Self.json(ok.body)?["access_token"] as? String == allowed.tokens.accessToken)
    }

    // MARK: one refresh for everyone

    @Test func fiftyConcurrentClientsOnAnExpiringTokenCauseOneRefresh() throws {
        let w = try World(["expires_in": 100]) // inside the 300 s refresh window
        try w.issuer.configure(["refresh_delay": 0.3]) // keep the refresh in flight while the others ask
        let broker = try w.serve()
        final class Answers: @unchecked Sendable { let lock = NSLock(); var bodies: [String] = [] }
        let answers = Answers()
        let results = concurrentRuns(50) {
            let a = w.curl("/v1/token")
            answers.lock.lock(); answers.bodies.append(a.body); answers.lock.unlock()
            return a.result
        }
        let bodies = answers.bodies
        #expect(results.allSatisfy { $0.status == 0 && $0.stdout.hasSuffix("\n200") }, "\(results.map(\.stdout).prefix(3))")
        let tokens = Set(bodies.compactMap { Self.json($0)?["access_token"] as? String })
        #expect(tokens.count == 1)
        #expect(tokens.first != w.tokens.accessToken)
        #expect(try w.issuer.counter("refresh_requests") == 1)
        #expect(try w.issuer.counter("refresh_reused") == 0)
        #expect(w.sandbox.run(["get"]).stdout == (tokens.first ?? "") + "\n")
        w.stop()
        #expect(Self.auditLines(broker).count == 50)
    }

    // MARK: systemd socket activation

    /// `systemd-socket-activate -l PATH chatgpt-credential ARGS` running, its stderr collected
    /// in a file; it execs the broker (same pid) on the first connection. Started with
    /// posix_spawn, not Foundation's Process: Foundation stops reaping its other children (the
    /// curls) while this one runs after an exec of its own.
    final class Activated {
        let spawned: Spawned
        let errPath: String
        var status: Spawned.State = .running
        init(_ w: World, path: String, _ args: [String]) throws {
            var env = w.sandbox.env
            env["PATH"] = "/usr/bin:/bin"
            // systemd-socket-activate hands on only the variables named with -E (as systemd
            // gives a unit only its Environment=).
            let passed = env.keys.sorted().flatMap { ["-E", $0] }
            errPath = w.sandbox.root + "/activate-\(UInt32.random(in: 0...UInt32.max)).err"
            let argv = ["/bin/sh", "-c", #"f=$1; shift; exec "$@" >/dev/null 2>"$f""#, "sh", errPath,
                        BrokerServerEndToEndTests.socketActivate] + passed + ["-l", path, Harness.binary] + args
            switch Spawned.start(argv, childEnvironment: env, quiet: false) {
            case .success(let s): spawned = s
            case .failure(let e): throw e
            }
            var st = stat()
            let deadline = Date().addingTimeInterval(10)
            while lstat(path, &st) != 0 && Date() < deadline { usleep(10_000) }
        }
        var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
        /// The exit status once it ended within `timeout`, else nil (a signal: minus its number).
        func wait(_ timeout: Double) -> Int32? {
            let deadline = Date().addingTimeInterval(timeout)
            while status == .running {
                status = spawned.poll()
                if status == .running { if Date() > deadline { return nil }; usleep(10_000) }
            }
            switch status {
            case .exited(let code): return code
            case .signalled(let sig): return -sig
            case .running: return nil
            }
        }
        deinit {
            if wait(0) == nil { kill(spawned.pid, SIGKILL); _ = wait(5) }
        }
    }

    @Test func socketActivatedUnderSystemdAndIdleExitEndsItWithStatus0() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.socketActivate) else {
            Issue.record("systemd-socket-activate is missing (Debian package systemd)"); return
        }
        let w = try World()
        let path = w.socketDir + "/activated.sock"
        let started = Date()
        let a = try Activated(w, path: path, ["serve", "--idle-exit", "2"])
        let r = w.curl("/v1/token", socket: path)
        #expect(r.status == 200, "\(r.result.stderr) \(a.stderr)")
        #expect(Self.json(r.body)?["access_token"] as? String == w.tokens.accessToken)
        let h = w.curl("/v1/health", socket: path)
        #expect(h.status == 200, "\(h.result.stderr) \(a.stderr)")
        #expect(a.wait(30) == 0, "\(a.stderr)")
        #expect(Date().timeIntervalSince(started) >= 2)
        #expect(a.stderr.contains("chatgpt-credential: broker listening on \(path); exits after 2 s without a connection"), "\(a.stderr)")
        #expect(a.stderr.contains("chatgpt-credential: broker: no connection for 2 s; exiting"))
        #expect(a.stderr.components(separatedBy: "\n").filter { $0.hasPrefix("chatgpt-credential: broker: 20") }.count == 2)
        #expect(!a.stderr.contains(w.tokens.accessToken))
    }

    @Test func socketActivationDefaultsToSixtySecondsIdleAndRefusesSocket() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.socketActivate) else {
            Issue.record("systemd-socket-activate is missing (Debian package systemd)"); return
        }
        let w = try World()
        let a = try Activated(w, path: w.socketDir + "/a.sock", ["serve"])
        #expect(w.curl("/v1/health", socket: w.socketDir + "/a.sock").status == 200)
        let t0 = Date()
        #expect(a.wait(2) == nil, "\(Date().timeIntervalSince(t0)) \(a.stderr)") // still serving: 60 s without a connection by default
        #expect(a.stderr.contains("exits after 60 s without a connection"), "\(a.stderr)")
        kill(a.spawned.pid, SIGTERM)
        #expect(a.wait(10) == 0, "\(a.stderr)")
        #expect(a.stderr.hasSuffix("chatgpt-credential: broker: stopped by a signal; exiting\n"))

        let both = try Activated(w, path: w.socketDir + "/b.sock", ["serve", "--socket", w.socket])
        _ = w.curl("/v1/health", socket: w.socketDir + "/b.sock")
        #expect(both.wait(20) == 2, "\(both.stderr)")
        #expect(both.stderr.contains("--socket cannot be used under systemd socket activation"), "\(both.stderr)")
    }
}
