import Testing
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One lock whatever uid the caller sees (man page FILES, "Locks"; THE ONE OWNER): the host's
/// `get --force-refresh` and one in a user namespace that sees the same encrypted file — through
/// `unshare --map-user`, `bwrap --unshare-user`, or a sandbox that binds the data directory at
/// another path and has a /tmp of its own — make one refresh between them, never a reuse.
/// Before the lock lived beside the file, each took the lock of the uid it saw and the issuer
/// counted a reuse in every round.
enum NamespaceRace {
    static let bwrap = "/usr/bin/bwrap"
    static var canRun: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: Hostile.unshare)
            && FileManager.default.isExecutableFile(atPath: bwrap)
    }

    enum Caller: CaseIterable, CustomStringConvertible {
        /// `unshare --map-user=5000 --map-group=5000`: same paths, another uid.
        case unshare
        /// `bwrap --unshare-user --uid 5000`: same paths, another uid.
        case bwrap
        /// `bwrap --unshare-user --uid 5000` with a /tmp of its own, the data and config
        /// directories bound at other paths (a devcontainer's view).
        case bwrapBoundElsewhere
        var description: String {
            switch self {
            case .unshare: "unshare --map-user=5000"
            case .bwrap: "bwrap --unshare-user --uid 5000"
            case .bwrapBoundElsewhere: "bwrap, data directory bound at another path, own /tmp"
            }
        }
    }

    /// The executable and arguments that run the binary with `args` as `caller` sees it.
    static func command(_ caller: Caller, _ s: Sandbox, _ args: [String]) -> (String, [String], [String: String]) {
        switch caller {
        case .unshare:
            return (Hostile.unshare, ["--map-user=5000", "--map-group=5000", "--", Harness.binary] + args, s.env)
        case .bwrap:
            return (bwrap, ["--dev-bind", "/", "/", "--unshare-user", "--uid", "5000", "--gid", "5000", "--", Harness.binary] + args, s.env)
        case .bwrapBoundElsewhere:
            var env = s.env
            env["XDG_DATA_HOME"] = "/tmp/elsewhere/data"
            env["XDG_CONFIG_HOME"] = "/tmp/elsewhere/config"
            let bin = (Harness.binary as NSString).deletingLastPathComponent
            return (bwrap, ["--dev-bind", "/", "/", "--tmpfs", "/tmp", "--bind", bin, bin,
                            "--bind", s.root + "/data", "/tmp/elsewhere/data",
                            "--bind", s.root + "/config", "/tmp/elsewhere/config",
                            "--unshare-user", "--uid", "5000", "--gid", "5000", "--", Harness.binary] + args, env)
        }
    }

    /// `rounds` races between the host and `caller`, the issuer holding every refresh 1.5 s. The
    /// first racer is started, and the second only once the issuer has its refresh in hand (so
    /// the first holds the lock then): the second must wait for that lock and serve what it saved.
    static func race(_ caller: Caller, rounds: Int) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let seeded = try s.storeSeeded(issuer)
        _ = try issuer.configure(["refresh_delay": 1.5])
        var token = seeded.accessToken
        for round in 0..<rounds {
            let before = try issuer.counter("refresh_requests")
            let (exe, args, env) = command(caller, s, ["get", "--force-refresh"])
            let hostFirst = round % 2 == 0
            let first = hostFirst ? try Background(Harness.binary, ["get", "--force-refresh"], env: s.env)
                                  : try Background(exe, args, env: env)
            #expect(try Hostile.waitUntil(10) { try issuer.counter("refresh_requests") > before }, "round \(round): no refresh reached the issuer")
            let second = hostFirst ? try Background(exe, args, env: env)
                                   : try Background(Harness.binary, ["get", "--force-refresh"], env: s.env)
            let a = first.finish(timeout: 30), b = second.finish(timeout: 30)
            #expect(a.status == 0, "round \(round) (\(caller)), first: \(a.stderr)")
            #expect(b.status == 0, "round \(round) (\(caller)), second: \(b.stderr)")
            #expect(a.stdout == b.stdout, "round \(round) (\(caller)): the two printed different tokens")
            #expect(a.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != token, "round \(round): not refreshed")
            token = a.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try issuer.counter("refresh_requests") == before + 1, "round \(round) (\(caller)): more than one refresh")
            #expect(try issuer.counter("refresh_reused") == 0, "round \(round) (\(caller)): a refresh token was spent twice")
            let stored = try #require(try s.storedDocument())
            #expect(stored["access_token"] as? String == token, "round \(round): the stored document is not what was printed")
        }
        #expect(try issuer.counter("refresh_in_flight_max") == 1)
    }
}

