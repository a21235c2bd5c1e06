import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One lock and one cache identity per user, store and profile, whatever the caller's
/// environment strings (man page FILES, REFRESH "one owner", ACCESS CACHE; issue 19 items 2
/// and 4), through the built binary against the test issuer, the real kernel keyring and the
/// keyring `make test` provides. Each case failed on 0.2.0.
@Suite(.serialized) struct IdentityEndToEndTests {
    typealias World = OwnerEndToEndTests.World
    static let bus = OwnerEndToEndTests.bus

    /// Runs `body(i)` for i in 0..<n at the same time.
    static func together(_ n: Int, _ body: @escaping @Sendable (Int) -> RunResult) -> [RunResult] {
        final class Results: @unchecked Sendable { var items = [RunResult?](repeating: nil, count: 16); let lock = NSLock() }
        let results = Results()
        DispatchQueue.concurrentPerform(iterations: n) { i in
            let r = body(i)
            results.lock.lock(); results.items[i] = r; results.lock.unlock()
        }
        return results.items.prefix(n).map { $0! }
    }

    // MARK: one lock (item 2)

    /// 5 + 5 concurrent `get`s with a refresh due, five with XDG_RUNTIME_DIR set and five with it
    /// unset (cron, su, a container without logind); then five each with two different runtime
    /// directories (a sandbox with its own): one refresh, nothing reused, still signed in.
    @Test(arguments: [("file", "unset"), ("file", "two"), ("secret-service", "unset"), ("secret-service", "two")])
    func tenGetsWithDifferentRuntimeDirectoriesRefreshOnce(store: String, runtime: String) throws {
        guard store == "file" || Self.bus else { return }
        let w = try World(expiresIn: 100, store: store) // within the 300 s margin: every get refreshes
        try w.issuer.configure(["refresh_delay": 1]) // long enough for all ten to meet
        let base = w.sandbox.env
        mkdir(w.sandbox.root + "/run2", 0o700)
        let results = Self.together(10) { [profile = w.profile, root = w.sandbox.root] i in
            var e = base
            if i % 2 == 1 {
                if runtime == "unset" { e.removeValue(forKey: "XDG_RUNTIME_DIR") } else { e["XDG_RUNTIME_DIR"] = root + "/run2" }
            }
            return Harness.run(Harness.binary, ["--profile", profile, "--store", store, "get"], env: e, timeout: 60)
        }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map { "\($0.status) \($0.stderr)" })")
        #expect(Set(results.map(\.stdout)).count == 1, "all print the one new token")
        #expect(results[0].stdout != w.tokens.accessToken + "\n")
        #expect(try w.counter("refresh_requests") == 1)
        #expect(try w.counter("refresh_reused") == 0)
        // Still signed in: the rotation was kept, and the stored refresh token is the live one.
        try w.issuer.configure(["refresh_delay": 0])
        let again = w.run(["get", "--force-refresh"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try w.counter("refresh_reused") == 0)
        #expect(try w.counter("refresh_success") == 2)
    }

    // MARK: the lock directory's checks (item 2)

