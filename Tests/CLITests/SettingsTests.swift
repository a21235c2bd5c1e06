import Foundation
import Testing
@testable import CLI
@testable import Credentials
@testable import OAuth
@testable import UsageBackend
@testable import AccessCache
@testable import Broker
@testable import SystemRuntime
@testable import CredentialCore

/// The environment is read once, at the executable's edge (ARCHITECTURE.md, "Rules of thumb"):
/// `Settings(environment:)` puts every variable of the man page's ENVIRONMENT into a typed field,
/// an empty one counting as unset, and refuses what the man page refuses; no other file in
/// Sources/ reads the environment.
@Suite struct SettingsTests {
    static let everything: [String: String] = [
        "CHATGPT_CREDENTIAL_PROFILE": "work", "CHATGPT_CREDENTIAL_STORE": "file",
        "CHATGPT_CREDENTIAL_NONINTERACTIVE": "1", "CHATGPT_CREDENTIAL_DEBUG": "yes",
        "CHATGPT_CREDENTIAL_CACHE": "off", "CHATGPT_CREDENTIAL_CACHE_TTL": "60",
        "CHATGPT_CREDENTIAL_BROKER": "unix:/run/b.sock",
        "CHATGPT_CREDENTIAL_ISSUER": "http://127.0.0.1:5/", "CHATGPT_CREDENTIAL_BACKEND": "http://localhost:6/api",
        "CHATGPT_CREDENTIAL_PASSPHRASE_FILE": "/p/pass", "CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "0.5",
        "CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "7",
        "HOME": "/h", "XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/c", "XDG_RUNTIME_DIR": "/r",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/r/bus", "CODEX_HOME": "/x",
        "SSH_TTY": "/dev/pts/1", "WAYLAND_DISPLAY": "wayland-0", "BROWSER": "firefox:chromium",
        "NO_COLOR": "1", "TERM": "xterm", "LC_CTYPE": "C.UTF-8", "LANG": "C",
        "LISTEN_PID": "42", "LISTEN_FDS": "1", "PATH": "/usr/bin",
    ]

    @Test func eachVariableLandsInItsField() throws {
        let s = try Settings(environment: Self.everything)
        #expect(s.profile == (try Profile("work")))
        #expect(s.store == .file)
        #expect(s.nonInteractive && s.debug)
        #expect(s.cacheEnabled == false && s.cacheTTL == 60)
        #expect(s.broker?.path == "/run/b.sock")
        #expect(try s.issuer.get().baseURL == "http://127.0.0.1:5")
        #expect(try s.backend.get().baseURL == "http://localhost:6/api")
        #expect(s.passphraseFile == "/p/pass")
        #expect(s.dbusTimeout == 0.5 && s.lockTimeout == 7)
        #expect(s.home == "/h" && s.dataHome == "/d" && s.configHome == "/c" && s.runtimeDirectory == "/r")
        #expect(s.paths.dataDirectory == "/d/chatgpt-credential" && s.paths.configDirectory == "/c/chatgpt-credential")
        #expect(s.paths.runtimeBase == "/r")
        #expect(s.sessionBus == SessionBus(address: "unix:path=/r/bus", runtimeDirectory: "/r"))
        #expect(s.codexHome == "/x")
        #expect(s.overSSH && s.hasDisplay)
        #expect(s.browser == "firefox:chromium")
        #expect(s.noColor && s.term == "xterm" && s.locale == "C.UTF-8")
        #expect(s.listenPID == 42 && s.listenFDs == 1)
        // What children inherit is the environment as given, and nothing else.
        #expect(s.childEnvironment == Self.everything)

        // The command line's defaults come from here; flags win.
        let inv = try ArgumentParser.parse(["chatgpt-credential", "status"], settings: s)
        #expect(inv.globals.profile.name == "work" && inv.globals.store == .file)
        #expect(inv.globals.nonInteractive && inv.globals.verbose)
        #expect(inv.globals.cache == AccessCacheSettings(enabled: false, ttl: 60))
        #expect(inv.globals.broker?.path == "/run/b.sock")
        let flagged = try ArgumentParser.parse(["chatgpt-credential", "--profile", "p", "--store", "auto", "status"], settings: s)
        #expect(flagged.globals.profile.name == "p" && flagged.globals.store == .auto)

        // The paths and the bus are the ones the live services hand the stores.
        let services = Services.live(settings: s, console: SilentConsole())
        #expect(services.paths.dataDirectory == "/d/chatgpt-credential")
        #expect(services.lockTimeout == 7)
        #expect(services.settings.sessionBus == s.sessionBus)
    }

