import Foundation
import Testing
import SystemRuntime
import HelperProtocols
#if canImport(Glibc)
import Glibc
#endif

/// `doctor` through the built binary (man page VERBS, doctor), in a throwaway home with a private
/// session bus, a real gnome-keyring-daemon and the test issuer. Every run is in a mount
/// namespace of its own whose /run/user is a directory of the sandbox, so the tool's per-user
/// runtime directory (the locks, the broker's default socket) is the test's alone.
/// A clean signed-in home is all ok (exit 0); each thing broken turns its own check (and those
/// that depend on it) to warn or fail with advice, the test follows that advice as printed, and
/// the home is all ok again. `--json` says what the text says, line for line.
@Suite(.serialized) struct DoctorEndToEndTests {
    static let uid = geteuid()
    static let canIsolate = SessionBusEndToEndTests.canIsolate

    struct Check: Equatable {
        var name, status, detail: String
        var advice: String?
    }

    final class Home {
        let s = Sandbox(bus: .none)
        let issuer: TestIssuer
        let keyring: SessionBusEndToEndTests.Keyring
        /// Bound at /run/user in every run: `/run/user/UID` is a 0700 directory of this user.
        let runUser: String
        let codexHome: String
        /// A second profile, kept in the encrypted file (so there is a key file to check).
        let fileProfile = uniqueProfile("dfile")
        var tokens: TestIssuer.SeededTokens

        init() throws {
            issuer = try TestIssuer()
            s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
            keyring = try SessionBusEndToEndTests.Keyring(s)
            runUser = s.root + "/runuser"
            mkdir(runUser, 0o755)
            mkdir(runUser + "/\(DoctorEndToEndTests.uid)", 0o700)
            codexHome = s.root + "/codex"
            mkdir(codexHome, 0o700)
            mkdir(s.root + "/chatmock", 0o700)
            s.env["CODEX_HOME"] = codexHome
            s.env["CHATGPT_LOCAL_HOME"] = s.root + "/chatmock"
            tokens = try issuer.seed(["expires_in": 3600])
            let stored = run(["store"], stdin: tokens.codexAuthJSON)
            guard stored.status == 0 else { throw TestIssuer.Failure(description: "store: \(stored.stderr)") }
            let other = try issuer.seed(["expires_in": 3600])
            let filed = run(["--profile", fileProfile, "--store", "file", "store"], stdin: other.codexAuthJSON)
            guard filed.status == 0 else { throw TestIssuer.Failure(description: "store --store file: \(filed.stderr)") }
        }

        /// The tool's per-user runtime directory as the runs see it, and where it really is.
        var runtimeDir: String { "/run/user/\(DoctorEndToEndTests.uid)/chatgpt-credential" }
        var realRuntimeDir: String { runUser + "/\(DoctorEndToEndTests.uid)/chatgpt-credential" }

        /// `argv` in a mount namespace whose /run/user is `runUser`.
        func isolated(_ argv: [String], env extra: [String: String] = [:], without: [String] = [], stdin: String? = nil) -> RunResult {
            var env = s.env
            for (k, v) in extra { env[k] = v }
            for k in without { env.removeValue(forKey: k) }
            let script = #"set -e; mount --bind "$0" /run/user; exec "$@""#
            return Harness.run(Hostile.unshare, ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, runUser] + argv,
                               env: env, stdin: stdin.map { Array($0.utf8) }, timeout: 60)
        }

        func run(_ args: [String], env extra: [String: String] = [:], without: [String] = [], stdin: String? = nil) -> RunResult {
            isolated([Harness.binary] + args, env: extra, without: without, stdin: stdin)
        }

        /// A shell line, as a person would paste it, in the same namespace and environment.
        func sh(_ line: String, env extra: [String: String] = [:]) -> RunResult {
            isolated(["/bin/sh", "-c", line], env: extra)
        }

