import Foundation
import Testing
import CLI
@_spi(CredentialOwner) import Stores
import OAuth
import CredentialCore
import SystemRuntime
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Runs `secret-tool search --all service chatgpt-credential profile NAME` on the given bus
/// environment (the test process's own session by default).
private func secretToolSearch(_ profile: String, env: [String: String] = ProcessInfo.processInfo.environment) -> (items: [SecretToolItem], attributes: [String], raw: RunResult) {
    let r = Harness.run("/usr/bin/secret-tool", ["search", "--all", "service", "chatgpt-credential", "profile", profile], env: env, timeout: 20)
    let attributes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("attribute.") }.map(String.init).sorted()
    return (parseSecretToolSearch(r.stdout), attributes, r)
}

private func document(_ token: String) -> [UInt8] {
    Array(#"{"version":1,"access_token":"\#(token)","refresh_token":"r-\#(token)"}"#.utf8)
}

private func elapsedMillis(_ body: () -> Void) -> Int64 {
    let start = Clock.monotonicMillis()
    body()
    return Clock.monotonicMillis() - start
}

@Suite("Secret Service store", .serialized)
struct SecretServiceStoreTests {
    @Test("store, replace, read, list and delete one item per profile",
          .enabled(if: hasSessionBus, "no D-Bus session bus: run under dbus-run-session with an unlocked gnome-keyring (make test does)"))
    func roundTrip() throws {
        let store = try secretServiceStore(ProcessInfo.processInfo.environment, timeout: 10)
        let name = uniqueProfile("ss")
        let profile = try Profile(name)
        defer { _ = try? store.delete(profile) }

        #expect(try store.readBytes(profile) == nil)

        let first = document("a1-\(UInt32.random(in: 0...UInt32.max))")
        try store.write(profile, bytes: first)
        let afterFirst = secretToolSearch(name)
        #expect(afterFirst.raw.status == 0, "secret-tool: \(afterFirst.raw.stderr)")
        try #require(afterFirst.items.count == 1, "items: \(afterFirst.items)")
        #expect(afterFirst.items[0].label == "ChatGPT credential (\(name))")
        #expect(afterFirst.items[0].secret == String(decoding: first, as: UTF8.self))
        #expect(afterFirst.attributes == ["attribute.profile = \(name)", "attribute.service = chatgpt-credential"])
        #expect(try store.readBytes(profile) == first)
        #expect(try store.profiles().contains(name))

        let second = document("a2-\(UInt32.random(in: 0...UInt32.max))")
        try store.write(profile, bytes: second)
        let afterSecond = secretToolSearch(name)
        try #require(afterSecond.items.count == 1, "a second write must replace, not add: \(afterSecond.items)")
        #expect(afterSecond.items[0].path == afterFirst.items[0].path)
        #expect(afterSecond.items[0].secret == String(decoding: second, as: UTF8.self))
        #expect(try store.readBytes(profile) == second)

        #expect(try store.delete(profile) == true)
        #expect(secretToolSearch(name).items.isEmpty)
        #expect(try store.readBytes(profile) == nil)
        #expect(try store.delete(profile) == false)
        #expect(try !store.profiles().contains(name))
    }

    @Test("an item created by someone else (other label) is replaced in place and relabelled",
          .enabled(if: hasSessionBus, "no D-Bus session bus: run under dbus-run-session with an unlocked gnome-keyring (make test does)"))
    func replacesForeignItem() throws {
        let store = try secretServiceStore(ProcessInfo.processInfo.environment, timeout: 10)
        let name = uniqueProfile("ssf")
        let profile = try Profile(name)
        defer { _ = try? store.delete(profile) }
        let created = Harness.run("/usr/bin/secret-tool", ["store", "--label=other", "service", "chatgpt-credential", "profile", name],
                                  env: ProcessInfo.processInfo.environment, stdin: Array("old".utf8), timeout: 20)
        try #require(created.status == 0, "secret-tool store: \(created.stderr)")
        #expect(try store.readBytes(profile) == Array("old".utf8))
        let fresh = document("f-\(UInt32.random(in: 0...UInt32.max))")
        try store.write(profile, bytes: fresh)
        let seen = secretToolSearch(name)
        try #require(seen.items.count == 1, "items: \(seen.items)")
        #expect(seen.items[0].label == "ChatGPT credential (\(name))")
        #expect(seen.items[0].secret == String(decoding: fresh, as: UTF8.self))
    }

    @Test("a locked keyring is reported as locked, never as missing, and nothing is changed")
    func lockedKeyring() throws {
        let sandbox = Sandbox(bus: .none)
        var base = sandbox.env
        base.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        func session(_ n: Int) -> [String: String] {
            var e = base
            e["XDG_RUNTIME_DIR"] = sandbox.root + "/run\(n)" // one gnome-keyring control socket per session
            mkdir(sandbox.root + "/run\(n)", 0o700)
            return e
        }
        let name = "locked-\(UInt32.random(in: 0...UInt32.max))"
        let original = "{\"access_token\":\"kept-\(UInt32.random(in: 0...UInt32.max))\"}"

        // Session 1: create the login keyring (password "pw") and one item in it.
        do {
            let bus = try #require(PrivateBus(env: session(1)), "could not start dbus-daemon")
            let unlock = bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/keyring1.log")
            try #require(unlock.status == 0, "gnome-keyring-daemon --unlock failed")
            let stored = bus.sh("secret-tool store --label='ChatGPT credential (\(name))' service chatgpt-credential profile \(name)", stdin: original)
            try #require(stored.status == 0, "secret-tool store: \(stored.stderr)")
        }

        // Session 2: the same keyring, daemon started but never unlocked.
        do {
            let bus = try #require(PrivateBus(env: session(2)))
            let start = bus.startDaemon("gnome-keyring-daemon --start --components=secrets", log: sandbox.root + "/keyring2.log")
            try #require(start.status == 0, "gnome-keyring-daemon --start failed")

            let probe = runStoreChild("probe", profile: name, env: bus.env)
            #expect(probe.result.hasPrefix("probe locked ") && probe.result.contains("locked"), "\(probe.result) \(probe.raw.stderr.suffix(800))")
            for op in ["read", "write", "delete", "profiles", "lookup"] {
                let child = runStoreChild(op, profile: name, secret: "new", env: bus.env)
                #expect(child.result.hasPrefix("error 5 keyringLocked "), "\(op): \(child.result) \(child.raw.stderr.suffix(800))")
                #expect(child.result.contains("locked") && child.result.contains("gnome-keyring-daemon --replace --unlock"), "\(op): \(child.result)")
            }
            // A profile with no item at all is still "not found" on a locked keyring.
            #expect(runStoreChild("read", profile: uniqueProfile("absent"), env: bus.env).result == "nil")
            #expect(runStoreChild("lookup", profile: uniqueProfile("absent"), env: bus.env).result == "nil")
        }

        // Session 3: unlock again; the item is untouched.
        do {
            let bus = try #require(PrivateBus(env: session(3)))
            let unlock = bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: sandbox.root + "/keyring3.log")
            try #require(unlock.status == 0, "gnome-keyring-daemon --unlock failed")
            let seen = secretToolSearch(name, env: bus.env)
            #expect(seen.items.count == 1, "items: \(seen.items) \(seen.raw.stderr)")
            #expect(seen.items.first?.secret == original)
            #expect(runStoreChild("read", profile: name, env: bus.env).result == "bytes " + original)
            #expect(runStoreChild("lookup", profile: name, env: bus.env).result == "bytes " + original)
            #expect(runStoreChild("probe", profile: name, env: bus.env).result == "probe available")
        }
    }

    @Test("a Secret Service that never answers costs the deadline, not a hang")
    func hangingService() throws {
        let sandbox = Sandbox(bus: .none)
        let bus = try #require(PrivateBus(env: sandbox.env), "could not start dbus-daemon")
        let fixture = Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/hanging_secret_service.py"
        let service = try #require(BackgroundProcess(systemPython, [fixture], env: bus.env), "fixture did not start")
        #expect(service.firstLine == "ready")

        var env = bus.env
        env["CHATGPT_CREDENTIAL_DBUS_TIMEOUT"] = "1"
        for op in ["read", "write", "probe", "lookup"] {
            let child = runStoreChild(op, profile: uniqueProfile("hang"), secret: "x", env: env)
            #expect(!child.raw.timedOut)
            if op == "probe" {
                #expect(child.result.hasPrefix("probe unreachable ") && child.result.contains("did not answer within 1 s"), "\(child.result)")
            } else {
                #expect(child.result.hasPrefix("error 5 storeNotAnswering ") && child.result.contains("did not answer within 1 s"), "\(op): \(child.result)")
            }
            #expect(child.ms >= 900 && child.ms < 1500, "\(op) took \(child.ms) ms with a 1 s deadline")
        }
    }

    /// org.freedesktop.Secret.Error.NoSession (a daemon that never opened this session: restarted)
    /// is known by its D-Bus error name (g_dbus_error_get_remote_error), not by the message's
    /// words: the service is taken as gone, asked once more afresh, then reported unreachable.
    @Test("a service that answers NoSession is gone, not a failed call")
    func noSessionMeansGone() throws {
        let sandbox = Sandbox(bus: .none)
        let bus = try #require(PrivateBus(env: sandbox.env), "could not start dbus-daemon")
        let fixture = Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/hanging_secret_service.py"
        let service = try #require(BackgroundProcess(systemPython, [fixture, "--no-session"], env: bus.env), "fixture did not start")
        #expect(service.firstLine == "ready")
        for op in ["read", "lookup"] {
            let child = runStoreChild(op, profile: uniqueProfile("nosession"), env: bus.env)
            #expect(child.result.hasPrefix("error 5 storeUnavailable the Secret Service cannot be reached: nothing provides it on the session bus "),
                    "\(op): \(child.result)")
            #expect(child.result.contains("org.freedesktop.Secret.Error.NoSession"), "\(op): \(child.result)")
        }
    }

    @Test("a bus with nobody owning org.freedesktop.secrets is unavailable, quickly")
    func noSecretService() throws {
        let sandbox = Sandbox(bus: .none)
        // No activatable services: a bus config without the session service directories.
        let config = sandbox.root + "/bus.conf"
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig><type>session</type><listen>unix:tmpdir=\(sandbox.root)</listen>
        <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try #require(BackgroundProcess("/usr/bin/dbus-daemon", ["--config-file=" + config, "--nofork", "--print-address=1"], env: sandbox.env))
        var env = sandbox.env
        env["DBUS_SESSION_BUS_ADDRESS"] = daemon.firstLine
        let child = runStoreChild("read", profile: uniqueProfile("nobody"), env: env)
        #expect(child.result.hasPrefix("error 5 storeUnavailable the Secret Service cannot be reached: nothing provides it on the session bus \(daemon.firstLine) ("), "\(child.result) \(child.raw.stderr.suffix(800))")
        #expect(child.ms < 1000, "took \(child.ms) ms")
        #expect(runStoreChild("probe", profile: "p", env: env).result.hasPrefix("probe unreachable "))
        #expect(runStoreChild("lookup", profile: "p", env: env).result.hasPrefix("error 5 storeUnavailable "))
    }

    @Test("no session bus at all: unavailable at once, without touching libsecret, naming where it looked")
    func missingBus() throws {
        let sandbox = Sandbox(bus: .none)
        let runtime = sandbox.root + "/run"
        let noUsers = sandbox.root + "/no-run-user"
        // The bus handed in decides, not this process's own environment (which has a bus here).
        #expect(SessionBus(runtimeDirectory: runtime, perUserRuntimeRoot: noUsers).find() == nil)
        #expect(SessionBus(address: "unix:path=/nonexistent").find()?.source == .variable)

        var env = sandbox.env // no DBUS_SESSION_BUS_ADDRESS, no DISPLAY, XDG_RUNTIME_DIR without a bus
        env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        env.removeValue(forKey: "DISPLAY")
        let child = runStoreChild("read", profile: uniqueProfile("nobus"), env: env)
        #expect(child.result.hasPrefix("error 5 storeUnavailable the Secret Service cannot be reached: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, \(runtime)/bus is not a socket of this user, /run/user/\(geteuid())/bus is not a socket of this user)"), "\(child.result)")
        #expect(child.ms < 100, "took \(child.ms) ms")
        #expect(runStoreChild("probe", profile: "p", env: env).result.hasPrefix("probe unreachable the Secret Service cannot be reached: no D-Bus session bus found"))

        // A regular file where the socket would be is no bus either.
        try Data().write(to: URL(fileURLWithPath: runtime + "/bus"))
        #expect(SessionBus(runtimeDirectory: runtime, perUserRuntimeRoot: noUsers).find() == nil)
    }

    @Test("a bus address nothing listens on: the bus did not answer, at once")
    func silentBus() throws {
        let sandbox = Sandbox(bus: .none)
        var env = sandbox.env
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=" + sandbox.root + "/run/no-bus-here"
        let child = runStoreChild("read", profile: uniqueProfile("silent"), env: env)
        #expect(child.result.hasPrefix("error 5 storeUnavailable the Secret Service cannot be reached: the session bus unix:path=\(sandbox.root)/run/no-bus-here did not answer ("), "\(child.result)")
        #expect(child.ms < 1000, "took \(child.ms) ms")
    }
}