    @Test func anEmptyVariableIsUnset() throws {
        var empty: [String: String] = [:]
        for name in Self.everything.keys { empty[name] = "" }
        let s = try Settings(environment: empty)
        #expect(s.profile == nil && s.store == nil && !s.nonInteractive && !s.debug)
        #expect(s.cacheEnabled == nil && s.cacheTTL == nil && s.broker == nil)
        #expect(try s.issuer.get() == .default && s.backend.get() == .default)
        #expect(s.passphraseFile == nil && s.dbusTimeout == nil && s.lockTimeout == nil)
        #expect(s.home == nil && s.dataHome == nil && s.configHome == nil && s.runtimeDirectory == nil && s.busAddress == nil)
        #expect(s.paths.dataDirectory == nil && s.paths.configDirectory == nil && s.paths.runtimeBase == nil)
        #expect(s.codexHome == nil && !s.overSSH && !s.hasDisplay && s.browser == nil)
        #expect(!s.noColor && s.term == nil && s.locale == nil && s.listenPID == nil && s.listenFDs == nil)
        // …and an empty environment is the same as no environment at all.
        let none = try Settings(environment: [:])
        #expect(none.profile == nil && none.cacheTTL == nil && none.lockTimeout == nil && none.sessionBus == SessionBus())
        #expect(try ArgumentParser.parse(["chatgpt-credential", "get"], settings: s).globals.cache == AccessCacheSettings())
    }

    @Test func theFirstLocaleVariableThatIsSetWins() throws {
        #expect(try Settings(environment: ["LC_ALL": "C", "LC_CTYPE": "C.UTF-8", "LANG": "en_US.UTF-8"]).locale == "C")
        #expect(try Settings(environment: ["LC_ALL": "", "LC_CTYPE": "", "LANG": "en_US.UTF-8"]).locale == "en_US.UTF-8")
        #expect(try Settings(environment: ["SSH_CONNECTION": "1 2 3 4"]).overSSH)
        #expect(try Settings(environment: ["DISPLAY": ":0"]).hasDisplay)
        #expect(try !Settings(environment: ["CHATGPT_CREDENTIAL_DEBUG": "Off", "CHATGPT_CREDENTIAL_NONINTERACTIVE": "FALSE"]).debug)
        #expect(try Settings(environment: ["LISTEN_PID": "x", "LISTEN_FDS": "one"]).listenPID == nil)
    }