@Suite(.serialized, .enabled(if: NamespaceRace.canRun))
struct UserNamespaceLockTests {
    /// The fast suite's share of the race (the 20-round runs are in LongLoadUserNamespaceRaceTests).
    @Test(arguments: NamespaceRace.Caller.allCases)
    func oneRefreshBetweenTheHostAndANamespace(_ caller: NamespaceRace.Caller) throws {
        try NamespaceRace.race(caller, rounds: 2)
    }

    /// The lock file lives beside the encrypted file, and the namespaced caller took that one.
    @Test func theLockLivesBesideTheFile() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        _ = try s.storeSeeded(issuer)
        let (exe, args, env) = NamespaceRace.command(.bwrapBoundElsewhere, s, ["get", "--force-refresh"])
        let r = Harness.run(exe, args, env: env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Hostile.listing(s.dataDir).contains("\(s.profile).lock"))
        #expect(Hostile.mode(s.dataDir + "/\(s.profile).lock") == 0o600)
    }

    /// A data directory mounted read-only (its lock file not made yet): nothing is changed
    /// unlocked. A `get` whose token is still usable prints it with a notice (exit 0) and spends
    /// nothing; one that needs a token it cannot refresh is exit 5, the issuer never asked.
    @Test func aReadOnlyMountIsNeverChangedUnlocked() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let seeded = try s.storeSeeded(issuer)
        let data = s.root + "/data"
        unlink(s.dataDir + "/\(s.profile).lock") // made by `store`: this mount cannot make it again
        func readOnly(_ args: [String]) -> RunResult {
            let bin = (Harness.binary as NSString).deletingLastPathComponent
            return Harness.run(NamespaceRace.bwrap, ["--dev-bind", "/", "/", "--tmpfs", "/tmp", "--bind", bin, bin,
                                                     "--bind", s.root, s.root, "--ro-bind", data, data,
                                                     "--unshare-user", "--uid", "5000", "--gid", "5000", "--", Harness.binary] + args,
                               env: s.env)
        }
        let usable = readOnly(["get", "--force-refresh"])
        #expect(usable.status == 0, "\(usable.stderr)")
        #expect(usable.stdout == seeded.accessToken + "\n")
        #expect(usable.stderr.contains("notice: not refreshing") && usable.stderr.contains("Read-only file system"), "\(usable.stderr)")
        let tooShort = readOnly(["get", "--min-ttl", "864000"])
        #expect(tooShort.status == 5, "\(tooShort.stderr)")
        #expect(tooShort.stderr.contains("Read-only file system"), "\(tooShort.stderr)")
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    /// A namespaced caller neither reads nor writes the access cache: the kernel keeps a user
    /// keyring per namespace, so a change made on the host could not revoke what it had cached
    /// there. The host erases and stores another sign-in: the namespaced `get` prints the new
    /// token, never the erased one (the old code served the erased token from its entry).
    @Test func aNamespacedCallerLeavesNoCacheEntryAndErasedStaysErased() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let seeded = try s.storeSeeded(issuer)
        // One session keyring for the namespaced runs that links its user keyring, as a login
        // in a long-lived container has (pam_keyinit), so an entry there would be served.
        let script = """
            keyctl new_session >/dev/null && keyctl link @u @s || exit 9
            "$@" get >/dev/null || exit 10
            keyctl search @u user "chatgpt-credential:v2:$PROFILE:file:$FILE" >/dev/null 2>&1 && echo "cached" >&2
            printf 'go\n' > "$READY"
            while [ ! -e "$GO" ]; do sleep 0.05; done
            "$@" get
            """
        let ready = s.root + "/ready", go = s.root + "/go"
        var env = s.env
        env["READY"] = ready
        env["GO"] = go
        env["PROFILE"] = s.profile
        env["FILE"] = s.credentialPath()
        let ns = try Background(Hostile.unshare, ["--map-user=5000", "--map-group=5000", "--", "/bin/sh", "-c", script, "sh", Harness.binary], env: env)
        #expect(Hostile.waitUntil(20) { FileManager.default.fileExists(atPath: ready) })
        #expect(s.run(["erase", "--no-revoke"]).status == 0)
        let again = try issuer.seed()
        #expect(s.run(["store"], stdin: again.storeJSON).status == 0)
        #expect(FileManager.default.createFile(atPath: go, contents: Data()))
        let r = ns.finish(timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == again.accessToken + "\n", "the namespaced get served the erased token: \(r.stdout == seeded.accessToken + "\n")")
        #expect(!r.stderr.contains("cached"), "an access-cache entry was made in the namespace")
    }
}