/// The Secret Service store as the executable builds it from `env` (`Settings`, `Services.live`):
/// its bus and, unless `timeout` is given, `CHATGPT_CREDENTIAL_DBUS_TIMEOUT`.
func secretServiceStore(_ env: [String: String], timeout: Double? = nil) throws -> SecretServiceStore {
    let settings = try Settings(environment: env)
    return SecretServiceStore(bus: settings.sessionBus, timeout: timeout ?? settings.dbusTimeout)
}

// MARK: - Child process mode

/// What one store operation did in a child test process (`runStoreChild`).
struct ChildOutcome {
    var result: String
    var ms: Int64
    var raw: RunResult
}

/// Runs one SecretServiceStore operation in a fresh process of this test binary, with exactly
/// `env` (its own session bus, timeout override, ...). libsecret and GDBus pick the session bus
/// once per process, so a test that needs a second or third bus needs a second process; no
/// extra target is needed for that. Ops: read, write, delete, profiles, probe.
func runStoreChild(_ op: String, profile: String, secret: String = "", env: [String: String], timeout: Double = 30) -> ChildOutcome {
    var e = env
    e["CCRED_STORE_CHILD"] = op
    e["CCRED_STORE_PROFILE"] = profile
    e["CCRED_STORE_SECRET"] = secret
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let r = Harness.run(exe, ["--testing-library", "swift-testing", "--filter", "storeChild"], env: e, timeout: timeout)
    var result = "no result (exit \(r.status))", ms: Int64 = -1
    for line in r.stdout.split(separator: "\n") {
        if line.hasPrefix("CCRED-RESULT: ") { result = String(line.dropFirst(14)) }
        if line.hasPrefix("CCRED-MS: ") { ms = Int64(line.dropFirst(10)) ?? -1 }
    }
    return ChildOutcome(result: result, ms: ms, raw: r)
}