        /// `doctor` and `doctor --json`: the checks, after checking that both say the same.
        func doctor(env extra: [String: String] = [:], without: [String] = [],
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> (status: Int32, checks: [Check]) {
            let text = run(["doctor"], env: extra, without: without)
            let json = run(["doctor", "--json"], env: extra, without: without)
            #expect(text.status == json.status, "text and --json exit alike", sourceLocation: sourceLocation)
            let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json.stdout) \(json.stderr)")
            let checks = array.map { Check(name: $0["check"] as? String ?? "", status: $0["status"] as? String ?? "",
                                           detail: $0["detail"] as? String ?? "", advice: $0["advice"] as? String) }
            // Line for line: the text is the JSON's checks, in the same order, with the same words.
            let width = checks.map(\.name.count).max() ?? 0
            let lines = text.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
            #expect(lines.count == checks.count, "\(text.stdout)", sourceLocation: sourceLocation)
            for (line, c) in zip(lines, checks) {
                let expected = c.status.padding(toLength: 4, withPad: " ", startingAt: 0) + "  " + c.name.padding(toLength: width, withPad: " ", startingAt: 0)
                    + "  " + c.detail + (c.advice.map { "; next: " + $0 } ?? "")
                #expect(line == expected, sourceLocation: sourceLocation)
                #expect((c.status == "ok") == (c.advice == nil), "advice exactly for warn and fail: \(line)", sourceLocation: sourceLocation)
            }
            #expect(text.status == (checks.contains { $0.status == "fail" } ? 1 : 0), "exit 1 exactly when a check fails: \(text.stdout)", sourceLocation: sourceLocation)
            // Never a secret, and never advice to log another program out.
            for secret in [tokens.accessToken, tokens.refreshToken, tokens.idToken] {
                #expect(!text.stdout.contains(secret) && !json.stdout.contains(secret) && !text.stderr.contains(secret), sourceLocation: sourceLocation)
            }
            #expect(!text.stdout.lowercased().contains("logout") && !text.stdout.lowercased().contains("log out"), sourceLocation: sourceLocation)
            return (text.status, checks)
        }

        /// Asserts every check is ok, exit 0.
        func expectAllOK(_ why: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let (status, checks) = try doctor(sourceLocation: sourceLocation)
            #expect(status == 0, "\(why): exit 0", sourceLocation: sourceLocation)
            #expect(checks.filter { $0.status != "ok" } == [], "\(why)", sourceLocation: sourceLocation)
        }

        /// Asserts exactly `expected` (check name → status) are not ok; returns their advice.
        func expectOnly(_ expected: [String: String], _ checks: [Check], sourceLocation: SourceLocation = #_sourceLocation) -> [String: String] {
            let notOK = Dictionary(uniqueKeysWithValues: checks.filter { $0.status != "ok" }.map { ($0.name, $0.status) })
            #expect(notOK == expected, "\(checks.filter { $0.status != "ok" })", sourceLocation: sourceLocation)
            return Dictionary(uniqueKeysWithValues: checks.compactMap { c in c.advice.map { (c.name, $0) } })
        }

