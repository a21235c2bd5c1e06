import Foundation
import Testing
import CLI
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The warm path (ARCHITECTURE.md, "The warm path"; CWarmPath): `--version` and a `get` from a
/// fresh access-cache entry answered before the Swift runtime starts, and every other case left
/// to the Swift path as if the warm path were not there.
///
/// Which path answered is read from the process itself: the Swift runtime, when it starts, says
/// "swift runtime: unknown backtracing setting 'warm-path-probe'" on stderr for the setting this
/// suite puts in SWIFT_BACKTRACE. A run whose stderr lacks that line never started the runtime.
@Suite(.serialized) struct WarmPathTests {
    static let probe = "enable=no,warm-path-probe=1"
    static let runtimeStarted = "unknown backtracing setting 'warm-path-probe'"
    static let keyctl = "/usr/bin/keyctl"

    /// A file-store sandbox signed in through `store` with a token of `lifetime` seconds, no issuer
    /// set (a warm `get` needs none), the probe in SWIFT_BACKTRACE, and its entry filled.
    static func signedIn(lifetime: Int64 = 3600, bus: Sandbox.Bus = .none, store: String = "file") throws -> (Sandbox, String) {
        let s = Sandbox(bus: bus, store: store)
        s.env["SWIFT_BACKTRACE"] = probe
        let token = makeJWT(exp: Int64(time(nil)) + lifetime)
        let stored = s.run(["store"], stdin: #"{"access_token":"\#(token)","refresh_token":"rt-\#(s.profile)","id_token":"\#(token)","account_id":"acct-123"}"#)
        guard stored.status == 0 else { throw WarmPathFailure("store exited \(stored.status): \(stored.stderr)") }
        return (s, token)
    }

    /// The profile's file-store entry as `get` names it (the sandbox's directories are real paths).
    static func fileEntry(_ s: Sandbox) -> String {
        "chatgpt-credential:v2:\(s.profile):file:\(s.dataDir)/\(s.profile).age"
    }

    static func keyctl(_ args: [String], stdin: [UInt8]? = nil) -> RunResult {
        Harness.run(keyctl, args, env: ["PATH": "/usr/bin:/bin"], stdin: stdin)
    }

    /// The version of the sandbox's encrypted file an entry filled from it now names
    /// (AgeFileStore.version(of:): `dev:ino:size:mtime`).
    static func fileVersion(_ s: Sandbox) -> [UInt8] {
        var st = stat()
        guard lstat(s.dataDir + "/" + s.profile + ".age", &st) == 0 else { return [] }
        return Array("\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)".utf8)
    }

    /// `forgeEntry` for the sandbox's file store, filled from its file as it is now (unless
    /// `storeVersion` says otherwise).
    static func forgeFileEntry(_ s: Sandbox, token: String, expiresAt: Int64, lastRefresh: Int64, storedAt: Int64 = 0,
                               storeVersion: [UInt8]? = nil, trailing: [UInt8] = [], permissions: String = "0x001b0000") throws {
        try forgeEntry(fileEntry(s), token: token, expiresAt: expiresAt, lastRefresh: lastRefresh, storedAt: storedAt,
                       storeVersion: storeVersion ?? fileVersion(s), trailing: trailing, permissions: permissions)
    }

    /// A version-3 payload (CachePayload) written as the profile's entry exactly as `get` writes
    /// one: a `user` key in @u, its timeout set, then owner-only view/read/search/link.
    static func forgeEntry(_ description: String, token: String, expiresAt: Int64, lastRefresh: Int64,
                           storedAt: Int64 = 0, storeVersion: [UInt8] = [], trailing: [UInt8] = [], permissions: String = "0x001b0000") throws {
        let p = payload(token: token, expiresAt: expiresAt, lastRefresh: lastRefresh, storedAt: storedAt, storeVersion: storeVersion) + trailing
        // The entry in place is replaced as `get` replaces one: removed, then the new one linked.
        let existing = keyctl(["search", "@u", "user", description])
        if existing.status == 0 { _ = keyctl(["invalidate", existing.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]) }
        let added = keyctl(["padd", "user", description, "@u"], stdin: p)
        let serial = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard added.status == 0, !serial.isEmpty else { throw WarmPathFailure("keyctl padd: \(added.stderr)") }
        for args in [["timeout", serial, "600"], ["setperm", serial, permissions]] {
            let r = keyctl(args)
            guard r.status == 0 else { throw WarmPathFailure("keyctl \(args[0]): \(r.stderr)") }
        }
    }

    /// A version-3 payload (CachePayload) for an entry of `token`, filled from `storeVersion`.
    static func payload(token: String, expiresAt: Int64, lastRefresh: Int64, storedAt: Int64 = 0, storeVersion: [UInt8] = []) -> [UInt8] {
        var p: [UInt8] = Array("CCA".utf8) + [3]
        for t in [expiresAt, lastRefresh, storedAt] {
            let u = UInt64(bitPattern: t)
            for shift in stride(from: 56, through: 0, by: -8) { p.append(UInt8(truncatingIfNeeded: u >> UInt64(shift))) }
        }
        for b in [Array(token.utf8), Array("acct-123".utf8), Array(token.utf8), Array("user@example.com".utf8), Array("plus".utf8), storeVersion] {
            p += [UInt8(b.count >> 8), UInt8(b.count & 0xFF)] + b
        }
        return p
    }

    /// Runs `script` under /bin/sh (for `>&-`) with the sandbox's environment and BIN, the binary.
    static func shell(_ s: Sandbox, _ script: String, _ extra: [String: String] = [:]) -> RunResult {
        var env = s.env
        for (k, v) in extra { env[k] = v }
        env["BIN"] = Harness.binary
        return Harness.run("/bin/sh", ["-c", script], env: env)
    }

    @Test func versionIsAnsweredBeforeTheRuntimeAndIsTheSwiftPathsLine() {
        let env = ["PATH": "/usr/bin:/bin", "SWIFT_BACKTRACE": Self.probe]
        let warm = Harness.run(Harness.binary, ["--version"], env: env)
        #expect(warm.status == 0 && warm.stderr.isEmpty, "the runtime started for --version: \(warm.stderr)")
        #expect(warm.stdout == "chatgpt-credential \(CommandLineSpec.version)\n")
        // The Swift path (any second option takes it there) prints the very same line.
        let swift = Harness.run(Harness.binary, ["--verbose", "--version"], env: env)
        #expect(swift.stderr.contains(Self.runtimeStarted), "\(swift.stderr)")
        #expect(swift.status == 0 && swift.stdout == warm.stdout)
    }

    @Test func aWarmGetIsAnsweredBeforeTheRuntimeWithTheSwiftPathsBytes() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        for args in [["get"], ["--profile", s.profile, "get"], ["--store", "file", "get"], ["--store", "auto", "--profile", s.profile, "get"]] {
            let warm = s.run(args)
            #expect(warm.status == 0 && warm.stderr.isEmpty, "\(args): the runtime started: \(warm.stderr)")
            #expect(warm.stdout == token + "\n", "\(args)")
        }
        let swift = s.run(["--verbose", "get"])
        #expect(swift.stderr.contains(Self.runtimeStarted) && swift.stderr.contains("answered from the access cache"), "\(swift.stderr)")
        #expect(swift.stdout == token + "\n")
    }

