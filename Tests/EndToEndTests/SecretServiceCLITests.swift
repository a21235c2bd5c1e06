import Foundation
import Testing
import CLI
@_spi(CredentialOwner) import Stores
import OAuth
import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// The Secret Service store through the real binary: `store`, `get`, `erase` with
/// `--store secret-service`, and what `get` does when the keyring is locked, absent or hung.
@Suite("Secret Service store through the CLI", .serialized)
struct SecretServiceCLITests {
    static func credential(_ tag: String) -> (json: String, access: String) {
        let access = makeJWT(exp: Clock.now() + 3600, accountId: "acct-\(tag)")
        return (#"{"access_token":"\#(access)","refresh_token":"rt-\#(tag)","id_token":"\#(access)"}"#, access)
    }

    static func secretTool(_ profile: String, env: [String: String]) -> [SecretToolItem] {
        parseSecretToolSearch(Harness.run("/usr/bin/secret-tool", ["search", "--all", "service", "chatgpt-credential", "profile", profile],
                                          env: env, timeout: 20).stdout)
    }

    static func elapsed(_ body: () -> RunResult) -> (RunResult, Int64) {
        let start = Clock.monotonicMillis()
        let r = body()
        return (r, Clock.monotonicMillis() - start)
    }

    @Test("store, get, store again (replaces), erase",
          .enabled(if: hasSessionBus, "no D-Bus session bus: run under scripts/with-keyring (make test does)"))
    func roundTrip() throws {
        let sb = Sandbox(bus: .inherit, store: "secret-service")
        let name = uniqueProfile("cli")
        defer { _ = sb.run(["--profile", name, "erase", "--no-revoke"]) }
        let first = Self.credential("one")
        let stored = sb.run(["--profile", name, "store"], stdin: first.json)
        try #require(stored.status == 0, "\(stored.stderr)")
        var items = Self.secretTool(name, env: sb.env)
        try #require(items.count == 1, "\(items)")
        #expect(items[0].label == "ChatGPT credential (\(name))")
        #expect(items[0].secret.contains(first.access))
        let got = sb.run(["--profile", name, "get"])
        #expect(got.status == 0 && got.stdout == first.access + "\n", "\(got.stderr)")

        let second = Self.credential("two")
        #expect(sb.run(["--profile", name, "store"], stdin: second.json).status == 0)
        items = Self.secretTool(name, env: sb.env)
        #expect(items.count == 1, "\(items)")
        #expect(sb.run(["--profile", name, "get"]).stdout == second.access + "\n")

        let erased = sb.run(["--profile", name, "erase", "--no-revoke"])
        #expect(erased.status == 0, "\(erased.stderr)")
        #expect(Self.secretTool(name, env: sb.env).isEmpty)
        #expect(sb.run(["--profile", name, "get"]).status == 3)
    }

    @Test("a locked keyring: get exits 5 saying so, and the item survives")
    func locked() throws {
        let sandbox = Sandbox(bus: .none)
        var base = sandbox.env
        base.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        func session(_ n: Int) -> [String: String] {
            var e = base
            e["XDG_RUNTIME_DIR"] = sandbox.root + "/run\(n)"
            mkdir(sandbox.root + "/run\(n)", 0o700)
            return e
        }
        let name = uniqueProfile("lockedcli")
        let cred = Self.credential("locked")
        do { // session 1: keyring with password "pw" and our credential in it, stored by the tool itself
            let bus = try #require(PrivateBus(env: session(1)))
            try #require(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/k1.log").status == 0)
            let r = Harness.run(Harness.binary, ["--store", "secret-service", "--profile", name, "store"], env: bus.env, stdin: Array(cred.json.utf8))
            try #require(r.status == 0, "\(r.stderr)")
        }
        do { // session 2: never unlocked
            let bus = try #require(PrivateBus(env: session(2)))
            try #require(bus.startDaemon("gnome-keyring-daemon --start --components=secrets", log: sandbox.root + "/k2.log").status == 0)
            for store in ["secret-service", "auto"] {
                let r = Harness.run(Harness.binary, ["--store", store, "--profile", name, "get"], env: bus.env, timeout: 20)
                #expect(r.status == 5, "\(store): exit \(r.status): \(r.stderr)")
                #expect(r.stdout.isEmpty)
                let lines = r.stderr.split(separator: "\n")
                #expect(lines.count == 1 && lines[0].contains("locked"), "\(store): \(r.stderr)")
            }
            let erase = Harness.run(Harness.binary, ["--store", "secret-service", "--profile", name, "erase", "--no-revoke"], env: bus.env, timeout: 20)
            #expect(erase.status == 5, "erase on a locked keyring: \(erase.status) \(erase.stderr)")
        }
        do { // session 3: unlocked again; the credential is intact
            let bus = try #require(PrivateBus(env: session(3)))
            try #require(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/k3.log").status == 0)
            #expect(Self.secretTool(name, env: bus.env).count == 1)
            let r = Harness.run(Harness.binary, ["--store", "secret-service", "--profile", name, "get"], env: bus.env, timeout: 20)
            #expect(r.status == 0 && r.stdout == cred.access + "\n", "\(r.stderr)")
        }
    }

    @Test("a default collection kept only in memory: auto stores in the file with a notice, --store secret-service warns, status names the collection")
    func volatileDefaultCollection() throws {
        let sandbox = Sandbox(bus: .none)
        var env = sandbox.env
        env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        let bus = try #require(PrivateBus(env: env))
        try #require(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/k.log").status == 0)
        func run(_ args: [String], stdin: String? = nil) -> RunResult {
            Harness.run(Harness.binary, args, env: bus.env, stdin: stdin.map { Array($0.utf8) }, timeout: 20)
        }
        func statusJSON(_ profile: String) throws -> [String: Any] {
            let r = run(["--profile", profile, "status", "--json"])
            try #require(r.status == 0, "status: exit \(r.status): \(r.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        }
        let session = "/org/freedesktop/secrets/collection/session", login = "/org/freedesktop/secrets/collection/login"

        // A durable default (the login keyring): the item goes there, status says so, no notice.
        let durable = uniqueProfile("durable")
        let first = run(["--profile", durable, "store"], stdin: Self.credential("durable").json)
        #expect(first.status == 0 && !first.stderr.contains("notice"), "exit \(first.status): \(first.stderr)")
        #expect(try statusJSON(durable)["collection"] as? String == login)

        // What a headless gnome-keyring does: its default alias names the in-memory collection.
        let alias = bus.sh(systemPython + #" -c "import dbus; dbus.Interface(dbus.SessionBus().get_object('org.freedesktop.secrets', '/org/freedesktop/secrets'), 'org.freedesktop.Secret.Service').SetAlias('default', dbus.ObjectPath('\#(session)'))""#)
        try #require(alias.status == 0, "SetAlias: \(alias.stderr)")

        let name = uniqueProfile("volatile")
        let cred = Self.credential("volatile")
        let auto = run(["--profile", name, "store"], stdin: cred.json)
        #expect(auto.status == 0, "auto store: exit \(auto.status): \(auto.stderr)")
        let notices = auto.stderr.split(separator: "\n").filter { $0.contains("notice") }
        #expect(notices.count == 1 && notices[0].contains("keeps secrets only in memory") && notices[0].contains(session)
                && notices[0].contains("encrypted file"), "\(auto.stderr)")
        #expect(FileManager.default.fileExists(atPath: sandbox.dataDir + "/\(name).age"))
        #expect(Self.secretTool(name, env: bus.env).isEmpty, "nothing may land in the in-memory collection under auto")
        let status = try statusJSON(name)
        #expect(status["store"] as? String == "file" && status["collection"] == nil, "\(status)")
        #expect(run(["--profile", name, "get"]).stdout == cred.access + "\n")
        #expect(run(["--profile", name, "erase", "--no-revoke"]).status == 0)

        // Explicitly asked for: obeyed, with a warning that it will not survive a restart.
        let explicit = run(["--store", "secret-service", "--profile", name, "store"], stdin: cred.json)
        #expect(explicit.status == 0, "exit \(explicit.status): \(explicit.stderr)")
        #expect(explicit.stderr.contains("will not survive a restart of the keyring daemon"), "\(explicit.stderr)")
        #expect(Self.secretTool(name, env: bus.env).count == 1)
        // Asked of the daemon itself: the item is in the in-memory collection.
        let labels = bus.sh(systemPython + #" -c "import dbus; b = dbus.SessionBus(); props = lambda p: dbus.Interface(b.get_object('org.freedesktop.secrets', p), 'org.freedesktop.DBus.Properties'); [print(props(i).Get('org.freedesktop.Secret.Item', 'Label')) for i in props('\#(session)').Get('org.freedesktop.Secret.Collection', 'Items')]""#)
        #expect(labels.stdout.contains("ChatGPT credential (\(name))"), "items of \(session): \(labels.stdout) \(labels.stderr)")
        #expect(try statusJSON(name)["collection"] as? String == session)
        let text = run(["--no-cache", "--profile", name, "status"])
        #expect(text.status == 0 && text.stdout.contains("  store:         keyring \"session\" (Secret Service), in memory only"), "\(text.stdout)\(text.stderr)")
        // A person reads the keyring's name, never a D-Bus object path (issue 29).
        #expect(!text.stdout.contains("/org/freedesktop"), "\(text.stdout)")
        #expect(run(["--store", "secret-service", "--profile", name, "erase", "--no-revoke"]).status == 0)
        #expect(run(["--store", "secret-service", "--profile", durable, "erase", "--no-revoke"]).status == 0)
    }

    @Test("no session bus: secret-service exits 5 at once; auto uses the encrypted file within 1 s")
    func noBus() throws {
        let sb = Sandbox(bus: .none)
        sb.env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        sb.env.removeValue(forKey: "DISPLAY")
        let name = uniqueProfile("nobus")
        let (ss, ssMs) = Self.elapsed { sb.run(["--store", "secret-service", "--profile", name, "get"]) }
        #expect(ss.status == 5, "\(ss.stderr)")
        #expect(ss.stderr.contains("no D-Bus session bus"), "\(ss.stderr)")
        #expect(ssMs < 1000, "took \(ssMs) ms")
        // auto with nothing in the file: exit 3, naming the missing bus and the file, never plainly "not signed in".
        let nothing = sb.run(["--profile", name, "get"])
        #expect(nothing.status == 3, "\(nothing.stderr)")
        #expect(nothing.stderr.hasPrefix("chatgpt-credential: no credential found for profile '\(name)': \(sb.dataDir)/\(name).age does not exist and the Secret Service cannot be reached: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, \(sb.env["XDG_RUNTIME_DIR"]!)/bus is not a socket of this user, "), "\(nothing.stderr)")
        #expect(!nothing.stderr.contains("not signed in"), "\(nothing.stderr)")

        let cred = Self.credential("nobus")
        let stored = sb.run(["--profile", name, "store"], stdin: cred.json) // auto: falls back to the file
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(FileManager.default.fileExists(atPath: sb.dataDir + "/\(name).age"))
        let (got, ms) = Self.elapsed { sb.run(["--profile", name, "get"]) }
        #expect(got.status == 0 && got.stdout == cred.access + "\n", "\(got.stderr)")
        #expect(ms < 1000, "auto fallback took \(ms) ms")
    }

    @Test("a Secret Service that never answers: get gives up after CHATGPT_CREDENTIAL_DBUS_TIMEOUT")
    func hanging() throws {
        let sandbox = Sandbox(bus: .none)
        let bus = try #require(PrivateBus(env: sandbox.env))
        let fixture = Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/hanging_secret_service.py"
        let service = try #require(BackgroundProcess(systemPython, [fixture], env: bus.env))
        #expect(service.firstLine == "ready")
        var env = bus.env
        env["CHATGPT_CREDENTIAL_DBUS_TIMEOUT"] = "1"
        let (r, ms) = Self.elapsed { Harness.run(Harness.binary, ["--store", "secret-service", "get"], env: env, timeout: 20) }
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("did not answer within 1 s"), "\(r.stderr)")
        #expect(ms >= 900 && ms < 2000, "took \(ms) ms")
    }
}
