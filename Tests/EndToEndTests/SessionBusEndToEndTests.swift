import Foundation
import Testing
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// Finding the keyring the way the session does, reconnecting to a restarted one, and saying what
/// could not be reached (man page STORES, "Finding the Secret Service" and "Unreachable is never
/// 'not signed in'"; BROKER), through the built binary, a private dbus-daemon and a real
/// gnome-keyring-daemon. The bus-less cases run in a mount namespace of their own with a tmpfs on
/// /run/user, so the real /run/user is never touched.
@Suite(.serialized) struct SessionBusEndToEndTests {
    static let curl = "/usr/bin/curl"
    static let socketActivate = "/usr/bin/systemd-socket-activate"
    static let uid = geteuid()
    static let canIsolate = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: Hostile.unshare)

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// A private session bus with a gnome-keyring-daemon on it whose keyring files live in a
    /// directory of their own. The daemons (and anything D-Bus activates) get that directory in
    /// their environment; the tool runs with the sandbox's and the bus address.
    final class Keyring {
        let bus: PrivateBus
        let sandbox: Sandbox
        let password = "pw"
        private var starts = 0

        init(_ sandbox: Sandbox) throws {
            self.sandbox = sandbox
            var env = sandbox.env
            env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
            for d in ["kdata", "krun"] { mkdir(sandbox.root + "/" + d, 0o700) }
            env["XDG_DATA_HOME"] = sandbox.root + "/kdata"
            env["XDG_RUNTIME_DIR"] = sandbox.root + "/krun"
            guard let bus = PrivateBus(env: env) else { throw Failure(description: "could not start dbus-daemon") }
            self.bus = bus
            try start("--unlock")
            sandbox.env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        }

        /// `printf PASSWORD | gnome-keyring-daemon OPTIONS --unlock --components=secrets`, then
        /// waits until a daemon owns org.freedesktop.secrets.
        func start(_ options: String) throws {
            starts += 1
            let r = bus.startDaemon("gnome-keyring-daemon \(options) --components=secrets", stdin: password,
                                    log: sandbox.root + "/keyring-\(starts).log")
            guard r.status == 0 else { throw Failure(description: "gnome-keyring-daemon \(options): exit \(r.status) \(r.stderr)") }
            guard SessionBusEndToEndTests.waitUntil({ self.ownerPID() != nil }) else { throw Failure(description: "no owner of org.freedesktop.secrets") }
        }

        /// The pid of the process owning org.freedesktop.secrets (asked of the bus; never activates).
        func ownerPID() -> Int32? {
            let r = bus.sh("dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets")
            guard r.status == 0, let last = r.stdout.split(separator: " ").last else { return nil }
            return Int32(last.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        /// Locks the login collection through the Secret Service's own Lock method.
        func lock() throws {
            let r = bus.sh("dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service.Lock array:objpath:/org/freedesktop/secrets/collection/login")
            guard r.status == 0, r.stdout.contains("/org/freedesktop/secrets/collection/login") else {
                throw Failure(description: "Lock: \(r.stdout) \(r.stderr)")
            }
        }

        /// SIGKILL to the daemon, then waits until the bus says nobody owns the name.
        func kill9() throws {
            guard let pid = ownerPID() else { throw Failure(description: "no daemon to kill") }
            kill(pid, SIGKILL)
            guard SessionBusEndToEndTests.waitUntil({ self.ownerPID() == nil }) else { throw Failure(description: "the killed daemon still owns the name") }
        }

        /// The path of the bus's socket (its address is `unix:path=…,guid=…`).
        var socketPath: String? {
            guard bus.address.hasPrefix("unix:path=") else { return nil }
            return String(bus.address.dropFirst(10).split(separator: ",").first ?? "")
        }

        deinit { if let pid = ownerPID() { kill(pid, SIGKILL) } }
    }

    /// Polls `fact` (bounded) until it holds.
    static func waitUntil(within seconds: Double = 10, _ fact: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if fact() { return true }
            usleep(20_000)
        } while Date() < deadline
        return fact()
    }

    /// A sandbox whose profile is signed in in the keyring only (the test issuer's tokens).
    static func signedInKeyring() throws -> (Sandbox, Keyring, TestIssuer, TestIssuer.SeededTokens) {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        let keyring = try Keyring(s)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let tokens = try issuer.seed(["expires_in": 3600])
        let stored = s.run(["--store", "secret-service", "store"], stdin: tokens.storeJSON)
        guard stored.status == 0 else { throw Failure(description: "store: \(stored.stderr)") }
        guard !FileManager.default.fileExists(atPath: s.dataDir + "/\(s.profile).age") else { throw Failure(description: "a file copy exists") }
        return (s, keyring, issuer, tokens)
    }

    // MARK: a keyring replaced or restarted under a running broker

    @Test func aBrokerReachesAReplacedOrRestartedKeyringAndNeverSays401() throws {
        let (s, keyring, _, tokens) = try Self.signedInKeyring()
        let socket = s.root + "/broker.sock"
        // The access cache off: every answer asks the store.
        let broker = try LiveRun(s, ["--no-cache", "serve", "--socket", socket])
        defer { broker.signal(SIGTERM); _ = broker.wait(timeout: 10) }
        try #require(broker.waitFor("broker listening on", timeout: 20), "\(broker.stderr)")
        var seen: [Int32] = []
        func clientGet() -> RunResult {
            let r = s.run(["--broker", "unix:" + socket, "get"], timeout: 20)
            seen.append(r.status)
            return r
        }
        /// Asks until `get` exits 0 (the fact), within 5 s of the change.
        func reachedWithinFiveSeconds() -> Bool {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                let r = clientGet()
                if r.status == 0 { return r.stdout == tokens.accessToken + "\n" }
            }
            return false
        }
        let first = clientGet()
        #expect(first.status == 0 && first.stdout == tokens.accessToken + "\n", "\(first.stderr)")

        try keyring.lock()
        let locked = clientGet()
        #expect(locked.status == 5 && locked.stderr.contains("keyring is locked"), "\(locked.status) \(locked.stderr)")

        // The advice the tool prints for a locked keyring, with the daemon's own XDG directories.
        try keyring.start("--replace --unlock")
        #expect(reachedWithinFiveSeconds(), "after --replace --unlock: \(seen) \(broker.stderr)")

        // Killed, then a fresh daemon started on the same bus (nothing asked in between, so the
        // bus does not activate one from its own environment).
        try keyring.kill9()
        try keyring.start("--unlock")
        #expect(reachedWithinFiveSeconds(), "after a kill and a fresh start: \(seen) \(broker.stderr)")

        #expect(!seen.contains(3), "a client was told to sign in: \(seen)")
        // The audit line follows the answer: wait for one per request (the fact), then read them.
        func tokenLines(_ text: String) -> [Substring] { text.split(separator: "\n").filter { $0.contains(" path=/v1/token ") } }
        #expect(broker.waitUntil(timeout: 10) { tokenLines($0).count >= seen.count }, "\(broker.stderr)")
        let audit = tokenLines(broker.stderr)
        #expect(audit.count == seen.count, "\(broker.stderr)")
        #expect(!audit.contains { $0.contains("status=401") }, "\(audit)")
    }

    // MARK: no bus variable: /run/user/UID/bus

    /// Runs `argv` under `env -i` (only `variables`) in a mount namespace of its own whose
    /// /run/user is a fresh tmpfs; with `bus`, that socket is bound at /run/user/UID/bus in a
    /// 0700 /run/user/UID, as logind would make it.
    static func isolatedArgv(bus: String?, variables: [String: String], _ argv: [String]) -> [String] {
        let script = """
            set -eu
            bus=$1; shift
            mount -t tmpfs -o mode=0755 ccred-run /run/user
            if [ -n "$bus" ]; then
                mkdir -m 700 /run/user/\(uid)
                : > /run/user/\(uid)/bus
                mount --bind "$bus" /run/user/\(uid)/bus
            fi
            exec /usr/bin/env -i "$@"
            """
        return [Hostile.unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", bus ?? ""]
            + variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + argv
    }

    static func isolated(_ s: Sandbox, bus: String?, _ args: [String], variables extra: [String: String] = [:]) -> RunResult {
        let variables = ["HOME": s.env["HOME"]!, "PATH": "/usr/bin:/bin"].merging(extra) { $1 }
        let argv = isolatedArgv(bus: bus, variables: variables, [Harness.binary, "--profile", s.profile] + args)
        return Harness.run(argv[0], Array(argv.dropFirst()), env: s.env, timeout: 60)
    }

    /// `systemd-socket-activate -l SOCKET chatgpt-credential serve` under `env -i HOME PATH`,
    /// isolated as above; it execs the broker on the first connection. Started with posix_spawn
    /// (see BrokerServerEndToEndTests.Activated). Returns it once the socket exists.
    final class IsolatedActivation {
        let spawned: Spawned
        let errPath: String
        init(_ s: Sandbox, bus: String?, socket: String) throws {
            errPath = s.root + "/activate-\(UInt32.random(in: 0...UInt32.max)).err"
            let inner = SessionBusEndToEndTests.isolatedArgv(
                bus: bus, variables: ["HOME": s.env["HOME"]!, "PATH": "/usr/bin:/bin"],
                [SessionBusEndToEndTests.socketActivate, "-l", socket, Harness.binary, "--profile", s.profile, "--no-cache", "serve"])
            let argv = ["/bin/sh", "-c", #"f=$1; shift; exec "$@" >/dev/null 2>"$f""#, "sh", errPath] + inner
            switch Spawned.start(argv, childEnvironment: s.env, quiet: false) {
            case .success(let started): spawned = started
            case .failure(let e): throw e
            }
            var st = stat()
            guard SessionBusEndToEndTests.waitUntil({ lstat(socket, &st) == 0 }) else {
                throw Failure(description: "no socket: \(stderr)")
            }
        }
        var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
        deinit {
            kill(spawned.pid, SIGTERM)
            if !SessionBusEndToEndTests.waitUntil(within: 10, { spawned.poll() != .running }) { kill(spawned.pid, SIGKILL); _ = spawned.poll() }
        }
    }

    /// `curl --unix-socket SOCKET http://localhost/v1/token`: the status and the body.
    static func curlToken(_ socket: String, env: [String: String]) -> (status: Int, body: String) {
        let r = Harness.run(curl, ["-sS", "--max-time", "20", "--unix-socket", socket, "-w", "\n%{http_code}", "http://localhost/v1/token"],
                            env: env, timeout: 30)
        var lines = r.stdout.components(separatedBy: "\n")
        let status = Int(lines.popLast() ?? "") ?? -1
        return (status, lines.joined(separator: "\n"))
    }

    @Test(.enabled(if: SessionBusEndToEndTests.canIsolate, "needs root for a mount namespace"))
    func withoutBusVariablesRunUserBusIsTheKeyring() throws {
        let (s, keyring, _, tokens) = try Self.signedInKeyring()
        let bus = try #require(keyring.socketPath)
        // No DBUS_SESSION_BUS_ADDRESS, no XDG_RUNTIME_DIR: only /run/user/UID/bus says where the bus is.
        let get = Self.isolated(s, bus: bus, ["--no-cache", "get"])
        #expect(get.status == 0 && get.stdout == tokens.accessToken + "\n", "exit \(get.status): \(get.stderr)")
        let status = Self.isolated(s, bus: bus, ["--no-cache", "status", "--json"])
        #expect(status.status == 0 && status.stdout.contains(#""store":"secret-service""#), "\(status.stdout) \(status.stderr)")

        // A broker started the way systemd-socket-activate starts it, with only HOME and PATH.
        let socket = s.root + "/activated.sock"
        let activated = try IsolatedActivation(s, bus: bus, socket: socket)
        let answer = Self.curlToken(socket, env: s.env)
        #expect(answer.status == 200, "\(answer.body) \(activated.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        #expect(object?["access_token"] as? String == tokens.accessToken, "\(answer.body)")
    }

    @Test(.enabled(if: SessionBusEndToEndTests.canIsolate, "needs root for a mount namespace"))
    func noBusAtAllNamesTheMissingBusAndTheFileAndTheBrokerSays503() throws {
        let s = Sandbox(bus: .none)
        let file = s.env["HOME"]! + "/.local/share/chatgpt-credential/\(s.profile).age"
        let expected = "chatgpt-credential: no credential found for profile '\(s.profile)': \(file) does not exist and the Secret Service cannot be reached: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, XDG_RUNTIME_DIR is unset, /run/user/\(Self.uid)/bus is not a socket of this user); if you signed in with a keyring, run this where its session bus is reachable, else sign in here: chatgpt-credential --profile \(s.profile) login; see: chatgpt-credential doctor\n"
        let get = Self.isolated(s, bus: nil, ["get"])
        #expect(get.status == 3, "\(get.stderr)")
        #expect(get.stdout.isEmpty)
        #expect(get.stderr == expected)

        let socket = s.root + "/activated.sock"
        let activated = try IsolatedActivation(s, bus: nil, socket: socket)
        let answer = Self.curlToken(socket, env: s.env)
        #expect(answer.status == 503, "\(answer.body) \(activated.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        #expect(object?["error"] as? String == "store_problem", "\(answer.body)")
        let message = object?["message"] as? String ?? ""
        #expect(message.contains("/run/user/\(Self.uid)/bus is not a socket of this user") && message.contains(file), "\(message)")
        // Client mode: the broker's store problem is exit 5, never "sign in".
        let client = s.run(["--broker", "unix:" + socket, "get"], timeout: 30)
        #expect(client.status == 5, "\(client.stderr)")
        #expect(!client.stderr.contains("sign in where the broker runs"), "\(client.stderr)")
        #expect(activated.stderr.contains("status=503 store_problem"), "\(activated.stderr)")
    }

    @Test(.enabled(if: SessionBusEndToEndTests.canIsolate, "needs root for a mount namespace"))
    func loginWithoutAReachableKeyringWarnsBeforeItStarts() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["interval": 0, "approve_after": 0])
        let s = Sandbox(bus: .none)
        let file = s.env["HOME"]! + "/.local/share/chatgpt-credential/\(s.profile).age"
        let warning = "chatgpt-credential: warning: the Secret Service cannot be reached: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, XDG_RUNTIME_DIR is unset, /run/user/\(Self.uid)/bus is not a socket of this user); this sign-in will be kept in the encrypted file \(file), separate from any sign-in in a keyring this process cannot see"
        let variables = ["CHATGPT_CREDENTIAL_ISSUER": issuer.url]

        // The issuer refuses the device flow: the warning came first, and nothing was created.
        try issuer.configure(["device_disabled": true])
        let refused = Self.isolated(s, bus: nil, ["login", "--device"], variables: variables)
        #expect(refused.status != 0)
        #expect(refused.stderr.split(separator: "\n").first.map(String.init) == warning, "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))

        try issuer.configure(["device_disabled": false])
        let login = Self.isolated(s, bus: nil, ["login", "--device"], variables: variables)
        #expect(login.status == 0, "\(login.stderr)")
        let lines = login.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == warning, "\(login.stderr)")
        let prompt = lines.firstIndex { $0.contains(issuer.url + "/codex/device") }
        #expect(prompt != nil && prompt! > 0, "\(login.stderr)")
        #expect(FileManager.default.fileExists(atPath: file))
        let get = Self.isolated(s, bus: nil, ["get"], variables: variables)
        #expect(get.status == 0 && get.stdout.hasPrefix("eyJ"), "\(get.stderr)")
    }
}