    @Test func aWarmGetOfTheSecretServiceHowEverItsBusIsSpelled() throws {
        guard let address = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"],
              address.hasPrefix("unix:path="), address.contains(",guid=") else {
            Issue.record("make test's session bus is a unix:path= address with a guid; got \(ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? "none")")
            return
        }
        let (s, token) = try Self.signedIn(bus: .inherit, store: "secret-service")
        defer { _ = s.run(["erase", "--no-revoke"]) }
        // The keys in another order, `/` escaped: the same bus, so the same entry (man page ACCESS CACHE).
        let parts = address.split(separator: ",")
        let path = String(parts[0].dropFirst("unix:path=".count))
        let respelled = "unix:" + parts[1] + ",path=" + path.replacingOccurrences(of: "/", with: "%2f")
        for spelling in [address, respelled] {
            let warm = s.run(["get"], env: ["DBUS_SESSION_BUS_ADDRESS": spelling])
            #expect(warm.status == 0 && warm.stderr.isEmpty, "\(spelling): the runtime started: \(warm.stderr)")
            #expect(warm.stdout == token + "\n")
        }
        // A bus the warm path does not normalise (two entries) is the Swift path's, with the same answer.
        let two = s.run(["get"], env: ["DBUS_SESSION_BUS_ADDRESS": address + ";unix:path=/nonexistent"])
        #expect(two.stderr.contains(Self.runtimeStarted) && two.stdout == token + "\n", "\(two.status): \(two.stderr)")
    }