@Suite("Secret Service store, child process")
struct SecretServiceChild {
    /// Only runs inside `runStoreChild`; in a normal test run it is skipped.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CCRED_STORE_CHILD"] != nil, "runs only as a child process of the Secret Service tests"))
    func storeChild() throws {
        let env = ProcessInfo.processInfo.environment
        let op = env["CCRED_STORE_CHILD"] ?? ""
        let profile = try Profile(env["CCRED_STORE_PROFILE"] ?? "default")
        let store = try secretServiceStore(env)
        var result = ""
        let start = Clock.monotonicMillis()
        do {
            switch op {
            case "read": result = try store.readBytes(profile).map { "bytes " + String(decoding: $0, as: UTF8.self) } ?? "nil"
            case "lookup": // the read-only lookup of a foreign item, here by the profile's attributes
                if let found = try store.lookup(attributes: [("service", SecretServiceStore.serviceName), ("profile", profile.name)]) {
                    result = "bytes " + found.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                } else {
                    result = "nil"
                }
            case "write": try store.write(profile, bytes: Array((env["CCRED_STORE_SECRET"] ?? "").utf8)); result = "done"
            case "delete": result = "deleted \(try store.delete(profile))"
            case "profiles": result = "profiles " + (try store.profiles()).joined(separator: ",")
            case "probe":
                switch SecretServiceStore.probe(bus: store.bus, timeout: store.timeout) {
                case .available: result = "probe available"
                case .locked(let why): result = "probe locked " + why
                case .unavailable(let reason): result = "probe unavailable " + reason
                case .unreachable(let reason): result = "probe unreachable " + reason
                case .volatile(let collection): result = "probe volatile " + collection
                }
            default: result = "unknown op \(op)"
            }
        } catch let error as CredentialError {
            let kind = String(describing: error).prefix { $0 != "(" }
            result = "error \(error.exitCode) \(kind) \(error.message)"
        }
        let ms = Clock.monotonicMillis() - start
        print("CCRED-RESULT: \(result)")
        print("CCRED-MS: \(ms)")
    }
}