    /// Bad values of the command line's defaults are usage errors (exit 2) naming the variable,
    /// raised before argv is looked at (so even with a flag given).
    @Test(arguments: [
        ("CHATGPT_CREDENTIAL_PROFILE", ".x", "invalid value '.x' for CHATGPT_CREDENTIAL_PROFILE: use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        ("CHATGPT_CREDENTIAL_STORE", "cloud", "invalid value 'cloud' for CHATGPT_CREDENTIAL_STORE: use auto, secret-service or file"),
        ("CHATGPT_CREDENTIAL_CACHE", "maybe", "invalid value 'maybe' for CHATGPT_CREDENTIAL_CACHE: use on or off"),
        ("CHATGPT_CREDENTIAL_CACHE_TTL", "+5", "invalid value '+5' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from 1 to 3600"),
        ("CHATGPT_CREDENTIAL_BROKER", "tcp:1", "invalid value 'tcp:1' for CHATGPT_CREDENTIAL_BROKER: use unix:/absolute/path/to/broker.sock"),
    ])
    func badDefaultsAreUsageErrors(_ name: String, _ value: String, _ message: String) {
        #expect(throws: CredentialError.usage(message)) { try Settings(environment: [name: value]) }
        #expect(CredentialError.usage(message).exitCode == 2)
    }

    @Test func theFirstBadDefaultIsTheOneReported() {
        // The order the parser always checked them in: profile, store, cache, TTL, broker.
        let all = ["CHATGPT_CREDENTIAL_PROFILE": ".x", "CHATGPT_CREDENTIAL_STORE": "cloud", "CHATGPT_CREDENTIAL_CACHE": "maybe",
                   "CHATGPT_CREDENTIAL_CACHE_TTL": "0", "CHATGPT_CREDENTIAL_BROKER": "tcp:1"]
        var env = all
        for name in ["CHATGPT_CREDENTIAL_PROFILE", "CHATGPT_CREDENTIAL_STORE", "CHATGPT_CREDENTIAL_CACHE",
                     "CHATGPT_CREDENTIAL_CACHE_TTL", "CHATGPT_CREDENTIAL_BROKER"] {
            do {
                _ = try Settings(environment: env)
                Issue.record("no error with \(env)")
            } catch let e as CredentialError {
                #expect(e.message.contains(name), "\(name): \(e.message)")
            } catch {
                Issue.record("\(error)")
            }
            env.removeValue(forKey: name)
        }
    }

    /// A refused issuer or backend is not an error of the settings: it is reported where it
    /// always was (`Runner` before any verb but help and version; `usage`), exit 2.
    @Test func aRefusedIssuerOrBackendWaitsForTheVerbThatNeedsIt() throws {
        let s = try Settings(environment: ["CHATGPT_CREDENTIAL_ISSUER": "http://example.com", "CHATGPT_CREDENTIAL_BACKEND": "ftp://example.com"])
        #expect(throws: CredentialError.usage("CHATGPT_CREDENTIAL_ISSUER='http://example.com' is not allowed: use https://, or http:// only to a loopback address (127.0.0.1, [::1], localhost)")) {
            try s.issuer.get()
        }
        #expect(throws: CredentialError.usage("CHATGPT_CREDENTIAL_BACKEND='ftp://example.com' is not allowed: it must start with https://")) {
            try s.backend.get()
        }
        if case .failure(let e) = s.backend { #expect(e.exitCode == 2 && e.message.contains("CHATGPT_CREDENTIAL_BACKEND='ftp://example.com'")) }
        // Each variable is its own: the issuer's does not leak into the backend's, nor the other way round.
        #expect(try Settings(environment: ["CHATGPT_CREDENTIAL_ISSUER": "http://127.0.0.1:5"]).backend.get() == .default)
        #expect(try Settings(environment: ["CHATGPT_CREDENTIAL_BACKEND": "http://127.0.0.1:5"]).issuer.get() == .default)
    }

    // MARK: the one reader of a number of seconds

    @Test func cacheTTLIsWholeSecondsFromOneToAnHour() {
        let rule = Settings.Seconds.cacheTTL
        #expect(rule.parse("1") == 1 && rule.parse("300") == 300 && rule.parse("3600") == 3600 && rule.parse("0300") == 300)
        for bad in ["", "0", "3601", "-1", "+5", " 5", "5s", "1e3", "1.5", "99999999999999999999999", "٣", "inf"] {
            #expect(rule.parse(bad) == nil, "accepted \(bad)")
        }
    }

    /// A D-Bus timeout it does not accept is ignored (the 3 s or 30 s default), never exit 2.
    @Test func dbusTimeoutIsDecimalSecondsAboveZeroUpToAnHour() throws {
        let rule = Settings.Seconds.dbusTimeout
        #expect(rule.parse("3") == 3 && rule.parse("0.5") == 0.5 && rule.parse("1.25") == 1.25)
        #expect(rule.parse(".5") == 0.5 && rule.parse("5.") == 5 && rule.parse("3600") == 3600)
        for bad in ["", "0", "0.0", "-1", "+1", "1.2.3", "3s", ".", "1e3", "inf", "nan", "3600.5", " 1"] {
            #expect(rule.parse(bad) == nil, "accepted \(bad)")
        }
        #expect(try Settings(environment: ["CHATGPT_CREDENTIAL_DBUS_TIMEOUT": "soon"]).dbusTimeout == nil)
    }