extension UserNamespaceLockTests {
    /// The other way round: a caller in a user namespace cannot reach the host's user keyring to
    /// revoke its entry, so a cached answer is made only while the encrypted file is the one the
    /// entry was filled from (man page ACCESS CACHE). Another account stored from the namespace
    /// is what the host prints next — its warm path, its Swift path and a broker started before
    /// the change — never the entry of the account it replaced.
    @Test(arguments: [NamespaceRace.Caller.unshare, .bwrapBoundElsewhere])
    func aChangeMadeInANamespaceIsSeenAtOnceOnTheHost(_ caller: NamespaceRace.Caller) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let first = try s.storeSeeded(issuer, ["account_id": "acct-first"])
        let sock = s.root + "/broker.sock"
        let broker = try LiveRun(s, ["serve", "--socket", sock])
        defer { kill(broker.process.processIdentifier, SIGTERM); _ = broker.wait(timeout: 10) }
        #expect(broker.waitFor("broker listening on", timeout: 20), "\(broker.stderr)")
        let viaBroker = { BrokerServerEndToEndTests.World.curl("/v1/token", socket: sock, env: s.env) }
        // Filled, then answered from the entry: by the warm path (the Swift runtime never
        // starts: WarmPathTests), the Swift path (said under -v) and the broker.
        let warm: [String: String] = ["CHATGPT_CREDENTIAL_ISSUER": "", "SWIFT_BACKTRACE": WarmPathTests.probe]
        #expect(s.run(["get"]).stdout == first.accessToken + "\n")
        let warmHit = s.run(["get"], env: warm)
        #expect(warmHit.stdout == first.accessToken + "\n" && !warmHit.stderr.contains(WarmPathTests.runtimeStarted), "\(warmHit.stderr)")
        let cached = s.run(["-v", "get", "--account-id"])
        #expect(cached.stdout == "acct-first\n" && cached.stderr.contains("answered from the access cache"), "\(cached.stderr)")
        #expect(viaBroker().body.contains(first.accessToken))

        let second = try issuer.seed(["account_id": "acct-second"])
        let (exe, args, env) = NamespaceRace.command(caller, s, ["store"])
        let stored = Harness.run(exe, args, env: env, stdin: Array(second.storeJSON.utf8), timeout: 30)
        #expect(stored.status == 0, "\(stored.stderr)")

        #expect(s.run(["get"], env: warm).stdout == second.accessToken + "\n", "the warm path served the replaced account's entry")
        #expect(s.run(["get", "--account-id"]).stdout == "acct-second\n", "the Swift path served the replaced account's entry")
        let answer = viaBroker()
        #expect(answer.status == 200 && answer.body.contains(second.accessToken) && !answer.body.contains(first.accessToken),
                "the broker served the replaced account's entry: \(answer.body)")
        // And the new answers are cached again, for the warm path too.
        #expect(s.run(["-v", "get", "--account-id"]).stderr.contains("answered from the access cache"))
        let warmAgain = s.run(["get"], env: warm)
        #expect(warmAgain.stdout == second.accessToken + "\n" && !warmAgain.stderr.contains(WarmPathTests.runtimeStarted), "\(warmAgain.stderr)")
    }
}

/// The 20-round races of the issue (long: the issuer holds each refresh 1.5 s), in `make test-load`.
@Suite(.serialized, .enabled(if: NamespaceRace.canRun))
struct LongLoadUserNamespaceRaceTests {
    @Test(arguments: NamespaceRace.Caller.allCases)
    func twentyRoundsOneRefreshEach(_ caller: NamespaceRace.Caller) throws {
        try NamespaceRace.race(caller, rounds: 20)
    }
}