    /// The entry is what is printed: a forged one (as `get` would write it) is answered as it is.
    @Test func theEntryItselfIsWhatTheWarmPathPrints() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let now = Int64(time(nil))
        let forged = makeJWT(exp: now + 7200, accountId: "acct-forged")
        try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now)
        let warm = s.run(["get"])
        #expect(warm.status == 0 && warm.stderr.isEmpty && warm.stdout == forged + "\n", "\(warm.stderr)")
        #expect(forged != token)

        // --min-ttl (Codex's auth.command runs `get --min-ttl 900`): an entry valid 1,000 s more
        // answers 900 here, and for 2,000 it is the Swift path's, which reads the store (3,600 s).
        try Self.forgeFileEntry(s, token: forged, expiresAt: now + 1000, lastRefresh: now)
        let enough = s.run(["get", "--min-ttl", "900"])
        #expect(enough.status == 0 && enough.stderr.isEmpty && enough.stdout == forged + "\n", "\(enough.stderr)")
        // (The last one refills the entry from the store, as a miss does.)
        for (args, printed) in [(["get", "--min-ttl", "+900"], forged), (["get", "--min-ttl=900"], forged),
                                (["get", "--min-ttl", "2000"], token)] {
            let r = s.run(args)
            #expect(r.stderr.contains(Self.runtimeStarted), "\(args): answered before the runtime started")
            #expect(r.status == 0 && r.stdout == printed + "\n", "\(args): \(r.stderr)")
        }
    }

    /// Each entry the Swift path would not serve as it is — expiring within 300 s, idle for 8 days,
    /// damaged, with other permissions — is left to it: it reads the store and prints the stored token.
    @Test func anEntryTheSwiftPathWouldNotServeIsLeftToIt() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let now = Int64(time(nil))
        let forged = makeJWT(exp: now + 7200, accountId: "acct-forged")
        let cases: [(String, () throws -> Void)] = [
            ("expiring within the margin", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 299, lastRefresh: now) }),
            ("idle for 8 days", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now - 8 * 86400) }),
            ("stored 8 days ago, no refresh known", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: 0, storedAt: now - 8 * 86400 - 1) }),
            ("a byte after the last field", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now, trailing: [0]) }),
            ("other permissions", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now, permissions: "0x003b0000") }),
            // The file was replaced since (another user namespace stored a new sign-in, say).
            ("filled from another version of the file", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now,
                                                                                   storeVersion: Array("1:2:3:4.5".utf8)) }),
            ("filled from no version (a Secret Service entry's)", { try Self.forgeFileEntry(s, token: forged, expiresAt: now + 7200, lastRefresh: now,
                                                                                            storeVersion: []) }),
        ]
        for (name, forge) in cases {
            try forge()
            let r = s.run(["get"])
            #expect(r.stderr.contains(Self.runtimeStarted), "\(name): answered before the runtime started")
            #expect(r.status == 0 && r.stdout == token + "\n", "\(name): \(r.status) \(r.stderr)")
        }
        // A token a bearer header cannot carry (a space) is the Swift path's error, not printed.
        try Self.forgeFileEntry(s, token: "two words", expiresAt: now + 7200, lastRefresh: now)
        let unsafe = s.run(["get"])
        #expect(unsafe.stderr.contains(Self.runtimeStarted) && unsafe.stderr.contains("characters a token cannot have"), "\(unsafe.stderr)")
        #expect(unsafe.status == 5 && unsafe.stdout.isEmpty, "\(unsafe.status)")
    }

    /// What a store read would refuse, the warm path does not answer either (exit 5 from the Swift path).
    @Test func aFileStoreTheReadWouldRefuseIsNeverAnsweredFromTheEntry() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let file = s.dataDir + "/\(s.profile).age", identity = s.configDir + "/identity"
        for (path, loose, tight) in [(file, mode_t(0o644), mode_t(0o600)), (identity, 0o640, 0o600),
                                     (s.dataDir, 0o750, 0o700), (s.configDir, 0o705, 0o700)] {
            #expect(chmod(path, loose) == 0)
            let r = s.run(["get"])
            #expect(r.status == 5 && r.stdout.isEmpty && r.stderr.contains("accessible by group or others"), "\(path): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains(Self.runtimeStarted))
            #expect(chmod(path, tight) == 0)
        }
        #expect(s.run(["get"]).stdout == token + "\n")
    }

    /// Every setting, option and place the warm path does not read is the Swift path's, and
    /// answers as it always did.
    @Test func everythingElseIsTheSwiftPaths() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let cases: [(args: [String], env: [String: String], status: Int32, stdout: String?)] = [
            (["get", "--account-id"], [:], 0, "acct-123\n"),
            (["--no-cache", "get"], [:], 0, token + "\n"),
            (["--profile", s.profile, "--profile", s.profile, "get"], [:], 0, token + "\n"),
            (["-v", "get"], [:], 0, token + "\n"),
            (["get"], ["CHATGPT_CREDENTIAL_CACHE": "off"], 0, token + "\n"),
            (["get"], ["CHATGPT_CREDENTIAL_CACHE": "yes"], 2, ""),
            (["get"], ["CHATGPT_CREDENTIAL_CACHE_TTL": "0"], 2, ""),
            (["get"], ["CHATGPT_CREDENTIAL_PROFILE": "a:b"], 2, ""),
            (["get"], ["CHATGPT_CREDENTIAL_STORE": "keyring"], 2, ""),
            (["get"], ["CHATGPT_CREDENTIAL_ISSUER": "http://example.com"], 2, ""),
            (["get"], ["CHATGPT_CREDENTIAL_DEBUG": "1"], 0, token + "\n"),
            (["get"], ["CHATGPT_CREDENTIAL_BROKER": "unix:" + s.root + "/no-broker.sock"], 5, ""),
        ]
        for c in cases {
            let r = s.run(c.args, env: c.env)
            #expect(r.stderr.contains(Self.runtimeStarted), "\(c.args) \(c.env): answered before the runtime started")
            #expect(r.status == c.status, "\(c.args) \(c.env): \(r.status) \(r.stderr)")
            if let out = c.stdout { #expect(r.stdout == out, "\(c.args) \(c.env)") }
        }
        // A user namespace keeps out of the cache (its user keyring is its own, and an entry there
        // could not be revoked from the host): an entry in it, as `get` would write one, is not
        // served; the Swift path reads the store.
        let now = Int64(time(nil))
        let forged = makeJWT(exp: now + 7200, accountId: "acct-forged")
        let payloadFile = s.root + "/payload"
        #expect(FileManager.default.createFile(atPath: payloadFile, contents: Data(Self.payload(token: forged, expiresAt: now + 7200, lastRefresh: now, storeVersion: Self.fileVersion(s)))))
        let inside = #"k=$(keyctl padd user "$ENTRY" @u < "$PAYLOAD") && keyctl timeout "$k" 600 && keyctl setperm "$k" 0x001b0000 && exec "$BIN" get"#
        var nsEnv = s.env
        nsEnv["BIN"] = Harness.binary; nsEnv["ENTRY"] = Self.fileEntry(s); nsEnv["PAYLOAD"] = payloadFile
        let ns = Harness.run(Hostile.unshare, ["-r", "--", "/bin/sh", "-c", inside], env: nsEnv)
        #expect(ns.stderr.contains(Self.runtimeStarted) && ns.status == 0 && ns.stdout == token + "\n", "\(ns.status) \(ns.stderr)")
    }

    /// Under a helper's name (git-credential-chatgpt, docker-credential-chatgpt) `get` is that
    /// protocol's verb, which reads its request on stdin: the Swift path's, never a bare token.
    @Test func underAHelpersNameGetIsThatProtocolsVerb() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        #expect(s.run(["get"]).stderr.isEmpty, "the entry is warm")
        for name in ["git-credential-chatgpt", "docker-credential-chatgpt"] {
            let link = s.root + "/" + name
            #expect(symlink(Harness.binary, link) == 0)
            let request = name.hasPrefix("git") ? "protocol=https\nhost=chatgpt.com\n\n" : "https://chatgpt.com"
            let r = Harness.run(link, ["get"], env: s.env, stdin: Array(request.utf8))
            #expect(r.stderr.contains(Self.runtimeStarted), "\(name) get: answered before the runtime started: \(r.stdout)")
            let answer = name.hasPrefix("git") ? "password=\(token)\n" : "\"Secret\":\"\(token)\""
            #expect(r.status == 0 && r.stdout.contains(answer) && r.stdout != token + "\n", "\(name) get: \(r.status) \(r.stdout) \(r.stderr)")
        }
    }

    // MARK: client mode

    /// A directory of this user that nobody else may write (the broker socket's, as client mode wants it).
    static func privateDirectory() -> String {
        var template = Array("/tmp/ccred-wpb-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    /// A client-mode `get` against a real broker (`serve --socket`): answered before the Swift
    /// runtime starts, with the broker's token, by `--broker` or CHATGPT_CREDENTIAL_BROKER.
    @Test func aClientModeGetThroughARunningBrokerIsAnsweredBeforeTheRuntime() throws {
        let (s, token) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let dir = Self.privateDirectory()
        let socketPath = dir + "/broker.sock"
        defer { unlink(socketPath); rmdir(dir) }
        let serve = try Background(Harness.binary, ["serve", "--socket", socketPath], env: s.env)
        defer { kill(serve.pid, SIGTERM); _ = serve.finish(timeout: 10) }
        let ready = Date().addingTimeInterval(10)
        var st = stat()
        while stat(socketPath, &st) != 0 && serve.process.isRunning && Date() < ready { usleep(5_000) }
        #expect(stat(socketPath, &st) == 0, "serve made no socket")

        // The client's environment: no store, no data directory, only the socket.
        let client = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "SWIFT_BACKTRACE": Self.probe]
        let runs: [([String], [String: String])] = [
            (["--broker", "unix:" + socketPath, "--profile", s.profile, "get"], [:]),
            (["--profile", s.profile, "get", "--min-ttl", "900"], ["CHATGPT_CREDENTIAL_BROKER": "unix:" + socketPath]),
            (["get"], ["CHATGPT_CREDENTIAL_BROKER": "unix:" + socketPath, "CHATGPT_CREDENTIAL_PROFILE": s.profile]),
        ]
        for (args, extra) in runs {
            let r = Harness.run(Harness.binary, args, env: client.merging(extra) { $1 })
            #expect(r.status == 0 && r.stderr.isEmpty, "\(args) \(extra): the runtime started or failed: \(r.status) \(r.stderr)")
            #expect(r.stdout == token + "\n", "\(args)")
        }
        // The same request by the Swift path (-v takes it there) prints the same bytes.
        let swift = Harness.run(Harness.binary, ["-v", "--broker", "unix:" + socketPath, "--profile", s.profile, "get"], env: client)
        #expect(swift.stderr.contains(Self.runtimeStarted) && swift.status == 0 && swift.stdout == token + "\n", "\(swift.stderr)")
    }

    /// One scripted answer to a client-mode `get`: what the client printed and exited with, the
    /// request lines the stand-in broker read, and how many connections it was asked for in all.
    static func askScriptedBroker(_ reply: String, args: [String] = ["get"]) throws -> (RunResult, [String], Int) {
        let dir = privateDirectory()
        let socketPath = dir + "/broker.sock"
        defer { unlink(socketPath); rmdir(dir) }
        let listener = try BrokerClientEndToEndTests.bindUnixSocket(socketPath)
        defer { close(listener) }
        guard listen(listener, 16) == 0 else { throw WarmPathFailure("listen: \(String(cString: strerror(errno)))") }
        let env = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "SWIFT_BACKTRACE": probe, "CHATGPT_CREDENTIAL_BROKER": "unix:" + socketPath]
        let client = try Background(Harness.binary, args, env: env)
        var requests: [String] = []
        var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        if poll(&p, 1, 10_000) == 1 {
            let c = accept(listener, nil, nil)
            requests.append(String(decoding: readRequestHead(c), as: UTF8.self).components(separatedBy: "\r\n")[0])
            _ = Array(reply.utf8).withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
            close(c)
        }
        let r = client.finish(timeout: 15)
        // Any second request the client made is in the backlog now that it has exited.
        var connections = requests.count
        _ = fcntl(listener, F_SETFL, O_NONBLOCK)
        while case let c = accept(listener, nil, nil), c >= 0 { connections += 1; close(c) }
        return (r, requests, connections)
    }

    static func answer(_ body: String, head: String = "Content-Type: application/json\r\nContent-Length: {n}\r\nConnection: close\r\n", status: String = "200 OK") -> String {
        "HTTP/1.1 \(status)\r\n" + head.replacingOccurrences(of: "{n}", with: "\(body.utf8.count)") + "\r\n" + body
    }

    static func rfc3339(_ t: Int64) -> String {
        var tm = tm()
        var time = time_t(t)
        gmtime_r(&time, &tm)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
    }

    /// The answers the warm path prints, and every other one: left, unread, to the Swift path,
    /// which answers as it always did — and the broker is asked exactly once either way.
    @Test func aClientModeAnswerTheWarmPathDoesNotPrintIsTheSwiftPathsAndTheBrokerIsAskedOnce() throws {
        let now = Int64(time(nil))
        let hour = Self.rfc3339(now + 3600), tenMinutes = Self.rfc3339(now + 600), past = Self.rfc3339(now - 3600)
        func token(_ t: String, _ expires: String = hour, extra: String = "") -> String {
            #"{"access_token":"\#(t)","account_id":"acct-1","expires_at":"\#(expires)","email":"a@example.com","plan":"plus"\#(extra)}"#
        }
        let cases: [(name: String, args: [String], reply: String, warm: Bool, status: Int32, stdout: String, stderr: String)] = [
            ("a plain answer", ["get"], Self.answer(token("eyJ.plain")), true, 0, "eyJ.plain\n", ""),
            ("--min-ttl, enough left", ["get", "--min-ttl", "900"], Self.answer(token("eyJ.ttl")), true, 0, "eyJ.ttl\n", ""),
            ("--min-ttl, less left: the notice", ["get", "--min-ttl", "900"], Self.answer(token("eyJ.short", tenMinutes)), false, 0, "eyJ.short\n", "notice:"),
            ("an expired token", ["get"], Self.answer(token("eyJ.old", past)), false, 4, "", "expired"),
            ("an escape in the token", ["get"], Self.answer(token(#"eyJ\u002eesc"#)), false, 0, "eyJ.esc\n", ""),
            ("a nested member", ["get"], Self.answer(token("eyJ.nested", extra: #","limits":{"a":[1,2.5]}"#)), false, 0, "eyJ.nested\n", ""),
            ("no Content-Length", ["get"], Self.answer(token("eyJ.closed"), head: "Connection: close\r\n"), false, 0, "eyJ.closed\n", ""),
            ("a key twice", ["get"], Self.answer(token("eyJ.a", extra: #","access_token":"eyJ.b""#)), false, 1, "", "not a JSON object"),
            ("a space in the token", ["get"], Self.answer(token("two words")), false, 5, "", "characters a token cannot have"),
            ("a chunked body", ["get"], Self.answer(token("eyJ.chunk"), head: "Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n"), false, 1, "", "chunked"),
            ("the broker's store not answering", ["get"], Self.answer(#"{"error":"store","message":"the keyring did not answer"}"#, status: "503 Service Unavailable"), false, 5, "", "the keyring did not answer"),
        ]
        for c in cases {
            let (r, requests, connections) = try Self.askScriptedBroker(c.reply, args: c.args)
            #expect(connections == 1, "\(c.name): the broker was asked \(connections) times")
            let wanted = "GET /v1/token?profile=default" + (c.args.contains("--min-ttl") ? "&min_ttl=900" : "") + " HTTP/1.1"
            #expect(requests == [wanted], "\(c.name): \(requests)")
            #expect(r.stderr.contains(Self.runtimeStarted) != c.warm, "\(c.name): \(c.warm ? "the runtime started" : "answered before the runtime started"): \(r.stderr)")
            #expect(r.status == c.status && r.stdout == c.stdout, "\(c.name): \(r.status) \(r.stdout) \(r.stderr)")
            #expect(c.stderr.isEmpty || r.stderr.contains(c.stderr), "\(c.name): \(r.stderr)")
        }
    }

    /// An answer that cannot be written is exit 1 with the Swift path's words, on either path.
    @Test func anAnswerThatCannotBeWrittenIsExitOne() throws {
        let (s, _) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        // stdout closed by the caller: the Swift path's (it holds fd 1 with /dev/null first).
        let closed = Self.shell(s, #""$BIN" get >&-"#)
        #expect(closed.status == 1 && closed.stderr.contains("cannot write to standard output: it is closed"), "\(closed.status) \(closed.stderr)")
        #expect(closed.stderr.contains(Self.runtimeStarted))
        // A pipe whose reading end is closed before the process starts: EPIPE, the same line from
        // the warm path and from the Swift path.
        let writer = "import os, subprocess, sys\nr, w = os.pipe()\nos.close(r)\n" +
            "p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)\n" +
            "print('\\n'.join(l for l in p.stderr.decode().splitlines() if 'debug:' not in l and 'swift runtime' not in l))\n" +
            "print('exit', p.returncode)\n"
        var lines: [String] = []
        for args in [["get"], ["-v", "get"]] {
            let r = Harness.run("/usr/bin/python3", ["-c", writer, Harness.binary] + args, env: s.env)
            #expect(r.stdout == "chatgpt-credential: cannot write to standard output: Broken pipe\nexit 1\n", "\(args): \(r.stdout) \(r.stderr)")
            lines.append(r.stdout)
        }
        #expect(lines[0] == lines[1])
    }
}

struct WarmPathFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
