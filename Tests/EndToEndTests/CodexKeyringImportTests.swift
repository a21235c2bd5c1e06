import Foundation
import Testing
@testable import HelperProtocols
#if canImport(Glibc)
import Glibc
#endif

/// `store --from-codex` reading Codex's Secret Service item (service `Codex Auth`, account
/// `cli|` + 16 hex digits of the SHA-256 of the canonical CODEX_HOME), made here with the real
/// `secret-tool` in the throwaway keyring `make test` starts: chosen by Codex's config.toml
/// (`keyring`, `auto`) or by a missing auth.json, stored as imported from Codex, and not revoked
/// by `erase`. Our own copy goes to the file store, so the keyring holds only Codex's item.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil))
struct CodexKeyringImportTests {
    struct World {
        let issuer: TestIssuer
        let sandbox: Sandbox
        /// A CODEX_HOME reached through a symbolic link, so "canonical" matters.
        let codexHome: String
        let canonicalHome: String
        var account: String { "cli|" + Self.sha256Hex(canonicalHome).prefix(16) }

        /// The digest by coreutils' sha256sum, independent of the code under test.
        static func sha256Hex(_ s: String) -> String {
            let r = Harness.run("/usr/bin/sha256sum", [], env: ["PATH": "/usr/bin:/bin"], stdin: Array(s.utf8))
            return String(r.stdout.prefix(64))
        }

        func secretTool(_ args: [String], stdin: String? = nil) -> RunResult {
            Harness.run("/usr/bin/secret-tool", args, env: sandbox.env, stdin: stdin.map { Array($0.utf8) })
        }

        /// Codex's item, as Codex would keep it.
        func storeCodexItem(_ json: String, attribute: String = "account") {
            let r = secretTool(["store", "--label=Codex Auth", "service", "Codex Auth", attribute, account], stdin: json)
            #expect(r.status == 0, "secret-tool store: \(r.stderr)")
        }

        func removeCodexItems() {
            _ = secretTool(["clear", "service", "Codex Auth", "account", account])
            _ = secretTool(["clear", "service", "Codex Auth", "username", account])
        }

        func config(_ text: String) {
            #expect(FileManager.default.createFile(atPath: codexHome + "/config.toml", contents: Data(text.utf8)))
        }