    /// The lock timeout takes any number, clamped to 0…600 (man page: at most 600); NaN is ignored
    /// (the default 60 s).
    @Test func lockTimeoutIsClampedAndNaNIgnored() throws {
        let rule = Settings.Seconds.lockTimeout
        #expect(rule.parse("10") == 10 && rule.parse("0.25") == 0.25 && rule.parse("0") == 0)
        #expect(rule.parse("700") == 600 && rule.parse("inf") == 600 && rule.parse("1e3") == 600)
        #expect(rule.parse("-5") == 0 && rule.parse("-inf") == 0)
        for bad in ["nan", "NaN", "-nan", "", "soon", " 5"] { #expect(rule.parse(bad) == nil, "accepted \(bad)") }
        #expect(try Settings(environment: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "soon"]).lockTimeout == nil)
    }

    // MARK: the edge is the only reader

    static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() } // SettingsTests.swift, CLITests, Tests
        return url.path
    }()

    /// The two files allowed to read the environment: where it is collected and where it is read.
    static let edge: Set<String> = ["Sources/chatgpt-credential/main.swift", "Sources/CLI/Settings.swift"]

    /// What reading a variable looks like in Swift or C: libc's getenv/environ, Foundation's
    /// ProcessInfo, a lookup in a dictionary named env or environment, or such a dictionary
    /// handed in as a parameter.
    static let readers: [(name: String, pattern: String)] = [
        ("getenv", #"\b(secure_)?getenv\s*\("#),
        ("environ", #"\benviron\b"#),
        ("ProcessInfo", #"\bProcessInfo\b"#),
        ("an environment subscript", #"\b(env|environment|environ)\s*\["#),
        ("an environment parameter", #"\b(env|environment)\s*:\s*\[\s*String\s*:\s*String\s*\]"#),
    ]

    /// Every line of `Sources/` outside the edge that reads the environment, as `path:line: what`.
    static func readersOutsideTheEdge(root: String) throws -> [String] {
        let fm = FileManager.default
        let sources = root + "/Sources"
        guard let walker = fm.enumerator(atPath: sources) else { throw CredentialError.failure("cannot list \(sources)") }
        let compiled = try readers.map { ($0.name, try NSRegularExpression(pattern: $0.pattern)) }
        var found: [String] = []
        for case let relative as String in walker where [".swift", ".c", ".h"].contains(where: relative.hasSuffix) {
            let path = "Sources/" + relative
            if edge.contains(path) { continue }
            let text = try String(contentsOfFile: root + "/" + path, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                // Prose may name the environment; code may not read it.
                let trimmed = line.drop { $0 == " " }
                if trimmed.hasPrefix("//") || trimmed.hasPrefix("/*") || trimmed.hasPrefix("*") { continue }
                let code = String(line)
                let range = NSRange(code.startIndex..., in: code)
                for (name, regex) in compiled where regex.firstMatch(in: code, range: range) != nil {
                    found.append("\(path):\(number + 1): \(name)")
                }
            }
        }
        return found.sorted()
    }

    @Test func onlyTheEdgeReadsTheEnvironment() throws {
        let found = try Self.readersOutsideTheEdge(root: Self.repoRoot)
        #expect(found.isEmpty, "the environment is read only in CLI/Settings.swift (ARCHITECTURE.md): \(found.joined(separator: "; "))")
        // The scan sees what it looks for: the edge itself reads the environment.
        let settings = try String(contentsOfFile: Self.repoRoot + "/Sources/CLI/Settings.swift", encoding: .utf8)
        #expect(settings.contains("environment[name]"))
    }

    /// The scan is not vacuous: a copy of the tree with one more reader in it fails it.
    @Test(arguments: [
        "let home = getenv(\"HOME\")",
        "let home = ProcessInfo.processInfo.environment[\"HOME\"]",
        "func f(env: [String: String]) -> String? { env[\"HOME\"] }",
        "var p = environ",
    ])
    func aReaderElsewhereFailsTheScan(_ reader: String) throws {
        let fm = FileManager.default
        let root = NSTemporaryDirectory() + "ccred-edge-\(UUID().uuidString)"
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/Sources/SystemRuntime", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/Sources/CLI", withIntermediateDirectories: true)
        try fm.copyItem(atPath: Self.repoRoot + "/Sources/CLI/Settings.swift", toPath: root + "/Sources/CLI/Settings.swift")
        try "// the environment[x] in a comment is prose\nlet x = 1\n".write(toFile: root + "/Sources/SystemRuntime/Fine.swift", atomically: true, encoding: .utf8)
        #expect(try Self.readersOutsideTheEdge(root: root).isEmpty)
        try (reader + "\n").write(toFile: root + "/Sources/SystemRuntime/Sneaky.swift", atomically: true, encoding: .utf8)
        let found = try Self.readersOutsideTheEdge(root: root)
        #expect(found.contains { $0.hasPrefix("Sources/SystemRuntime/Sneaky.swift:1: ") }, "\(found)")
    }
}
