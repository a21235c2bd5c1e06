import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Tokens go nowhere they should not: not into argv, not into other processes' environments, not
/// into diagnostics (even with -v), not back out of an issuer's echoed error, not into temp files
/// left behind, not into core dumps.
@Suite(.serialized) struct HardeningSecretsTests {
    /// While `get` waits on a slow refresh, /proc shows no token in its argv or environment and it
    /// has spawned no child (libcurl is loaded in-process; nothing is exec'd).
    @Test func noTokenInArgvOrEnvironmentWhileRefreshing() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": -10])
        try issuer.configure(["refresh_delay": 2])
        let bg = try Background(Harness.binary, ["get"], env: s.env)
        #expect(Hostile.waitUntil(10) { (try? issuer.counter("refresh_requests")) == 1 })
        let argv = Hostile.procFile(bg.pid, "cmdline") ?? []
        let environ = Hostile.procFile(bg.pid, "environ") ?? []
        #expect(!argv.isEmpty && !environ.isEmpty)
        let children = Hostile.children(of: bg.pid)
        #expect(children.isEmpty, "get spawned \(children)")
        let r = bg.finish()
        #expect(r.status == 0, "\(r.stderr)")
        let newAccess = r.stdout.trimmingCharacters(in: .newlines)
        for secret in t.secrets + [newAccess] {
            #expect(!Hostile.contains(argv, secret))
            #expect(!Hostile.contains(environ, secret))
        }
    }

    /// `exec` hands the token to its command in the environment only: the command's argv (which
    /// `ps` shows every user) has none, and exec spawns nothing else that could see it.
    @Test func execPutsTheTokenInTheChildEnvironmentOnly() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer)
        let marker = s.root + "/started"
        // The command stays until the test is done looking (the file "MARKER.done"), not for a
        // fixed 2 s that a loaded machine could spend before the look.
        let command = "touch \"$0\"; while [ ! -e \"$0.done\" ]; do sleep 0.05; done"
        let bg = try Background(Harness.binary, ["exec", "--", "/bin/sh", "-c", command, marker], env: s.env)
        defer { _ = FileManager.default.createFile(atPath: marker + ".done", contents: nil) }
        #expect(Hostile.waitUntil(10) { FileManager.default.fileExists(atPath: marker) })
        // exec replaced the tool: the same pid is now the shell.
        let argv = Hostile.procFile(bg.pid, "cmdline") ?? []
        let environ = Hostile.procFile(bg.pid, "environ") ?? []
        #expect(Hostile.contains(argv, command))
        #expect(!Hostile.contains(argv, t.accessToken))
        #expect(Hostile.contains(environ, "CHATGPT_ACCESS_TOKEN=" + t.accessToken))
        #expect(!Hostile.contains(environ, t.refreshToken))
        #expect(!Hostile.contains(environ, t.idToken))
        _ = FileManager.default.createFile(atPath: marker + ".done", contents: nil)
        #expect(bg.finish().status == 0)
    }

    static var hasBus: Bool { ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil }

    /// -v and CHATGPT_CREDENTIAL_DEBUG=1 of store, get, a refresh, status and erase — in the file
    /// store's passphrase mode and in the Secret Service: stderr carries no access, refresh or id
    /// token (old or rotated) and no passphrase.
    @Test(arguments: ["file", "secret-service"])
    func verboseDiagnosticsCarryNoSecrets(store: String) throws {
        if store == "secret-service" && !Self.hasBus { Issue.record("no D-Bus session: run the suite through scripts/with-keyring"); return }
        let issuer = try TestIssuer()
        let s = Sandbox(bus: store == "file" ? .none : .inherit, store: store)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_PROFILE"] = uniqueProfile("verbose")
        let passphrase = "correct horse battery staple \(UInt32.random(in: 0...UInt32.max))"
        let passFile = s.root + "/passphrase"
        #expect(FileManager.default.createFile(atPath: passFile, contents: Data((passphrase + "\n").utf8),
                                               attributes: [.posixPermissions: 0o600]))
        if store == "file" { s.env["CHATGPT_CREDENTIAL_PASSPHRASE_FILE"] = passFile }
        var stderrs: [String] = []
        var secrets = [passphrase]
        func run(_ args: [String], stdin: String? = nil, debugEnv: Bool) -> RunResult {
            let r = s.run(args, stdin: stdin, env: debugEnv ? ["CHATGPT_CREDENTIAL_DEBUG": "1"] : [:])
            stderrs.append(r.stderr)
            return r
        }
        for debugEnv in [false, true] {
            let t = try issuer.seed(["expires_in": 200])
            secrets += t.secrets
            #expect(run(["store"] + (debugEnv ? [] : ["-v"]), stdin: t.storeJSON, debugEnv: debugEnv).status == 0)
            let refreshed = run(["get", "--force-refresh"] + (debugEnv ? [] : ["-v"]), debugEnv: debugEnv)
            #expect(refreshed.status == 0, "\(refreshed.stderr)")
            secrets.append(refreshed.stdout.trimmingCharacters(in: .newlines))
            secrets.append(run(["get", "--id-token", "-v"], debugEnv: debugEnv).stdout.trimmingCharacters(in: .newlines))
            secrets += (try issuer.stats()["active_refresh_tokens"] as? [String]) ?? []
            #expect(run(["status", "-v"], debugEnv: debugEnv).status == 0)
            #expect(run(["get", "--json", "-v"], debugEnv: debugEnv).status == 0)
            let erased = run(["erase", "-v"], debugEnv: debugEnv)
            #expect(erased.status == 0, "\(erased.stderr)")
        }
        #expect(stderrs.contains { $0.contains("debug:") }, "no diagnostics at all: \(stderrs)")
        #expect(secrets.count >= 9)
        for (n, e) in stderrs.enumerated() {
            for secret in secrets where !secret.isEmpty {
                #expect(!e.contains(secret), "run \(n) leaks a secret: \(e)")
            }
        }
    }

    /// An issuer that echoes the refresh token in its error body (message, error_description, or
    /// the error code; whole, split by control bytes, or long enough to be cut) does not get it
    /// printed.
    @Test func issuerEchoingTheRefreshTokenIsNotEchoed() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": -10])
        let rt = t.refreshToken
        let split = String(rt.prefix(10)) + "\u{1}\u{1b}" + String(rt.dropFirst(10))
        let padding = String(repeating: "x", count: 180)
        try issuer.configure(["faults": [
            ["status": 400, "body": ["error": ["message": "invalid refresh_token \(rt)", "code": rt]]],
            ["status": 400, "body": ["error_description": "the token \(split) is malformed"]],
            ["status": 422, "body": ["error": "bad", "message": padding + rt]],
            ["status": 400, "body": ["error": ["message": "refresh_token=\(rt)", "code": "invalid_request"]]],
        ]])
        for _ in 0..<4 {
            s.forgetSharedBackoff() // each round asks the issuer: the failures are shared otherwise
            let r = s.run(["get", "-v"])
            #expect(r.status == 4, "\(r.stderr)")
            #expect(!r.stderr.contains(rt), "\(r.stderr)")
            #expect(!r.stderr.contains(String(rt.prefix(16))), "a prefix survived: \(r.stderr)")
            #expect(!r.stderr.contains(String(rt.dropFirst(10).prefix(16))), "\(r.stderr)")
        }
        #expect(try issuer.counter("faults_served") == 4)
        #expect(try s.storedDocument()?["refresh_token"] as? String == rt)
    }

    /// store, refresh and erase leave no temp file in the store's or key's directory, in TMPDIR,
    /// or in /tmp.
    @Test func noTempFilesLeftBehind() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let tmpdir = s.root + "/tmp"
        mkdir(tmpdir, 0o700)
        s.env["TMPDIR"] = tmpdir
        func ours() -> [String] { Hostile.listing("/tmp").filter { $0.contains(".age") || $0.contains("chatgpt-credential") } }
        let tmpBefore = ours()
        let t = try s.storeSeeded(issuer, ["expires_in": 200])
        #expect(Hostile.listing(s.dataDir) == ["\(s.profile).age", "\(s.profile).lock"]) // the lock beside the file (man page FILES)
        #expect(s.ownLockFiles == ["\(s.profile).lock"])
        #expect(Hostile.listing(s.configDir) == ["identity"])
        let r = s.run(["get"])
        #expect(r.status == 0 && r.stdout != t.accessToken + "\n")
        #expect(try issuer.counter("refresh_success") == 1)
        #expect(Hostile.listing(s.dataDir) == ["\(s.profile).age", "\(s.profile).lock"]) // the lock beside the file (man page FILES)
        // A failed refresh and a failed store leave nothing either.
        try issuer.configure(["faults": [["status": 401, "body": ["error": ["code": "refresh_token_invalidated"]]]]])
        // (--force-refresh: a --min-ttl beyond the issuer's lifetime alone no longer refreshes)
        #expect(s.run(["get", "--force-refresh", "--min-ttl", "100000"]).status == 3) // marks the stored document: a write
        _ = s.run(["store"], stdin: "{\"access_token\": 1}")
        #expect(Hostile.listing(s.dataDir) == ["\(s.profile).age", "\(s.profile).lock"]) // the lock beside the file (man page FILES)
        #expect(s.run(["erase"]).status == 0)
        #expect(Hostile.listing(s.dataDir) == ["\(s.profile).lock"]) // a lock file stays: removing it could split waiters
        #expect(s.ownLockFiles == ["\(s.profile).lock"])
        #expect(Hostile.listing(s.configDir) == ["identity"])
        #expect(Hostile.listing(tmpdir).isEmpty)
        #expect(ours() == tmpBefore)
    }

    /// `exec`'s child is the user's program: it gets back the core-dump limit the tool started with.
    @Test func execChildGetsItsCoreLimitBack() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer, ["expires_in": 3600])
        let r = Harness.run("/bin/sh", ["-c", "ulimit -c 1234 && exec \"$0\" exec -- sh -c 'ulimit -c'", Harness.binary], env: s.env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "1234\n")
    }

    /// A running `get` has core dumps off (RLIMIT_CORE 0) and is not dumpable (PR_SET_DUMPABLE 0).
    /// /proc/PID/status does not show the dumpable flag, but proc(5) does: the /proc/PID files of
    /// a non-dumpable process belong to root. So the tool runs as uid 65534 and /proc/PID must be
    /// root's — while the same check on a plain process of that user (the control) shows 65534.
    @Test(.enabled(if: Hostile.canSwitchUser))
    func runningGetHasNoCoreDumpsAndIsNotDumpable() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer, ["expires_in": -10])
        try issuer.configure(["refresh_delay": 2])
        s.giveToNobody()
        let bg = try Background(Hostile.setpriv, Sandbox.asNobody + [Harness.binary, "get"], env: s.env)
        #expect(Hostile.waitUntil(10) { (try? issuer.counter("refresh_requests")) == 1 })
        let limits = String(decoding: Hostile.procFile(bg.pid, "limits") ?? [], as: UTF8.self)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
        let fields = core.map { $0.split(separator: " ", omittingEmptySubsequences: true) } ?? []
        #expect(fields.count >= 6 && fields[4] == "0", "soft core limit: \(core ?? "no line")")
        let status = String(decoding: Hostile.procFile(bg.pid, "status") ?? [], as: UTF8.self)
        #expect(status.contains("Uid:\t65534"), "not running as 65534: \(status.prefix(300))")
        #expect(Hostile.owner("/proc/\(bg.pid)/status") == 0, "dumpable: /proc/PID belongs to the user")
        let control = try Background(Hostile.setpriv, Sandbox.asNobody + ["/bin/sleep", "2"], env: s.env)
        #expect(Hostile.waitUntil(5) { Hostile.owner("/proc/\(control.pid)/status") == Hostile.nobody })
        _ = control.kill9()
        let r = bg.finish()
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// Where nothing may be locked (RLIMIT_MEMLOCK 0 and no CAP_IPC_LOCK, as in many containers,
    /// or a limit another program has used up), every mlock(2) fails with EPERM: secrets are still
    /// guarded and wiped, only not locked (SECURITY.md), so `store`, a `get` from the file and a
    /// refresh all work. The control runs python3's mlock under the same wrapper: EPERM.
    @Test(.enabled(if: Hostile.canSwitchUser))
    func secretsWorkWhereNothingMayBeLocked() throws {
        let wrapper = [Hostile.setpriv, "--bounding-set", "-ipc_lock", "--inh-caps", "-ipc_lock", "/usr/bin/prlimit", "--memlock=0:0"]
        let probe = "import ctypes, mmap; libc = ctypes.CDLL(None, use_errno=True); m = mmap.mmap(-1, 4096); "
            + "a = ctypes.addressof(ctypes.c_char.from_buffer(m)); print(libc.mlock(ctypes.c_void_p(a), 4096), ctypes.get_errno())"
        let control = Harness.run(wrapper[0], Array(wrapper.dropFirst()) + ["/usr/bin/python3", "-c", probe], env: ["PATH": "/usr/bin:/bin"])
        #expect(control.stdout == "-1 \(EPERM)\n", "mlock under the wrapper: \(control.stdout) \(control.stderr)")
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_STORE"] = "file"
        let t = try issuer.seed(["expires_in": -10])
        func run(_ args: [String], stdin: String? = nil) -> RunResult {
            Harness.run(wrapper[0], Array(wrapper.dropFirst()) + [Harness.binary] + args, env: s.env, stdin: stdin.map { Array($0.utf8) })
        }
        let stored = run(["--profile", s.profile, "store"], stdin: t.storeJSON)
        #expect(stored.status == 0, "store: \(stored.stderr)")
        // Expired: this get refreshes (the issuer's answer, the new document, the rewritten file).
        let refreshed = run(["--profile", s.profile, "get"])
        #expect(refreshed.status == 0, "get: \(refreshed.stderr)")
        #expect(try issuer.counter("refresh_requests") == 1)
        let fresh = refreshed.stdout.trimmingCharacters(in: .newlines)
        #expect(!fresh.isEmpty && fresh != t.accessToken)
        let read = run(["--profile", s.profile, "--no-cache", "get"])
        #expect(read.status == 0, "get --no-cache: \(read.stderr)")
        #expect(read.stdout.trimmingCharacters(in: .newlines) == fresh)
    }
}
