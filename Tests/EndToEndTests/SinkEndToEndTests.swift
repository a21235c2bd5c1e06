import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Sinks (man page, SINKS; issue 28's "Done when") through the built binary against the loopback
/// test issuer, with the file store.
@Suite(.serialized) struct SinkEndToEndTests {
    struct World {
        let sandbox: Sandbox
        let issuer: TestIssuer
        let tokens: TestIssuer.SeededTokens
        var home: String { sandbox.env["HOME"]! }
        func run(_ args: [String], env: [String: String] = [:], stdin: String? = nil) -> RunResult {
            sandbox.run(args, stdin: stdin, env: env)
        }
    }

    /// A signed-in file-store sandbox: tokens valid for `expiresIn` seconds, stored as a bare token set.
    static func world(expiresIn: Int64 = 3600, env: [String: String] = [:]) throws -> World {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        for (k, v) in env { s.env[k] = v }
        let t = try issuer.seed(["expires_in": expiresIn])
        let input = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)"}"#
        let r = s.run(["store"], stdin: input)
        guard r.status == 0 else { throw HardeningFailure("store failed (\(r.status)): \(r.stderr)") }
        return World(sandbox: s, issuer: issuer, tokens: t)
    }

    static func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    static func json(_ path: String) -> [String: Any]? {
        FileManager.default.contents(atPath: path).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
    }

    /// Files in `dir` whose name marks a temp file (`.NAME.tmp-…`).
    static func temps(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.contains(".tmp-") }
    }

    static func accessToken(in path: String, format: String) -> String? {
        switch format {
        case "codex", "chatmock": return (json(path)?["tokens"] as? [String: Any])?["access_token"] as? String
        case "json": return json(path)?["access_token"] as? String
        case "token": return contents(path)?.trimmingCharacters(in: .newlines)
        case "env":
            return contents(path)?.split(separator: "\n").first { $0.hasPrefix("CHATGPT_ACCESS_TOKEN=") }.map { String($0.dropFirst(21)) }
        default: return nil
        }
    }

    // MARK: add, formats, modes

    @Test func sinkAddWritesEveryFormatAt0600WithoutARefreshToken() throws {
        let w = try Self.world()
        let dir = w.home + "/sinks"
        for format in ["token", "env", "json"] {
            let r = w.run(["sink", "add", "--format", format, "--path", "\(dir)/\(format)"])
            #expect(r.status == 0, "\(format): \(r.stderr)")
            #expect(Self.accessToken(in: "\(dir)/\(format)", format: format) == w.tokens.accessToken, "\(format)")
            #expect(Self.mode("\(dir)/\(format)") == 0o600)
            #expect(!(Self.contents("\(dir)/\(format)") ?? "").contains(w.tokens.refreshToken))
        }
        let codex = w.run(["sink", "add", "--format", "codex"])
        #expect(codex.status == 0, "\(codex.stderr)")
        let auth = try #require(Self.json(w.home + "/.codex/auth.json"))
        let tokens = try #require(auth["tokens"] as? [String: Any])
        #expect(tokens["refresh_token"] as? String == "")
        #expect(tokens["access_token"] as? String == w.tokens.accessToken)
        #expect(tokens["id_token"] as? String == w.tokens.idToken)
        #expect(tokens["account_id"] as? String == w.tokens.accountId)
        #expect(auth.keys.contains("OPENAI_API_KEY") && auth["OPENAI_API_KEY"] is NSNull)
        #expect(auth["last_refresh"] is String)
        #expect(Self.mode(w.home + "/.codex/auth.json") == 0o600)
        let chatmock = w.run(["sink", "add", "--format", "chatmock"], env: ["CHATGPT_LOCAL_HOME": w.home + "/cm"])
        #expect(chatmock.status == 0, "\(chatmock.stderr)")
        #expect((Self.json(w.home + "/cm/auth.json")?["tokens"] as? [String: Any])?["refresh_token"] as? String == "")
        let env = try #require(Self.contents("\(dir)/env"))
        #expect(env == "CHATGPT_ACCESS_TOKEN=\(w.tokens.accessToken)\nCHATGPT_ACCOUNT_ID=\(w.tokens.accountId)\n")
        let list = w.run(["sink", "list", "--json"])
        #expect(list.status == 0)
        let sinks = try #require((try JSONSerialization.jsonObject(with: Data(list.stdoutBytes)) as? [String: Any])?["sinks"] as? [[String: Any]])
        #expect(sinks.count == 5)
        #expect(sinks.allSatisfy { $0["state"] as? String == "fresh" }, "\(sinks)")
    }

    @Test func sinkAddWhenNotSignedInExits3() throws {
        let s = Sandbox(bus: .none, store: "file")
        let r = s.run(["sink", "add", "--format", "token", "--path", s.env["HOME"]! + "/t"])
        #expect(r.status == 3, "exit 3 (notSignedIn) expected: \(r.status) \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.env["HOME"]! + "/t"))
    }

    @Test func sinkIsRefusedInClientMode() throws {
        let s = Sandbox(bus: .none, store: "file")
        let r = s.run(["--broker", "unix:/nonexistent/broker.sock", "sink", "list"])
        #expect(r.status == 2, "exit 2 (refused in client mode) expected: \(r.status) \(r.stderr)")
    }

    @Test func addingASinkAgainKeepsItsFileAndListShowsTheProfile() throws {
        let w = try Self.world()
        let path = w.home + "/tok"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        let again = w.run(["sink", "add", "--format", "json", "--path", path])
        #expect(again.status == 0, "re-adding a sink of ours: \(again.stderr)")
        #expect(Self.accessToken(in: path, format: "json") == w.tokens.accessToken)
        let list = w.run(["sink", "list"])
        #expect(list.status == 0)
        #expect(list.stdout == "\(w.sandbox.profile)  json     fresh  \(path)\n", "\(list.stdout)")
    }

    @Test func aCodexSinkSaysWhatToSetWhereCodexUsesTheKeyringAndChangesNothingOfCodexs() throws {
        let w = try Self.world()
        mkdir(w.home + "/.codex", 0o700)
        let config = "model = \"gpt-5\"\ncli_auth_credentials_store = \"keyring\"\n"
        try config.write(toFile: w.home + "/.codex/config.toml", atomically: true, encoding: .utf8)
        let r = w.run(["sink", "add", "--format", "codex"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains(#"cli_auth_credentials_store = "file""#), "\(r.stderr)")
        #expect(Self.contents(w.home + "/.codex/config.toml") == config)
    }

    @Test func aChatmockSinkWarnsWhenCodexHomeIsSet() throws {
        let w = try Self.world()
        mkdir(w.home + "/codexhome", 0o700)
        let r = w.run(["sink", "add", "--format", "chatmock"], env: ["CODEX_HOME": w.home + "/codexhome"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("CODEX_HOME is set"), "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: w.home + "/.chatgpt-local/auth.json"))
    }

    // MARK: fresh by construction

    @Test func fiftyConcurrentGetsWithTwoSinksRefreshOnceAndNeverShowAPartialFile() throws {
        let w = try Self.world(expiresIn: 3600)
        let codexPath = w.home + "/.codex/auth.json", envPath = w.home + "/app/token.env"
        #expect(w.run(["sink", "add", "--format", "codex"]).status == 0)
        #expect(w.run(["sink", "add", "--format", "env", "--path", envPath]).status == 0)
        // Make the stored token expiring: a forced refresh of a short-lived seed is not what is
        // tested, so the issuer hands out 3600 s tokens while the stored one expires in 10 s.
        let short = try w.issuer.seed(["expires_in": 10])
        let again = w.run(["store"], stdin: #"{"access_token":"\#(short.accessToken)","refresh_token":"\#(short.refreshToken)","id_token":"\#(short.idToken)"}"#)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(Self.accessToken(in: codexPath, format: "codex") == short.accessToken, "store rewrites the sinks")
        try w.issuer.configure(["refresh_delay": 0.3])

        final class Reader: @unchecked Sendable {
            let stop = NSLock(); var stopped = false; var reads = 0; var bad: [String] = []
        }
        let reader = Reader()
        let thread = Thread {
            while true {
                reader.stop.lock(); let done = reader.stopped; reader.stop.unlock()
                if done { break }
                if let d = FileManager.default.contents(atPath: codexPath) {
                    if (try? JSONSerialization.jsonObject(with: d)) == nil { reader.bad.append(String(decoding: d, as: UTF8.self)) }
                    reader.reads += 1
                } else {
                    reader.bad.append("(missing)")
                }
            }
        }
        thread.start()
        let env = w.sandbox.env
        let results = concurrentRuns(50) { Harness.run(Harness.binary, ["get"], env: env, timeout: 60) }
        reader.stop.lock(); reader.stopped = true; reader.stop.unlock()
        while !thread.isFinished { usleep(1000) }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.filter { $0.status != 0 }.map(\.stderr))")
        let printed = Set(results.map(\.stdout))
        #expect(printed.count == 1)
        let token = try #require(printed.first).trimmingCharacters(in: .newlines)
        #expect(token != short.accessToken)
        #expect(try w.issuer.counter("refresh_requests") == 1)
        #expect(Self.accessToken(in: codexPath, format: "codex") == token)
        #expect(Self.accessToken(in: envPath, format: "env") == token)
        #expect(reader.bad.isEmpty, "a reader saw a partial or missing file: \(reader.bad.prefix(2))")
        #expect(reader.reads > 0)
        #expect(Self.temps(w.home + "/.codex").isEmpty && Self.temps(w.home + "/app").isEmpty)
    }

    @Test func aRefreshByAProcessWithAnotherXDGConfigHomeStillRewritesTheSinks() throws {
        // The passphrase file store: readable whatever XDG_CONFIG_HOME says (the identity lives there).
        let dir = NSTemporaryDirectory() + "ccred-sink-pass-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(dir, 0o700)
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: dir + "/pass", contents: Data("correct horse".utf8), attributes: [.posixPermissions: 0o600])
        let w = try Self.world(env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": dir + "/pass"])
        let path = w.home + "/tok"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        mkdir(dir + "/otherconfig", 0o700)
        let r = w.run(["get", "--force-refresh"], env: ["XDG_CONFIG_HOME": dir + "/otherconfig"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try w.issuer.counter("refresh_requests") == 1)
        #expect(Self.accessToken(in: path, format: "token") == r.stdout.trimmingCharacters(in: .newlines))
        #expect(r.stdout != w.tokens.accessToken + "\n")
    }

    /// The registry lives in the keyring item's document just as in the file's.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil,
                   "no D-Bus session: run the suite through scripts/with-keyring"))
    func sinksAreKeptWithAKeyringCredentialToo() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .inherit, store: "secret-service")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        defer { _ = s.run(["erase", "--no-revoke"]) }
        let t = try issuer.seed(["expires_in": 3600])
        let stored = s.run(["store"], stdin: #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)"}"#)
        #expect(stored.status == 0, "\(stored.stderr)")
        let path = s.env["HOME"]! + "/kr.env"
        #expect(s.run(["sink", "add", "--format", "env", "--path", path]).status == 0)
        let r = s.run(["get", "--force-refresh"], env: ["XDG_CONFIG_HOME": s.root + "/elsewhere"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.accessToken(in: path, format: "env") == r.stdout.trimmingCharacters(in: .newlines))
        #expect(s.run(["erase", "--no-revoke"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func onChangeRunsOncePerRewrite() throws {
        let w = try Self.world()
        let log = w.home + "/changes.log"
        let script = w.home + "/note.sh"
        _ = FileManager.default.createFile(atPath: script, contents: Data("#!/bin/sh\necho changed >> \(log)\n".utf8), attributes: [.posixPermissions: 0o700])
        #expect(w.run(["sink", "add", "--format", "token", "--path", w.home + "/tok", "--on-change", script]).status == 0)
        #expect(Self.contents(log) == nil, "sink add's own write is not a rewrite")
        for n in 1...2 {
            #expect(w.run(["get", "--force-refresh"]).status == 0)
            #expect(Self.contents(log) == String(repeating: "changed\n", count: n), "after \(n) refreshes")
        }
        #expect(w.run(["get"]).status == 0) // no refresh, no rewrite
        #expect(Self.contents(log) == "changed\nchanged\n")
    }

    // MARK: compare-and-swap

    @Test func aSinkRewrittenByAnotherProgramIsLeftAndReported() throws {
        let w = try Self.world()
        let path = w.home + "/app.env"
        #expect(w.run(["sink", "add", "--format", "env", "--path", path]).status == 0)
        let theirs = "CHATGPT_ACCESS_TOKEN=theirs\n"
        try theirs.write(toFile: path, atomically: true, encoding: .utf8)
        let r = w.run(["get", "--force-refresh"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.contents(path) == theirs, "the other program's file was overwritten")
        #expect(r.stderr.contains("changed by another program"))
        let list = w.run(["sink", "list"])
        #expect(list.status == 0, "sink list exits 0 (success) with a changed sink")
        #expect(list.stdout.contains("changed by another program"), "\(list.stdout)")
        let status = w.run(["status"])
        #expect(status.stdout.contains("changed by another program"), "\(status.stdout)")
        let json = w.run(["status", "--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [String: Any])
        let sinks = try #require(o["sinks"] as? [[String: Any]])
        #expect(sinks.first?["state"] as? String == "changed by another program")
        // Removed by the other program: never recreated.
        unlink(path)
        #expect(w.run(["get", "--force-refresh"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// Codex's auth.json holding a live sign-in of its own.
    static func codexFile(_ w: World, _ path: String, account: String? = nil, expiresIn: Int64? = nil) throws -> TestIssuer.SeededTokens {
        var options: [String: Any] = [:]
        if let expiresIn { options["expires_in"] = expiresIn }
        if let account { options["account_id"] = account }
        let t = try w.issuer.seed(options)
        let text = #"{"OPENAI_API_KEY":null,"tokens":{"id_token":"\#(t.idToken)","access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","account_id":"\#(t.accountId)"},"last_refresh":"2026-01-01T00:00:00Z"}"#
        mkdir((path as NSString).deletingLastPathComponent, 0o700)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return t
    }

    @Test func sinkAddOverAFileHoldingARefreshTokenExits2NamingTakeOver() throws {
        let w = try Self.world()
        let path = w.home + "/.codex/auth.json"
        _ = try Self.codexFile(w, path)
        let before = Self.contents(path)
        let r = w.run(["sink", "add", "--format", "codex"])
        #expect(r.status == 2, "exit 2 (usage) expected: \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("--take-over"))
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(Self.contents(path) == before)
    }

    @Test func takeOverImportsTheFilesRefreshTokenAndTheFileNoLongerHoldsIt() throws {
        let w = try Self.world()
        let path = w.home + "/.codex/auth.json"
        let theirs = try Self.codexFile(w, path)
        let r = w.run(["sink", "add", "--format", "codex", "--take-over"])
        #expect(r.status == 0, "\(r.stderr)")
        let stored = try #require(try w.sandbox.storedDocument())
        #expect(stored["refresh_token"] as? String == theirs.refreshToken)
        #expect(stored["imported_from"] == nil, "this tool owns the chain now")
        let file = try #require(Self.contents(path))
        #expect(!file.contains(theirs.refreshToken))
        #expect((Self.json(path)?["tokens"] as? [String: Any])?["refresh_token"] as? String == "")
    }

    @Test(arguments: ["codex", "chatmock"])
    func takeOverIsRefusedWhileThatProgramRuns(_ program: String) throws {
        let w = try Self.world()
        let path = w.home + "/.codex/auth.json"
        _ = try Self.codexFile(w, path)
        let bin = w.home + "/bin"
        mkdir(bin, 0o700)
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: bin + "/" + program)
        let running = Process()
        running.executableURL = URL(fileURLWithPath: bin + "/" + program)
        running.arguments = ["30"]
        try running.run()
        defer { kill(running.processIdentifier, SIGKILL); running.waitUntilExit() }
        let before = Self.contents(path)
        let r = w.run(["sink", "add", "--format", "codex", "--take-over"])
        #expect(r.status == 2, "exit 2 (usage) expected: \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("\(program) is running"), "\(r.stderr)")
        #expect(Self.contents(path) == before)
        #expect(try w.sandbox.storedDocument()?["refresh_token"] as? String == w.tokens.refreshToken)
    }

    @Test func takeOverIsRefusedWhenTheProfileHoldsAnotherAccount() throws {
        let w = try Self.world()
        let path = w.home + "/.codex/auth.json"
        _ = try Self.codexFile(w, path, account: "acct-someone-else")
        let before = Self.contents(path)
        let r = w.run(["sink", "add", "--format", "codex", "--take-over"])
        #expect(r.status == 2, "exit 2 (usage) expected: \(r.status) \(r.stderr)")
        #expect(Self.contents(path) == before)
    }

    /// A file left with the write before the last (a process stopped between saving the document
    /// and rewriting the file): `status` says due, and `sink run` rewrites it without a refresh.
    @Test func sinkRunRepairsASinkThatStillHoldsThePreviousWrite() throws {
        let w = try Self.world()
        let path = w.home + "/tok"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        let before = try #require(Self.contents(path))
        let refreshed = w.run(["get", "--force-refresh"])
        #expect(refreshed.status == 0)
        try before.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(w.run(["sink", "list"]).stdout.contains("  due  "), "a file holding the previous write is due")
        let run = try LiveRun(w.sandbox, ["sink", "run"])
        defer { kill(run.process.processIdentifier, SIGTERM); _ = run.wait(timeout: 10) }
        #expect(run.waitFor("still held the token before was rewritten", timeout: 20), "\(run.stderr)")
        #expect(Self.contents(path) == refreshed.stdout)
        #expect(try w.issuer.counter("refresh_requests") == 1)
    }

    // MARK: hostile paths

    @Test func hostilePathsAreRefusedAndLeftAsTheyWere() throws {
        let w = try Self.world()
        let h = w.home
        mkdir(h + "/open", 0o700); chmod(h + "/open", 0o777)
        mkdir(h + "/group", 0o700); chmod(h + "/group", 0o770)
        symlink(h + "/target", h + "/link")
        try "keep\n".write(toFile: h + "/target", atomically: true, encoding: .utf8)
        mkdir(h + "/adir", 0o700)
        try "API_KEY=sk-mine\n".write(toFile: h + "/.env", atomically: true, encoding: .utf8)
        try #"{"OPENAI_API_KEY":"sk-mine","tokens":null}"#.write(toFile: h + "/apikey.json", atomically: true, encoding: .utf8)
        let cases: [(String, String)] = [("token", h + "/open/t"), ("token", h + "/group/t"), ("token", h + "/link"),
                                         ("token", h + "/adir"), ("env", h + "/.env"), ("codex", h + "/apikey.json"),
                                         ("json", w.sandbox.dataDir + "/other.age")]
        for (format, path) in cases {
            let r = w.run(["sink", "add", "--format", format, "--path", path])
            #expect(r.status == 2 || r.status == 5, "\(path): exit 2 or 5 expected: \(r.status) \(r.stderr)")
            #expect(Hostile.isOneLine(r.stderr), "\(path): \(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: h + "/open/t") && !FileManager.default.fileExists(atPath: h + "/group/t"))
        #expect(Self.contents(h + "/target") == "keep\n")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: h + "/link")) == h + "/target")
        #expect(Self.contents(h + "/.env") == "API_KEY=sk-mine\n")
        #expect(Self.contents(h + "/apikey.json") == #"{"OPENAI_API_KEY":"sk-mine","tokens":null}"#)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: h + "/adir")) ?? ["?"]).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.dataDir + "/other.age"))
        let list = w.run(["sink", "list", "--json"])
        #expect(list.stdout.contains(#""sinks":[]"#), "\(list.stdout)")
    }

    // MARK: erase, remove

    @Test func eraseRemovesTheSinkFilesAndLeavesNoTempFile() throws {
        let w = try Self.world()
        let keep = w.home + "/changed.env"
        #expect(w.run(["sink", "add", "--format", "codex"]).status == 0)
        #expect(w.run(["sink", "add", "--format", "env", "--path", keep]).status == 0)
        try "MINE=1\n".write(toFile: keep, atomically: true, encoding: .utf8)
        let r = w.run(["erase", "--no-revoke"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.home + "/.codex/auth.json"))
        #expect(Self.contents(keep) == "MINE=1\n", "a sink another program changed is left")
        #expect(Self.temps(w.home + "/.codex").isEmpty && Self.temps(w.home).isEmpty)
    }

    /// Two rewrites in a row that fail (the directory made writable by others, which a rewrite
    /// refuses) leave the file this tool's: once the directory is sound again the next refresh
    /// rewrites it, and it is never said to be changed by another program.
    @Test func twoFailedRewritesInARowLeaveTheSinkOurs() throws {
        let w = try Self.world()
        let dir = w.home + "/sinkdir", path = dir + "/t.token"
        mkdir(dir, 0o700)
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        let written = Self.contents(path)
        try #require(chmod(dir, 0o777) == 0)
        for _ in 0..<2 {
            let r = w.run(["get", "--force-refresh"])
            #expect(r.status == 0 && r.stderr.contains("could not be rewritten"), "\(r.status) \(r.stderr)")
            #expect(Self.contents(path) == written)
        }
        #expect(w.run(["sink", "list"]).stdout.contains("  due  "), "a sink whose rewrite failed is due")
        try #require(chmod(dir, 0o700) == 0)
        let r = w.run(["get", "--force-refresh"])
        #expect(r.status == 0 && !r.stderr.contains("changed by another program"), "\(r.stderr)")
        #expect(Self.contents(path) == r.stdout, "the sink holds the token get printed")
        let list = w.run(["sink", "list"])
        #expect(list.stdout.contains("  fresh  "), "\(list.stdout) \(list.stderr)")
    }

    /// A `sink add` whose file cannot be written (a read-only mount) fails, exit 5, and
    /// registers nothing: no sink is listed and no later refresh speaks of it.
    @Test func aSinkAddThatCannotWriteRegistersNothing() throws {
        guard geteuid() == 0 else { Issue.record("mounting a tmpfs needs root (CI has it)"); return }
        let w = try Self.world()
        let dir = w.home + "/ro"
        mkdir(dir, 0o700)
        let env = ["PATH": "/usr/bin:/bin"]
        try #require(Harness.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir], env: env).status == 0)
        defer { _ = Harness.run("/bin/umount", ["-l", dir], env: env) }
        try #require(Harness.run("/bin/mount", ["-o", "remount,ro", dir], env: env).status == 0)
        let add = w.run(["sink", "add", "--format", "token", "--path", dir + "/x.token"])
        #expect(add.status == 5, "\(add.status) \(add.stderr)")
        let list = w.run(["sink", "list", "--json"])
        #expect(list.status == 0 && list.stdout.contains(#""sinks":[]"#), "\(list.stdout)")
        let r = w.run(["get", "--force-refresh"])
        #expect(r.status == 0 && !r.stderr.contains("sink"), "\(r.stderr)")
    }

    /// A sink another program replaced with a symbolic link is "changed by another program"
    /// everywhere — the refresh's notice, `sink list`, `status`, `doctor` — and is not followed.
    @Test func aSinkReplacedByASymlinkIsChangedByAnotherProgramEverywhere() throws {
        let w = try Self.world()
        let path = w.home + "/a.token", target = w.home + "/other"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        try "theirs\n".write(toFile: target, atomically: true, encoding: .utf8)
        try #require(unlink(path) == 0 && symlink(target, path) == 0)
        let r = w.run(["get", "--force-refresh"])
        #expect(r.status == 0 && r.stderr.contains("changed by another program"), "\(r.stderr)")
        #expect(Self.contents(target) == "theirs\n")
        #expect(w.run(["sink", "list"]).stdout.contains("changed by another program"))
        #expect(w.run(["status"]).stdout.contains("changed by another program"))
        let doctor = w.run(["doctor"])
        #expect(doctor.stdout.contains("was changed by another program"), "\(doctor.stdout)")
    }

    @Test func sinkRemoveStopsKeepingAndRemovesTheFile() throws {
        let w = try Self.world()
        let path = w.home + "/tok"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        let r = w.run(["sink", "remove", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(Self.temps(w.home).isEmpty)
        #expect(w.run(["get", "--force-refresh"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: path), "a removed sink was recreated")
        let again = w.run(["sink", "remove", path])
        #expect(again.status == 2, "exit 2 (no such sink) expected: \(again.status)")
    }

    /// Without a profile named, `sink list` shows every profile's sinks (its `profile` field says
    /// whose) and `sink remove PATH` finds the profile that keeps PATH, as `sink run` keeps them
    /// all; with one named, only that profile's.
    @Test func withoutAProfileNamedSinkListAndRemoveSeeEveryProfile() throws {
        let w = try Self.world()
        let mine = w.sandbox.profile, other = uniqueProfile("sinkother")
        let t = try w.issuer.seed(["expires_in": 3600])
        let input = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)"}"#
        #expect(w.run(["--profile", other, "store"], stdin: input).status == 0)
        let first = w.home + "/first.tok", second = w.home + "/second.env"
        #expect(w.run(["sink", "add", "--format", "token", "--path", first]).status == 0)
        #expect(w.run(["--profile", other, "sink", "add", "--format", "env", "--path", second]).status == 0)
        let unnamed = ["CHATGPT_CREDENTIAL_PROFILE": ""]

        let all = w.run(["sink", "list", "--json"], env: unnamed)
        #expect(all.status == 0, "\(all.stderr)")
        let rows = (try? JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [String: Any])?["sinks"] as? [[String: String]] ?? []
        #expect(Set(rows.map { $0["profile"]! + " " + $0["path"]! }) == [mine + " " + first, other + " " + second], "\(all.stdout)")
        let text = w.run(["sink", "list"], env: unnamed)
        #expect(text.status == 0 && text.stdout.contains(other + "  env") && text.stdout.contains(mine + "  token"), "\(text.stdout)")
        let named = w.run(["sink", "list", "--json"])
        #expect(named.status == 0 && named.stdout.contains(first) && !named.stdout.contains(second), "\(named.stdout)")

        // Named: the other profile's sink is not this one's to remove (exit 2), and stays.
        let refused = w.run(["sink", "remove", second])
        #expect(refused.status == 2 && refused.stderr.contains("profile '\(mine)' has no sink at \(second)"), "\(refused.stderr)")
        #expect(FileManager.default.fileExists(atPath: second))
        let removed = w.run(["sink", "remove", second], env: unnamed)
        #expect(removed.status == 0 && !FileManager.default.fileExists(atPath: second), "\(removed.stderr)")
        let none = w.run(["sink", "remove", second], env: unnamed)
        #expect(none.status == 2 && none.stderr.contains("no profile has a sink at \(second)"), "\(none.stderr)")
        #expect(w.run(["--profile", other, "sink", "list", "--json"]).stdout.contains(#""sinks":[]"#))
        #expect(FileManager.default.fileExists(atPath: first))
    }

    @Test func sinkRemoveOfAFileAnotherProgramChangedUnregistersItAndLeavesTheFile() throws {
        let w = try Self.world()
        let path = w.home + "/app.env"
        #expect(w.run(["sink", "add", "--format", "env", "--path", path]).status == 0)
        try "MINE=1\n".write(toFile: path, atomically: true, encoding: .utf8)
        let r = w.run(["sink", "remove", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Self.contents(path) == "MINE=1\n")
        #expect(w.run(["sink", "list", "--json"]).stdout.contains(#""sinks":[]"#))
        #expect(Self.temps(w.home).isEmpty)
    }

    // MARK: sink run

    /// A sink added (for a profile signed in) while `sink run` sleeps is kept within a minute:
    /// it sleeps a minute at a time, never until the next sink it knew of is due (it slept an
    /// hour, and the new sink's token expired meanwhile).
    @Test func sinkRunKeepsASinkAddedWhileItSleeps() throws {
        let w = try Self.world(expiresIn: 3600)
        let run = try LiveRun(w.sandbox, ["sink", "run"])
        defer { kill(run.process.processIdentifier, SIGTERM); _ = run.wait(timeout: 10) }
        // The fact waited for: its first look is over and it sleeps (clock_nanosleep, syscall 230).
        let pid = run.process.processIdentifier
        #expect(try Hostile.waitUntil(20) { (Self.contents("/proc/\(pid)/syscall") ?? "").hasPrefix("230 ") }, "sink run never slept")
        let other = uniqueProfile("sinklate")
        let t = try w.issuer.seed(["expires_in": 500]) // due at once: within max(600 s, a tenth)
        let input = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)"}"#
        #expect(w.run(["--profile", other, "store"], stdin: input).status == 0)
        let path = w.home + "/late.tok"
        #expect(w.run(["--profile", other, "sink", "add", "--format", "token", "--path", path]).status == 0)
        #expect(run.waitFor("profile '\(other)': refreshed; sinks rewritten", timeout: 90), "\(run.stderr)")
        let token = try #require(Self.accessToken(in: path, format: "token"))
        #expect(token != t.accessToken)
    }

    @Test func sinkRunRefreshesADueTokenOnceAndRewritesTheSinks() throws {
        let w = try Self.world(expiresIn: 500) // within max(600 s, a tenth of its lifetime)
        let path = w.home + "/tok"
        #expect(w.run(["sink", "add", "--format", "token", "--path", path]).status == 0)
        let run = try LiveRun(w.sandbox, ["sink", "run"])
        defer { kill(run.process.processIdentifier, SIGTERM); _ = run.wait(timeout: 10) }
        #expect(run.waitFor("refreshed; sinks rewritten", timeout: 20), "\(run.stderr)")
        #expect(try w.issuer.counter("refresh_requests") == 1)
        let token = try #require(Self.accessToken(in: path, format: "token"))
        #expect(token != w.tokens.accessToken)
        let stored = try #require(try w.sandbox.storedDocument())
        #expect(stored["access_token"] as? String == token)
    }
}