        func authFile(_ json: String) {
            #expect(FileManager.default.createFile(atPath: codexHome + "/auth.json", contents: Data(json.utf8),
                                                   attributes: [.posixPermissions: 0o600]))
        }

        func importFromCodex() -> RunResult {
            sandbox.runHelper(["store", "--from-codex"], env: ["CODEX_HOME": codexHome])
        }
    }

    func world() throws -> World {
        let issuer = try TestIssuer()
        let s = Sandbox()
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_STORE"] = "file"
        let real = s.root + "/codex-real"
        mkdir(real, 0o700)
        symlink(real, s.root + "/codex-link")
        return World(issuer: issuer, sandbox: s, codexHome: s.root + "/codex-link", canonicalHome: real)
    }

    /// What was stored is the item's credential, marked as imported from Codex.
    func expectImported(_ w: World, _ t: TestIssuer.SeededTokens, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(w.sandbox.runHelper(["get"]).stdout == t.accessToken + "\n", sourceLocation: sourceLocation)
        #expect(w.sandbox.runHelper(["get", "--account-id"]).stdout == t.accountId + "\n", sourceLocation: sourceLocation)
        let doc = try #require(try w.sandbox.storedDocument(), sourceLocation: sourceLocation)
        #expect(doc["imported_from"] as? String == "codex", "\(doc.keys)", sourceLocation: sourceLocation)
    }

    @Test func configSayingKeyringImportsTheItemAndEraseDoesNotRevokeIt() throws {
        let w = try world()
        defer { w.removeCodexItems() }
        let inKeyring = try w.issuer.seed(["account_id": "acct-codex-keyring"])
        let inFile = try w.issuer.seed(["account_id": "acct-codex-file"])
        // Made once: the JSON carries a last refresh read from the clock.
        let item = inKeyring.codexAuthJSON
        w.storeCodexItem(item)
        w.authFile(inFile.codexAuthJSON) // stale: Codex said keyring, so the file is not read
        w.config("# Codex\nmodel = \"gpt-5\"\ncli_auth_credentials_store = \"keyring\"  # keep it in the keyring\n\n[profiles.x]\ncli_auth_credentials_store = \"file\"\n")

        let r = w.importFromCodex()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("reading Codex's credential from the Secret Service item 'Codex Auth', account '\(w.account)'"), "\(r.stderr)")
        #expect(r.stderr.contains(CodexAuthFile.sharedRefreshTokenWarning))
        for secret in inKeyring.secrets { #expect(!r.allOutput.contains(secret)) }
        try expectImported(w, inKeyring)
        // Read only: Codex's item is still there, unchanged.
        #expect(w.secretTool(["lookup", "service", "Codex Auth", "account", w.account]).stdout == item)

        let erase = w.sandbox.runHelper(["erase"])
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(erase.stderr.contains("not revoked") && erase.stderr.contains("codex logout"), "\(erase.stderr)")
        #expect(try w.issuer.counter("revocations") == 0)
        #expect(w.sandbox.runHelper(["get"]).status == 3)
    }

    @Test func noAuthJSONFallsBackToTheItemAndSaysSo() throws {
        let w = try world()
        defer { w.removeCodexItems() }
        let t = try w.issuer.seed(["account_id": "acct-codex-nofile"])
        w.storeCodexItem(t.codexAuthJSON)
        // No config.toml, no auth.json.
        let r = w.importFromCodex()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("from the Secret Service item 'Codex Auth', account '\(w.account)'"), "\(r.stderr)")
        try expectImported(w, t)
        #expect(w.sandbox.runHelper(["erase"]).status == 0)
        #expect(try w.issuer.counter("revocations") == 0)
    }

    /// The item under the Rust keyring crate's attribute name (`username`) is found too.
    @Test func itemWithAUsernameAttributeIsFoundToo() throws {
        let w = try world()
        defer { w.removeCodexItems() }
        let t = try w.issuer.seed(["account_id": "acct-codex-username"])
        w.storeCodexItem(t.codexAuthJSON, attribute: "username")
        w.config("cli_auth_credentials_store = 'keyring'\n")
        let r = w.importFromCodex()
        #expect(r.status == 0, "\(r.stderr)")
        try expectImported(w, t)
    }

    @Test func autoPrefersTheItemElseTheFile() throws {
        let w = try world()
        defer { w.removeCodexItems() }
        let inKeyring = try w.issuer.seed(["account_id": "acct-auto-keyring"])
        let inFile = try w.issuer.seed(["account_id": "acct-auto-file"])
        w.authFile(inFile.codexAuthJSON)
        w.config("cli_auth_credentials_store = \"auto\"\n")

        // No item yet: the file.
        let fromFile = w.importFromCodex()
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(fromFile.stderr.contains("reading Codex's credential from \(w.codexHome)/auth.json"), "\(fromFile.stderr)")
        try expectImported(w, inFile)

        w.storeCodexItem(inKeyring.codexAuthJSON)
        let fromItem = w.importFromCodex()
        #expect(fromItem.status == 0, "\(fromItem.stderr)")
        #expect(fromItem.stderr.contains("from the Secret Service item 'Codex Auth'"), "\(fromItem.stderr)")
        try expectImported(w, inKeyring)
    }

    @Test func keyringSaidButNoItemIsExit2NamingTheItem() throws {
        let w = try world()
        let t = try w.issuer.seed()
        w.authFile(t.codexAuthJSON)
        w.config("cli_auth_credentials_store = \"keyring\"\n")
        let r = w.importFromCodex()
        #expect(r.status == 2, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("there is no Secret Service item 'Codex Auth'"), "\(r.stderr)")
        #expect(r.stderr.contains("'Codex Auth', account '\(w.account)'") && r.stderr.contains("codex login"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.sandbox.credentialFile))
    }

    /// Neither a file nor an item: the missing auth.json is the error, as before.
    @Test func neitherFileNorItemIsTheFileError() throws {
        let w = try world()
        let r = w.importFromCodex()
        #expect(r.status == 2, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains(w.codexHome + "/auth.json"), "\(r.stderr)")
    }

    /// An explicit PATH is read as given: no config, no keyring.
    @Test func explicitPathIgnoresTheKeyring() throws {
        let w = try world()
        defer { w.removeCodexItems() }
        let inKeyring = try w.issuer.seed(["account_id": "acct-path-keyring"])
        let inFile = try w.issuer.seed(["account_id": "acct-path-file"])
        w.storeCodexItem(inKeyring.codexAuthJSON)
        w.config("cli_auth_credentials_store = \"keyring\"\n")
        let path = w.sandbox.root + "/given.json"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(inFile.codexAuthJSON.utf8)))
        let r = w.sandbox.runHelper(["store", "--from-codex", path], env: ["CODEX_HOME": w.codexHome])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("reading Codex's credential from \(path)"), "\(r.stderr)")
        try expectImported(w, inFile)
    }
}