        /// `serve` started as the advice says (in the same namespace), seen listening by doctor,
        /// then stopped with SIGTERM, after which its socket is gone.
        func serveAndStop(_ socket: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let broker = try #require(BackgroundProcess(Hostile.unshare, ["--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                                                           #"mount --bind "$0" /run/user; exec "$@" 2>&1"#, runUser, Harness.binary, "serve"],
                                                        env: s.env, readyWithin: 20), "the broker did not start", sourceLocation: sourceLocation)
            let (_, served) = try doctor(sourceLocation: sourceLocation)
            #expect(served.allSatisfy { $0.status == "ok" } && served.contains { $0.name == "broker" && $0.detail.hasPrefix("listening at \(socket)") }, "\(served)", sourceLocation: sourceLocation)
            kill(broker.process.processIdentifier, SIGTERM) // serve removes its own socket on SIGTERM
            broker.process.waitUntilExit()
            #expect(SessionBusEndToEndTests.waitUntil { access(self.realRuntimeDir + "/broker.sock", F_OK) != 0 }, "serve removes its socket", sourceLocation: sourceLocation)
        }

        func writeCodexAuth(refreshToken: String, to path: String? = nil) {
            let json = #"{"OPENAI_API_KEY":null,"tokens":{"id_token":"\#(tokens.idToken)","access_token":"\#(tokens.accessToken)","refresh_token":"\#(refreshToken)","account_id":"\#(tokens.accountId)"},"last_refresh":"2026-01-01T00:00:00Z"}"#
            _ = FileManager.default.createFile(atPath: path ?? codexHome + "/auth.json", contents: Data(json.utf8), attributes: [.posixPermissions: 0o600])
        }

        /// The refresh token the default profile's keyring item holds now.
        func storedRefreshToken() -> String? {
            let r = keyring.bus.sh("secret-tool lookup service chatgpt-credential profile \(s.profile)")
            guard r.status == 0, let doc = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] else { return nil }
            return doc["refresh_token"] as? String
        }

        /// Follows a sink advice: runs it when this build has `sink`; otherwise does what a
        /// `codex` sink does to the file (man page SINKS: Codex's shape with an empty refresh
        /// token), so the check can be seen turning ok.
        func followSinkAdvice(_ advice: String, file: String? = nil) -> Bool {
            guard let r = advice.range(of: "then ", options: .backwards) else { return false }
            let command = String(advice[r.upperBound...])
            // The advice's steps in order: the file moved aside first when it says so, then the sink.
            if let mv = advice.range(of: "then mv ") {
                let part = String(advice[advice.index(mv.lowerBound, offsetBy: 5)...]).components(separatedBy: ", then ")[0]
                guard sh(part).status == 0 else { return false }
            }
            if run(["sink", "--help"]).status == 0 { return sh(command.replacingOccurrences(of: "chatgpt-credential", with: Harness.binary)).status == 0 }
            writeCodexAuth(refreshToken: "", to: file)
            return true
        }

        deinit { issuer.stop() }
    }

    @Test(.enabled(if: canIsolate, "needs root and unshare for a private /run/user"))
    func eachProblemTurnsItsCheckAndTheAdviceFixesIt() throws {
        let h = try Home()
        try h.expectAllOK("a clean signed-in home")

        // No session bus reachable at all: the bus, the keyring behind it and the sign-in kept there.
        do {
            let (status, checks) = try h.doctor(without: ["DBUS_SESSION_BUS_ADDRESS"])
            #expect(status == 0)
            let advice = h.expectOnly(["session-bus": "warn", "secret-service": "warn", "sign-in": "warn"], checks)
            #expect(advice["session-bus"]?.contains("export DBUS_SESSION_BUS_ADDRESS") == true)
            // What get says points here, on its one line.
            let get = h.run(["get"], without: ["DBUS_SESSION_BUS_ADDRESS"])
            #expect(get.status == 3 && get.stderr.hasSuffix("; see: chatgpt-credential doctor\n") && get.stderr.split(separator: "\n").count == 1, "\(get.stderr)")
            // Followed: the session's bus address exported.
            let (_, again) = try h.doctor(env: ["DBUS_SESSION_BUS_ADDRESS": h.keyring.bus.address])
            #expect(again.allSatisfy { $0.status == "ok" }, "\(again)")
        }

        // The keyring locked: the keyring check warns, the sign-in kept there fails.
        do {
            try h.keyring.lock()
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = h.expectOnly(["secret-service": "warn", "sign-in": "fail"], checks)
            #expect(advice["sign-in"]?.contains("gnome-keyring-daemon --replace --unlock") == true, "\(advice)")
            let said = h.run(["--no-cache", "status"]) // an access-cache entry would still be served (man page ACCESS CACHE)
            #expect(said.status == 5 && said.stderr.contains("keyring is locked (see: chatgpt-credential doctor); ")
                    && said.stderr.split(separator: "\n").count == 1, "\(said.status) \(said.stderr)")
            let unlock = try #require(advice["secret-service"]?.components(separatedBy: "or with: ").last)
            let ran = h.keyring.bus.startDaemon("PASSWORD=\(h.keyring.password); " + unlock, log: h.s.root + "/unlock.log")
            #expect(ran.status == 0, "\(unlock)")
            #expect(SessionBusEndToEndTests.waitUntil { h.keyring.ownerPID() != nil })
            try h.expectAllOK("after the unlock advice")
        }

        // The in-memory `session` collection as the default: only the keyring check warns.
        do {
            let session = "/org/freedesktop/secrets/collection/session"
            let alias = h.keyring.bus.sh("dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service.SetAlias string:default objpath:\(session)")
            try #require(alias.status == 0, "\(alias.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = h.expectOnly(["secret-service": "warn"], checks)
            let fix = try #require(advice["secret-service"]?.components(separatedBy: "e.g.: ").last)
            #expect(h.keyring.bus.sh(fix).status == 0, "\(fix)")
            try h.expectAllOK("after the SetAlias advice")
        }

        // The key file readable by others: the file store fails, advice chmod.
        do {
            let key = h.s.configDir + "/identity"
            try #require(chmod(key, 0o644) == 0)
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = h.expectOnly(["file-store": "fail"], checks)
            let fix = try #require(advice["file-store"])
            #expect(fix == "chmod 600 \(key)")
            #expect(h.sh(fix).status == 0)
            try h.expectAllOK("after chmod 600 on the key")
        }

        // The key file gone: the encrypted file it opens cannot be read (exit 5), and the file
        // store fails naming the profile, not "no key file" as if none were needed.
        do {
            let key = h.s.configDir + "/identity"
            try #require(rename(key, key + ".away") == 0)
            let unreadable = h.run(["--no-cache", "--profile", h.fileProfile, "get"])
            #expect(unreadable.status == 5, "\(unreadable.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = h.expectOnly(["file-store": "fail"], checks)
            #expect(checks.first { $0.name == "file-store" }?.detail == "no key: \(key) does not exist, so the encrypted file of \(h.fileProfile) cannot be read")
            #expect(advice["file-store"]?.hasPrefix("put the key back at \(key) (mode 600)") == true, "\(advice)")
            try #require(rename(key + ".away", key) == 0)
            try h.expectAllOK("after the key is back")
        }

        // A passphrase file the store would refuse (open to others): the file store fails.
        do {
            let file = h.s.root + "/passphrase"
            #expect(FileManager.default.createFile(atPath: file, contents: Data("correct horse\n".utf8), attributes: [.posixPermissions: 0o644]))
            let (status, checks) = try h.doctor(env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": file])
            #expect(status == 1)
            _ = h.expectOnly(["file-store": "fail"], checks)
            #expect(checks.first { $0.name == "file-store" }?.detail.contains("\(file) is accessible by group or others") == true, "\(checks)")
            try #require(chmod(file, 0o600) == 0)
            let (fixed, again) = try h.doctor(env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": file])
            #expect(fixed == 0 && again.allSatisfy { $0.status == "ok" }, "\(again)")
            #expect(again.first { $0.name == "file-store" }?.detail.hasSuffix(", passphrase file \(file)") == true, "\(again)")
        }

        // A bus variable naming a socket nobody listens on (a session that ended) is no bus: the
        // same warnings as none at all, never "ok" for the bus and advice to start a keyring on it.
        for gone in ["unix:path=\(h.s.root)/gone-bus", "unix:path=\(h.s.root)/passphrase", "not-an-address"] {
            let (status, checks) = try h.doctor(env: ["DBUS_SESSION_BUS_ADDRESS": gone])
            #expect(status == 0)
            let advice = h.expectOnly(["session-bus": "warn", "secret-service": "warn", "sign-in": "warn"], checks)
            #expect(checks.first { $0.name == "session-bus" }?.detail.hasPrefix("DBUS_SESSION_BUS_ADDRESS (\(gone)) names no bus here: ") == true, "\(checks)")
            #expect(advice["secret-service"] == "fix session-bus first", "\(advice)")
        }

        // The data directory open to its group (0750): the store refuses to read from it (exit 5),
        // so the check fails too — the store's own rule, not a looser copy; advice chmod 700.
        do {
            let dir = h.s.dataDir
            try #require(chmod(dir, 0o750) == 0)
            let refused = h.run(["--profile", h.fileProfile, "get"])
            #expect(refused.status == 5, "\(refused.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = h.expectOnly(["file-store": "fail"], checks)
            #expect(advice["file-store"] == "chmod 700 \(dir)", "\(advice)")
            #expect(h.sh(try #require(advice["file-store"])).status == 0)
            try h.expectAllOK("after chmod 700 on the data directory")
        }

        // The lock directory writable by the group: refused, so it fails; advice chmod 700.
        do {
            try #require(chmod(h.realRuntimeDir, 0o770) == 0)
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = h.expectOnly(["lock-directory": "fail"], checks)
            let fix = try #require(advice["lock-directory"])
            #expect(fix == "chmod 700 \(h.runtimeDir)")
            #expect(h.sh(fix).status == 0)
            try h.expectAllOK("after chmod 700 on the lock directory")
        }

        // A broker socket nobody listens on (a broker that stopped): warn; a broker started from
        // the advice listens (ok), and removing the socket once it is gone is ok too.
        do {
            let socket = h.runtimeDir + "/broker.sock"
            let made = h.sh(systemPython + " -c \"import socket; socket.socket(socket.AF_UNIX).bind('\(socket)')\"")
            try #require(made.status == 0, "\(made.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["broker": "warn"], checks)["broker"])
            #expect(advice.contains("chatgpt-credential serve") && advice.contains("rm \(socket)"))
            try h.serveAndStop(socket)
            try h.expectAllOK("after the broker stopped cleanly")
        }

        // Codex holding this tool's very refresh token: fail; its advice is a sink, never a logout.
        do {
            h.writeCodexAuth(refreshToken: h.tokens.refreshToken)
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = try #require(h.expectOnly(["codex": "fail"], checks)["codex"])
            #expect(advice.contains("sink add --format codex") && advice.contains("--take-over"), "\(advice)")
            #expect(checks.first { $0.name == "codex" }?.detail.contains("very refresh token") == true)
            #expect(h.followSinkAdvice(advice))
            try h.expectAllOK("after a codex sink took the file over")
        }

        // Codex holding a refresh token this tool already spent (it refreshed since): fail.
        do {
            let spent = h.tokens.refreshToken
            let refreshed = h.run(["get", "--force-refresh"])
            try #require(refreshed.status == 0, "\(refreshed.stderr)")
            h.writeCodexAuth(refreshToken: spent)
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            // Written over the codex sink of the step before: that sink is changed by another program too.
            let advice = try #require(h.expectOnly(["codex": "fail", "sinks": "warn"], checks)["codex"])
            #expect(checks.first { $0.name == "codex" }?.detail.contains("already spent") == true, "\(checks)")
            #expect(advice.contains("mv ") && advice.contains("sink add --format codex") && !advice.contains("--take-over"), "\(advice)")
            #expect(h.followSinkAdvice(advice))
            try h.expectAllOK("after the spent file was moved away and a sink written")
        }

        // Codex holding a refresh token of its own: warn.
        do {
            h.writeCodexAuth(refreshToken: "rt-codex-own-\(UInt32.random(in: 0...UInt32.max))")
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["codex": "warn", "sinks": "warn"], checks)["codex"])
            #expect(h.followSinkAdvice(advice))
            try h.expectAllOK("after a codex sink took the file over")
        }

        // Codex keeping this tool's very refresh token in its keyring item: fail; the advice
        // switches Codex to a file, removes the item (no logout) and gives it a sink.
        do {
            let current = try #require(h.storedRefreshToken(), "the keyring item's refresh token")
            let account = CodexKeyring.account(canonicalHome: h.codexHome)
            let item = h.keyring.bus.sh("secret-tool store --label=codex service 'Codex Auth' account '\(account)'",
                                        stdin: #"{"tokens":{"id_token":"x","access_token":"y","refresh_token":"\#(current)","account_id":"a"}}"#)
            try #require(item.status == 0, "\(item.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = try #require(h.expectOnly(["codex": "fail"], checks)["codex"])
            #expect(checks.first { $0.name == "codex" }?.detail.contains("keyring item 'Codex Auth' \(account) holds the very refresh token") == true, "\(checks)")
            let clear = try #require(advice.range(of: "secret-tool clear ").map { String(advice[$0.lowerBound...]).components(separatedBy: ", then ")[0] }, "\(advice)")
            #expect(advice.contains("cli_auth_credentials_store = \"file\" in \(h.codexHome)/config.toml") && !advice.contains("--take-over"), "\(advice)")
            _ = FileManager.default.createFile(atPath: h.codexHome + "/config.toml", contents: Data("cli_auth_credentials_store = \"file\"\n".utf8))
            #expect(h.keyring.bus.sh(clear).status == 0, "\(clear)")
            #expect(h.followSinkAdvice(advice))
            try h.expectAllOK("after the item was removed and a sink written")
        }

        // A profile kept in both stores: warn; the advice removes the copy auto does not read.
        do {
            let fileCopy = h.s.dataDir + "/\(h.fileProfile).age"
            try FileManager.default.copyItem(atPath: fileCopy, toPath: h.s.dataDir + "/\(h.s.profile).age")
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["profiles": "warn"], checks)["profiles"])
            #expect(advice.contains("secret-tool clear service chatgpt-credential profile \(h.s.profile)"), "\(advice)")
            let fix = try #require(advice.components(separatedBy: "does not read: ").last)
            #expect(h.sh(fix).status == 0, "\(fix)")
            try h.expectAllOK("after the keyring's copy was removed")
        }

        // A sink another program rewrote: only the sinks check warns; the advice's way to stop
        // keeping it (sink remove) turns it back to ok and leaves that program's file alone.
        do {
            let path = h.s.root + "/sink-token"
            let added = h.run(["sink", "add", "--format", "token", "--path", path])
            #expect(added.status == 0, "\(added.stderr)")
            try h.expectAllOK("with a fresh token sink")
            try Data("written by another program\n".utf8).write(to: URL(fileURLWithPath: path + ".new"))
            #expect(rename(path + ".new", path) == 0)
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["sinks": "warn"], checks)["sinks"])
            let detail = checks.first { $0.name == "sinks" }?.detail ?? ""
            #expect(detail.hasPrefix(path) && detail.contains("was changed by another program"), "\(detail)")
            let remove = try #require(advice.range(of: "to stop keeping it, run: ").map { String(advice[$0.upperBound...]) }, "\(advice)")
            #expect(h.sh(remove.replacingOccurrences(of: "chatgpt-credential", with: Harness.binary)).status == 0, "\(remove)")
            try h.expectAllOK("after the sink was removed")
            #expect((try? String(contentsOfFile: path, encoding: .utf8)) == "written by another program\n")
        }
    }

    @Test(.enabled(if: canIsolate, "needs root and unshare for a private /run/user"))
    func chatmockUnitsAndTheIssuerBackoff() throws {
        let h = try Home()
        try h.expectAllOK("a clean signed-in home")

        // ChatMock's auth.json holding this tool's very refresh token: fail, a chatmock sink.
        do {
            let file = h.s.root + "/chatmock/auth.json"
            h.writeCodexAuth(refreshToken: try #require(h.storedRefreshToken()), to: file)
            let (status, checks) = try h.doctor()
            #expect(status == 1)
            let advice = try #require(h.expectOnly(["chatmock": "fail"], checks)["chatmock"])
            #expect(advice.contains("quit ChatMock") && advice.contains("sink add --format chatmock --path \(file) --take-over"), "\(advice)")
            #expect(h.followSinkAdvice(advice, file: file))
            try h.expectAllOK("after a chatmock sink took the file over")
        }

        // The user units: installed and not enabled is ok; enabled is ok; an enabled unit whose
        // file is gone warns, and removing the dangling link (what disable does) is ok again
        // (not installed).
        do {
            let units = h.s.env["XDG_CONFIG_HOME"]! + "/systemd/user"
            try FileManager.default.createDirectory(atPath: units + "/timers.target.wants", withIntermediateDirectories: true)
            for name in ["chatgpt-credential.socket", "chatgpt-credential.service.in", "chatgpt-credential-refresh.timer", "chatgpt-credential-refresh.service.in",
                         "chatgpt-credential-sinks.service.in"] {
                try FileManager.default.copyItem(atPath: Harness.repoRoot + "/systemd/" + name, toPath: units + "/" + name.replacingOccurrences(of: ".in", with: ""))
            }
            var (_, checks) = try h.doctor()
            #expect(checks.first { $0.name == "systemd-units" }?.detail.contains("not enabled: chatgpt-credential.socket, chatgpt-credential-refresh.timer, chatgpt-credential-sinks.service") == true, "\(checks)")
            try h.expectAllOK("installed, not enabled")
            let link = units + "/timers.target.wants/chatgpt-credential-refresh.timer"
            try #require(symlink(units + "/chatgpt-credential-refresh.timer", link) == 0)
            (_, checks) = try h.doctor()
            #expect(checks.first { $0.name == "systemd-units" }?.detail.contains("enabled: chatgpt-credential-refresh.timer") == true, "\(checks)")
            try h.expectAllOK("the timer enabled")

            // The broker's socket unit enabled, yet nothing listens (no user manager runs it): the
            // broker check warns; the broker started as the advice says listens; disabled, all ok.
            let socketLink = units + "/sockets.target.wants/chatgpt-credential.socket"
            mkdir(units + "/sockets.target.wants", 0o755)
            try #require(symlink(units + "/chatgpt-credential.socket", socketLink) == 0)
            let (_, idle) = try h.doctor()
            let brokerAdvice = try #require(h.expectOnly(["broker": "warn"], idle)["broker"])
            #expect(brokerAdvice.contains("systemctl --user start chatgpt-credential.socket") && brokerAdvice.contains("chatgpt-credential serve"), "\(brokerAdvice)")
            try h.serveAndStop(h.runtimeDir + "/broker.sock")
            try #require(unlink(socketLink) == 0) // what systemctl --user disable does
            try h.expectAllOK("the socket unit disabled")
            // The units removed (the package uninstalled) with the timer still enabled.
            for name in ["chatgpt-credential.socket", "chatgpt-credential.service", "chatgpt-credential-refresh.timer", "chatgpt-credential-refresh.service",
                         "chatgpt-credential-sinks.service"] {
                try FileManager.default.removeItem(atPath: units + "/" + name)
            }
            let (status, broken) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["systemd-units": "warn"], broken)["systemd-units"])
            let fix = try #require(advice.range(of: "(or: ").map { String(advice[$0.upperBound...].dropLast()) }, "\(advice)")
            #expect(fix == "rm \(link)")
            #expect(h.sh(fix).status == 0)
            try h.expectAllOK("the dangling link removed")
        }

        // The issuer failing: the shared back-off is a warn that clears by itself, as it says.
        do {
            try h.issuer.configure(["faults": Array(repeating: ["status": 503], count: 20)])
            let got = h.run(["get", "--force-refresh"])
            #expect(got.status == 0 && got.stderr.contains("notice"), "the stored token, with a notice: \(got.stderr)")
            let (status, checks) = try h.doctor()
            #expect(status == 0)
            let advice = try #require(h.expectOnly(["issuer-backoff": "warn"], checks)["issuer-backoff"])
            #expect(advice.contains("clears by itself"), "\(advice)")
            // Followed: nothing to do but let it pass (polled, bounded by the back-off's own length).
            // (`--json` alone here: a text run and a JSON run may fall on either side of the moment it clears.)
            #expect(SessionBusEndToEndTests.waitUntil(within: 40) {
                let r = h.run(["doctor", "--json"])
                return r.status == 0 && r.stdout.contains(#"{"check":"issuer-backoff","status":"ok""#) && !r.stdout.contains(#""status":"warn""#)
            })
            try h.expectAllOK("once the back-off passed")
        }
    }

    @Test func clientModeChecksTheBrokerOnly() throws {
        let w = try BrokerServerEndToEndTests.World()
        let address = "unix:" + w.socket
        // No broker yet: fail, exit 1, advice for the broker's side.
        let missing = w.sandbox.run(["doctor"], env: ["CHATGPT_CREDENTIAL_BROKER": address])
        #expect(missing.status == 1, "\(missing.stdout) \(missing.stderr)")
        #expect(missing.stdout.hasPrefix("fail  broker  ") && missing.stdout.contains("on the broker's side"), "\(missing.stdout)")
        #expect(missing.stdout.split(separator: "\n").count == 1, "only the broker is checked in client mode")
        try w.serve()
        let ok = w.sandbox.run(["doctor", "--json"], env: ["CHATGPT_CREDENTIAL_BROKER": address])
        #expect(ok.status == 0, "\(ok.stderr)")
        let checks = try #require(try JSONSerialization.jsonObject(with: Data(ok.stdout.utf8)) as? [[String: Any]])
        #expect(checks.count == 1 && checks[0]["check"] as? String == "broker" && checks[0]["status"] as? String == "ok", "\(checks)")
        // Asked /v1/health, never a token.
        #expect(w.broker?.stderr.contains("/v1/token") != true)
        w.stop()
    }
}