    /// Runs the binary in a mount namespace of its own, with a fresh tmpfs on /run/user and on
    /// /tmp (the sandbox, and the binary's directory when it lives under /tmp — a checkout there —
    /// bound back at their own paths), after `setup` (shell, as root) has shaped them; then
    /// `after` (shell) reports on stderr. The real /run/user and /tmp are not touched.
    static func isolated(_ s: Sandbox, setup: String, after: String = "", _ args: [String]) -> RunResult {
        let script = """
            set -eu
            root=$1; setup=$2; after=$3; shift 3
            bin=$(dirname "$1")
            mount -t tmpfs -o mode=0755 ccred-run /run/user
            mkdir /run/user/.sandbox && mount --bind "$root" /run/user/.sandbox
            case $bin in /tmp/*) mkdir /run/user/.bin && mount --bind "$bin" /run/user/.bin ;; esac
            mount -t tmpfs -o mode=1777 ccred-tmp /tmp
            mkdir -p "$root" && mount --bind /run/user/.sandbox "$root"
            case $bin in /tmp/*) mkdir -p "$bin" && mount --bind /run/user/.bin "$bin" ;; esac
            umask 022
            sh -euc "$setup"
            set +e
            "$@"
            rc=$?
            sh -euc "$after" >&2
            exit $rc
            """
        return Harness.run(Hostile.unshare, ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
                                             s.root, setup, after, Harness.binary] + args, env: s.env, timeout: 60)
    }

    static let uid = geteuid()
    static let canIsolate = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: Hostile.unshare)

    /// Where the lock goes, and that a place nobody else can write is created 0700 and used.
    @Test(.enabled(if: IdentityEndToEndTests.canIsolate, "needs root for a mount namespace"),
          arguments: [
            // logind's directory present: the lock lives under it.
            ("mkdir -m 700 /run/user/\(uid)", "/run/user/\(uid)/chatgpt-credential"),
            // none: /tmp/chatgpt-credential-UID, created 0700 (tmux's model).
            (":", "/tmp/chatgpt-credential-\(uid)"),
            // /run/user/UID that others may write, or a symlink, is not logind's: /tmp is used.
            ("mkdir -m 777 /run/user/\(uid)", "/tmp/chatgpt-credential-\(uid)"),
            ("mkdir -m 700 /run/user/real && ln -s real /run/user/\(uid)", "/tmp/chatgpt-credential-\(uid)"),
          ])
    func theLockLivesInTheUsersPlace(setup: String, expected: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": -10]) // a refresh is due: the lock is taken
        s.env.removeValue(forKey: "XDG_RUNTIME_DIR")
        let r = Self.isolated(s, setup: setup, after: "stat -c '%a %u %F' \(expected) \(expected)/\(s.profile).lock", ["get"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("eyJ") && r.stdout != t.accessToken + "\n")
        #expect(r.stderr.contains("700 \(Self.uid) directory\n600 \(Self.uid) regular empty file"), "\(r.stderr)")
        #expect(try issuer.counter("refresh_success") == 1)
    }

    /// A lock directory that is not this user's private directory is refused with exit 5 and one
    /// line, and left exactly as it was: never followed, chmod'ed or chown'ed.
    @Test(.enabled(if: IdentityEndToEndTests.canIsolate, "needs root for a mount namespace and chown"),
          arguments: [
            ("tmp-foreign", "mkdir -m 700 /tmp/chatgpt-credential-\(uid) && chown 65534:65534 /tmp/chatgpt-credential-\(uid)",
             "/tmp/chatgpt-credential-\(uid)", "700 65534 directory"),
            ("tmp-group-writable", "mkdir -m 770 /tmp/chatgpt-credential-\(uid)", "/tmp/chatgpt-credential-\(uid)", "770 0 directory"),
            ("tmp-symlink", "mkdir -m 700 /tmp/elsewhere && ln -s /tmp/elsewhere /tmp/chatgpt-credential-\(uid)",
             "/tmp/chatgpt-credential-\(uid)", "777 0 symbolic link"),
            ("tmp-file", "touch /tmp/chatgpt-credential-\(uid)", "/tmp/chatgpt-credential-\(uid)", "644 0 regular empty file"),
            ("run-foreign", "mkdir -m 700 /run/user/\(uid) /run/user/\(uid)/chatgpt-credential && chown 65534 /run/user/\(uid)/chatgpt-credential",
             "/run/user/\(uid)/chatgpt-credential", "700 65534 directory"),
            ("run-other-readable", "mkdir -m 700 /run/user/\(uid) && mkdir -m 755 /run/user/\(uid)/chatgpt-credential",
             "/run/user/\(uid)/chatgpt-credential", "755 0 directory"),
            ("run-symlink", "mkdir -m 700 /run/user/\(uid) /run/user/\(uid)/elsewhere && ln -s elsewhere /run/user/\(uid)/chatgpt-credential",
             "/run/user/\(uid)/chatgpt-credential", "777 0 symbolic link"),
          ])
    func aLockDirectoryThatIsNotPrivateIsRefused(name: String, setup: String, dir: String, unchanged: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer, ["expires_in": -10])
        let before = try s.storedDocument()
        let after = "stat -c '%a %u %F' \(dir); ls -A /tmp/elsewhere /run/user/\(Self.uid)/elsewhere 2>/dev/null | grep -c lock || true"
        for args in [["get"], ["erase", "--no-revoke"]] {
            let r = Self.isolated(s, setup: setup, after: after, args)
            #expect(r.status == 5, "\(name) \(args): \(r.status) \(r.stderr)")
            #expect(r.stdout.isEmpty)
            let lines = r.stderr.split(separator: "\n").map(String.init)
            #expect(lines.count == 3 && lines[0].contains("lock directory \(dir)") && lines[0].contains("refusing"), "\(name): \(r.stderr)")
            #expect(lines.dropFirst().first == unchanged, "\(name): \(r.stderr)") // same mode, owner and type as made
            #expect(lines.last == "0", "\(name): a lock file was made through the symlink")
        }
        #expect(try issuer.counter("refresh_requests") == 0)
        #expect(try s.storedDocument()?["refresh_token"] as? String == before?["refresh_token"] as? String) // nothing erased
    }

    // MARK: one cache identity (item 4)

    static func cacheKeys(_ profile: String) -> [String] {
        let r = Harness.run("/bin/sh", ["-c", "for k in $(keyctl rlist @u); do keyctl rdescribe $k 2>/dev/null; echo; done"],
                            env: ["PATH": "/usr/bin:/bin"])
        return r.stdout.split(separator: "\n").map(String.init).filter { $0.contains(";chatgpt-credential:v2:\(profile):") }
    }

    /// The bus address with its guid and without: one store. `get` through each, `erase` through
    /// one, `get` through the other: exit 3, never the erased token from the cache.
    @Test(.enabled(if: IdentityEndToEndTests.bus, "needs the keyring make test provides"), arguments: [true, false])
    func eraseThroughOneBusSpellingIsSeenThroughTheOther(eraseWithGuid: Bool) throws {
        let w = try World(expiresIn: 3600, store: "secret-service")
        let address = try #require(w.sandbox.env["DBUS_SESSION_BUS_ADDRESS"])
        let bare = address.split(separator: ",").filter { !$0.hasPrefix("guid=") }.joined(separator: ",")
        let withGuid = bare + ",guid=" + (address.split(separator: ",").first { $0.hasPrefix("guid=") }.map { String($0.dropFirst(5)) } ?? "0123456789abcdef0123456789abcdef")
        try #require(bare != withGuid)
        for a in [withGuid, bare] {
            let g = w.run(["get"], env: ["DBUS_SESSION_BUS_ADDRESS": a])
            #expect(g.status == 0 && g.stdout == w.tokens.accessToken + "\n", "\(g.stderr)")
        }
        #expect(Self.cacheKeys(w.profile).count == 1, "one entry for both spellings: \(Self.cacheKeys(w.profile))")
        let verbose = w.run(["-v", "get"], env: ["DBUS_SESSION_BUS_ADDRESS": eraseWithGuid ? bare : withGuid])
        #expect(verbose.stderr.contains("answered from the access cache"), "\(verbose.stderr)")
        let erase = w.run(["erase", "--no-revoke"], env: ["DBUS_SESSION_BUS_ADDRESS": eraseWithGuid ? withGuid : bare])
        #expect(erase.status == 0, "\(erase.stderr)")
        let after = w.run(["get"], env: ["DBUS_SESSION_BUS_ADDRESS": eraseWithGuid ? bare : withGuid])
        #expect(after.status == 3, "\(after.status) \(after.stderr)")
        #expect(after.stdout.isEmpty)
        #expect(Self.cacheKeys(w.profile).isEmpty)
    }

    /// XDG_DATA_HOME with a trailing slash, and through a symlink: one file store. Warm the cache
    /// through one spelling, erase through another, get through the first: exit 3.
    @Test(arguments: ["trailing-slash", "symlink", "dot-dot"])
    func eraseThroughOneDataHomeSpellingIsSeenThroughTheOther(spelling: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": 3600])
        let plain = s.env["XDG_DATA_HOME"]!
        let other: String
        switch spelling {
        case "trailing-slash": other = plain + "/"
        case "symlink": other = s.root + "/data-link"; symlink(plain, other)
        default: other = s.root + "/home/../data"
        }
        for (warm, erase) in [(plain, other), (other, plain)] {
            let g = s.run(["get"], env: ["XDG_DATA_HOME": warm])
            #expect(g.status == 0 && g.stdout == t.accessToken + "\n", "\(g.stderr)")
            #expect(s.run(["-v", "get"], env: ["XDG_DATA_HOME": warm]).stderr.contains("answered from the access cache"))
            #expect(s.run(["-v", "get"], env: ["XDG_DATA_HOME": erase]).stderr.contains("answered from the access cache"),
                    "one entry for both spellings")
            #expect(Self.cacheKeys(s.profile).count == 1, "\(Self.cacheKeys(s.profile))")
            #expect(s.run(["erase", "--no-revoke"], env: ["XDG_DATA_HOME": erase]).status == 0)
            let after = s.run(["get"], env: ["XDG_DATA_HOME": warm])
            #expect(after.status == 3, "\(spelling): \(after.status) \(after.stdout) \(after.stderr)")
            #expect(after.stdout.isEmpty)
            #expect(s.run(["store"], stdin: t.storeJSON).status == 0) // again, for the other direction
        }
    }

    /// A relative XDG_DATA_HOME or XDG_CONFIG_HOME is taken from the current directory (man page
    /// ENVIRONMENT; the one owner's "spelled relatively"): the same file, its entry and its key —
    /// never a second store under HOME, nor a new key that re-encrypts the file so that the
    /// absolute spelling can no longer read it (both happened when relative values were ignored).
    /// The warm path leaves such a spelling to the Swift path.
    @Test func relativeXDGDirectoriesAreTakenFromTheCurrentDirectory() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": 3600])
        var env = s.env
        env["XDG_DATA_HOME"] = "data"
        env["XDG_CONFIG_HOME"] = "./config/"
        func run(_ args: [String], stdin: String? = nil, extra: [String: String] = [:]) -> RunResult {
            Harness.run(Harness.binary, args, env: env.merging(extra) { $1 }, stdin: stdin.map { Array($0.utf8) }, directory: s.root)
        }
        let warm = ["CHATGPT_CREDENTIAL_ISSUER": "", "SWIFT_BACKTRACE": WarmPathTests.probe]
        let g = run(["get"], extra: warm)
        #expect(g.status == 0 && g.stdout == t.accessToken + "\n", "\(g.status) \(g.stderr)")
        #expect(g.stderr.contains(WarmPathTests.runtimeStarted), "the warm path answered a relative spelling")
        #expect(run(["-v", "get"]).stderr.contains("answered from the access cache"), "one entry for both spellings")
        #expect(Self.cacheKeys(s.profile).count == 1, "\(Self.cacheKeys(s.profile))")

        let again = try issuer.seed(["expires_in": 3600])
        let stored = run(["store"], stdin: again.storeJSON)
        #expect(stored.status == 0 && stored.stderr.contains(" in " + s.credentialPath()), "\(stored.stderr)")
        let read = s.run(["--no-cache", "get"])
        #expect(read.status == 0 && read.stdout == again.accessToken + "\n", "the absolute spelling cannot read it: \(read.stderr)")
        for stray in ["/home/.local/share/chatgpt-credential", "/home/.config/chatgpt-credential"] {
            #expect(!FileManager.default.fileExists(atPath: s.root + stray), "\(stray) was made")
        }
    }

    /// A change through one store identity removes the profile's entries under every other one
    /// (a store reached under two names the normaliser cannot see as one, such as a bind mount).
    @Test func aChangeRevokesTheProfilesEntriesUnderEveryIdentity() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": 3600])
        #expect(s.run(["get"]).status == 0)
        // A copy of the data home: another store as far as any normaliser can tell.
        let copy = s.root + "/data-copy"
        #expect(Harness.run("/bin/cp", ["-a", s.env["XDG_DATA_HOME"]!, copy], env: ["PATH": "/usr/bin:/bin"]).status == 0)
        #expect(s.run(["get"], env: ["XDG_DATA_HOME": copy]).status == 0)
        #expect(Self.cacheKeys(s.profile).count == 2)
        // A refresh through the first: its entry is replaced, the copy's removed.
        let refreshed = s.run(["get", "--force-refresh"])
        #expect(refreshed.status == 0 && refreshed.stdout != t.accessToken + "\n", "\(refreshed.stderr)")
        var keys = Self.cacheKeys(s.profile)
        #expect(keys.count == 1 && keys[0].contains(s.dataDir + "/"), "\(keys)")
        // And an erase through the copy removes the first's.
        #expect(s.run(["get"], env: ["XDG_DATA_HOME": copy]).status == 0)
        #expect(s.run(["erase", "--no-revoke"], env: ["XDG_DATA_HOME": copy]).status == 0)
        keys = Self.cacheKeys(s.profile)
        #expect(keys.isEmpty, "\(keys)")
        #expect(s.run(["get"]).stdout == refreshed.stdout) // the first store still holds it: read from there
    }

    /// A cached answer keeps the store's checks: the encrypted file (or its key) made readable by
    /// others with a warm cache is refused with exit 5, as a store read refuses it.
    @Test(arguments: ["credential", "identity"])
    func aLooseFileIsRefusedThoughAnEntryIsCached(file: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": 3600])
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
        #expect(s.run(["-v", "get"]).stderr.contains("answered from the access cache"))
        let path = file == "credential" ? s.credentialPath() : s.identityFile
        #expect(chmod(path, 0o644) == 0)
        let r = s.run(["get"])
        #expect(r.status == 5, "\(r.status) \(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr) && r.stderr.contains(path), "\(r.stderr)")
        let off = s.run(["--no-cache", "get"])
        #expect(off.status == 5 && off.stderr == r.stderr, "the same error a store read gives: \(off.stderr)")
        #expect(chmod(path, 0o600) == 0)
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
    }
}