/// A keyring that is locked, or a Secret Service that does not answer, may hold Codex's item:
/// exit 5 saying so, never "no item" and never a silent fallback to something else.
@Suite(.serialized) struct CodexKeyringUnreadableTests {
    @Test func lockedKeyringIsExit5NotMissing() throws {
        let s = Sandbox(bus: .none, store: "file")
        let codexHome = s.root + "/codex"
        mkdir(codexHome, 0o700)
        let account = "cli|" + CodexKeyringImportTests.World.sha256Hex(codexHome).prefix(16)
        var base = s.env
        base["XDG_RUNTIME_DIR"] = s.root + "/run1"
        mkdir(s.root + "/run1", 0o700)
        do { // create the keyring and Codex's item, then come back without unlocking
            let bus = try #require(PrivateBus(env: base))
            #expect(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: s.root + "/k1.log").status == 0)
            #expect(bus.sh("secret-tool store --label=x service 'Codex Auth' account '\(account)'", stdin: "{}").status == 0)
        }
        base["XDG_RUNTIME_DIR"] = s.root + "/run2"
        mkdir(s.root + "/run2", 0o700)
        let bus = try #require(PrivateBus(env: base))
        #expect(bus.startDaemon("gnome-keyring-daemon --start --components=secrets", log: s.root + "/k2.log").status == 0)
        var env = bus.env
        env["CODEX_HOME"] = codexHome

        // No auth.json, no config: the item may be behind the lock.
        let r = Harness.run(Harness.binary, ["store", "--from-codex"], env: env)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr) && r.stderr.contains("locked") && r.stderr.contains(codexHome + "/auth.json"), "\(r.stderr)")
        // Codex said keyring: the same.
        #expect(FileManager.default.createFile(atPath: codexHome + "/config.toml", contents: Data("cli_auth_credentials_store = \"keyring\"\n".utf8)))
        let k = Harness.run(Harness.binary, ["store", "--from-codex"], env: env)
        #expect(k.status == 5 && k.stderr.contains("locked"), "\(k.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.credentialFile))
    }

    @Test func silentSecretServiceIsExit5WithinTheDeadline() throws {
        let s = Sandbox(bus: .none, store: "file")
        let bus = try #require(PrivateBus(env: s.env))
        let fixture = Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/hanging_secret_service.py"
        let service = try #require(BackgroundProcess(systemPython, [fixture], env: bus.env))
        #expect(service.firstLine == "ready")
        var env = bus.env
        env["CHATGPT_CREDENTIAL_DBUS_TIMEOUT"] = "1"
        env["CODEX_HOME"] = s.root + "/codex"
        mkdir(s.root + "/codex", 0o700)
        let started = Date()
        let r = Harness.run(Harness.binary, ["store", "--from-codex"], env: env)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("did not answer within 1 s"), "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
    }
}
