import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hostile environments around the file store: unwritable or missing data homes, no HOME, symlinks
/// and files planted where the store writes, another user's directory, stale and odd lock files.
/// Each case must end in one clear line and exit code, with nothing half-written anywhere.
@Suite(.serialized) struct HardeningEnvironmentTests {
    // MARK: data home

    @Test(arguments: ["under-a-file", "proc"])
    func unwritableDataHomeExits5WithNothingWritten(kind: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let t = try issuer.seed()
        let plainFile = s.root + "/a-file"
        #expect(FileManager.default.createFile(atPath: plainFile, contents: Data("untouched".utf8)))
        // ENOTDIR below a regular file; ENOENT/EACCES below /proc/1 (no directory can be made there).
        let dataHome = kind == "under-a-file" ? plainFile + "/data" : "/proc/1/ccred-\(getpid())"
        let before = Hostile.listing(s.root)
        let r = s.run(["store"], stdin: t.storeJSON, env: ["XDG_DATA_HOME": dataHome])
        #expect(r.status == 5, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains(kind == "under-a-file" ? "Not a directory" : "/proc/1"))
        #expect(r.stdout.isEmpty)
        #expect(String(decoding: FileManager.default.contents(atPath: plainFile) ?? Data(), as: UTF8.self) == "untouched")
        #expect(Hostile.listing(s.root) == before)
        #expect(Hostile.listing(s.configDir).isEmpty) // no key minted for a store that cannot be written
        for secret in t.secrets { #expect(!r.stderr.contains(secret)) }
        // login (when this build has it) ends the same way; its last stderr line is the error.
        if Hostile.loginImplemented {
            try issuer.configure(["approve_after": 0, "interval": 0])
            let l = s.run(["login", "--device"], env: ["XDG_DATA_HOME": dataHome], timeout: 60)
            #expect(l.status == 5, "\(l.stderr)")
            let last = l.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(last.contains(kind == "under-a-file" ? "Not a directory" : "/proc/1"), "\(l.stderr)")
            #expect(Hostile.listing(s.root) == before)
            #expect(Hostile.listing(s.configDir).isEmpty)
        }
        // get in the same environment: the same class of error, not "not signed in".
        let g = s.run(["get"], env: ["XDG_DATA_HOME": dataHome])
        #expect(g.status == 5 || g.status == 3, "\(g.stderr)")
        #expect(Hostile.isOneLine(g.stderr))
    }

    /// The data directory is read-only for an unprivileged owner (root ignores mode bits, so the
    /// binary runs as uid 65534): store fails with exit 5 and leaves neither the file nor a temp file.
    @Test(.enabled(if: Hostile.canSwitchUser))
    func readOnlyStoreDirectoryAsUnprivilegedUser() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let t = try issuer.seed()
        mkdir(s.dataDir, 0o500)
        s.giveToNobody()
        let r = Harness.run(Hostile.setpriv, Sandbox.asNobody + [Harness.binary, "store"], env: s.env, stdin: Array(t.storeJSON.utf8))
        #expect(r.status == 5, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("Permission denied"))
        #expect(Hostile.listing(s.dataDir).isEmpty) // no NAME.age, no .NAME.age.tmp-*
        #expect(Hostile.mode(s.dataDir) == 0o500)
    }

    @Test func missingDataHomeIsCreatedPrivate() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let dataHome = s.root + "/new/deeper"
        s.env["XDG_DATA_HOME"] = dataHome
        let t = try s.storeSeeded(issuer)
        for dir in [s.root + "/new", dataHome, dataHome + "/chatgpt-credential"] {
            #expect(Hostile.mode(dir) == 0o700, "\(dir)")
        }
        #expect(Hostile.mode(dataHome + "/chatgpt-credential/\(s.profile).age") == 0o600)
        #expect(Hostile.mode(s.identityFile) == 0o600)
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
    }

    @Test func noHomeAndNoXDGIsAClearError() throws {
        let issuer = try TestIssuer()
        let t = try issuer.seed()
        let env = ["PATH": "/usr/bin:/bin", "CHATGPT_CREDENTIAL_STORE": "file", "CHATGPT_CREDENTIAL_ISSUER": issuer.url,
                   "SWIFT_BACKTRACE": "enable=no"]
        for (args, stdin) in [(["store"], t.storeJSON), (["get"], nil), (["status"], nil), (["erase"], nil)] as [([String], String?)] {
            let r = Harness.run(Harness.binary, args, env: env, stdin: stdin.map { Array($0.utf8) }, timeout: 20)
            #expect(r.status == 5 || r.status == 2, "\(args): \(r.status) \(r.stderr)")
            #expect(Hostile.isOneLine(r.stderr), "\(args): \(r.stderr)")
            #expect(r.stderr.contains("HOME"), "\(args): \(r.stderr)")
            #expect(r.stdout.isEmpty || args == ["status"])
        }
    }

    // MARK: planted files

    @Test(arguments: ["existing-target", "dangling"])
    func symlinkAtTheStorePathIsRefused(kind: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let first = try s.storeSeeded(issuer) // directory and key exist
        _ = first
        let target = s.root + "/elsewhere"
        if kind == "existing-target" {
            #expect(FileManager.default.createFile(atPath: target, contents: Data("victim".utf8)))
            chmod(target, 0o600)
        }
        unlink(s.credentialPath())
        #expect(symlink(target, s.credentialPath()) == 0)
        let t = try issuer.seed()
        let r = s.run(["store"], stdin: t.storeJSON)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr))
        #expect(r.stderr.contains("symbolic link"))
        // The store's own refusal: an access-cache entry from before the tampering would answer for
        // up to its TTL (man page ACCESS CACHE), so this get reads the store.
        let g = s.run(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "off"])
        #expect(g.status == 5)
        #expect(g.stderr.contains("symbolic link"))
        let e = s.run(["erase", "--no-revoke"])
        #expect(e.status == 5)
        // The link is still a link and its target untouched (or still absent).
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: s.credentialPath())) == target)
        if kind == "existing-target" {
            #expect(String(decoding: FileManager.default.contents(atPath: target) ?? Data(), as: UTF8.self) == "victim")
        } else {
            #expect(!FileManager.default.fileExists(atPath: target))
        }
        #expect(Hostile.listing(s.dataDir).filter { $0.contains("tmp") }.isEmpty)
    }

    /// Temp files are created with O_CREAT|O_EXCL|O_NOFOLLOW under a name with a random part, so a
    /// name planted in advance is never written through: strace shows the flags and that two runs
    /// pick different names; symlinks planted at the names a previous run used (and at the usual
    /// guesses) are left alone and nothing lands at their targets.
    @Test(.enabled(if: Hostile.haveStrace))
    func plantedTempNamesAreNotFollowed() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer)
        func tempOpens() throws -> [String] {
            let t = try issuer.seed()
            let trace = s.root + "/trace-\(UUID().uuidString)"
            let r = Harness.run(Hostile.strace, ["-f", "-qq", "-e", "trace=openat", "-o", trace, Harness.binary, "store"],
                                env: s.env, stdin: Array(t.storeJSON.utf8))
            #expect(r.status == 0, "\(r.stderr)")
            defer { unlink(trace) }
            let lines = String(decoding: FileManager.default.contents(atPath: trace) ?? Data(), as: UTF8.self).split(separator: "\n")
            return lines.filter { $0.contains("O_CREAT") && $0.contains(".age") }.map(String.init)
        }
        let first = try tempOpens()
        #expect(first.count == 1, "\(first)")
        for line in first {
            #expect(line.contains("O_EXCL") && line.contains("O_NOFOLLOW"), "\(line)")
        }
        func name(_ line: String) -> String {
            guard let q1 = line.firstIndex(of: "\""), let q2 = line[line.index(after: q1)...].firstIndex(of: "\"") else { return "" }
            return String(line[line.index(after: q1)..<q2])
        }
        // Plant symlinks at the name just used and at the conventional guesses.
        let victim = s.root + "/victim"
        #expect(FileManager.default.createFile(atPath: victim, contents: Data("victim".utf8)))
        var planted = first.map(name)
        planted += ["\(s.profile).age.tmp", ".\(s.profile).age.tmp", "\(s.profile).age~", "\(s.profile).age.new", ".\(s.profile).age.swp"].map { s.dataDir + "/" + $0 }
        for p in planted { #expect(symlink(victim, p) == 0, "\(p)") }
        let second = try tempOpens()
        #expect(second.count == 1)
        #expect(Set(second.map(name)).isDisjoint(with: planted), "\(second)")
        #expect(String(decoding: FileManager.default.contents(atPath: victim) ?? Data(), as: UTF8.self) == "victim")
        for p in planted { #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: p)) == victim) }
        #expect(try s.storedDocument() != nil)
    }

    /// A writer killed between creating its temp file and renaming it leaves `.NAME.age.tmp-PID-*`
    /// behind; the next write removes those of dead PIDs, and never a live writer's or a foreign name.
    @Test func staleTempFilesOfDeadWritersAreSwept() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer)
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.run()
        dead.waitUntilExit()
        let stale = [".\(s.profile).age.tmp-\(dead.processIdentifier)-0a1b2c", ".identity.tmp-\(dead.processIdentifier)-3d4e5f"]
        let kept = [".\(s.profile).age.tmp-\(getpid())-5f6a7b", ".\(s.profile).age.tmp-notapid-1", "\(s.profile).age.tmp-\(dead.processIdentifier)-1"]
        for name in stale + kept {
            let dir = name.hasPrefix(".identity") ? s.configDir : s.dataDir
            #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: Data("age ciphertext".utf8),
                                                   attributes: [.posixPermissions: 0o600]))
        }
        let t = try issuer.seed()
        #expect(s.run(["store"], stdin: t.storeJSON).status == 0)
        #expect(Hostile.listing(s.dataDir) == (["\(s.profile).age", "\(s.profile).lock"] + kept).sorted())
        // The identity's directory is swept only when a key is written; the credential's was.
        #expect(Hostile.listing(s.configDir).contains(stale[1]))
    }

    /// The sweep matches exactly its own temp-name format: storing profile `y` never removes
    /// profile `y.age.tmp-4000000-x`'s file or its in-flight temp file (which starts like a
    /// temp file of `y` whose writer, PID 4000000, is gone). A name starting with `.` or `-`
    /// is no profile at all (exit 2).
    @Test func storingOneProfileNeverSweepsAnotherProfilesFiles() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try #require(kill(4_000_000, 0) != 0 && errno == ESRCH, "PID 4000000 must not exist for this test")
        let other = "y.age.tmp-4000000-x"
        try s.storeSeeded(issuer, profile: other)
        let inFlight = ".\(other).age.tmp-\(getpid())-0a1b2c3d4e5f"
        #expect(FileManager.default.createFile(atPath: s.dataDir + "/" + inFlight, contents: Data("age ciphertext".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let t = try issuer.seed()
        let r = s.run(["--profile", "y", "store"], stdin: t.storeJSON)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Hostile.listing(s.dataDir) == [inFlight, "\(other).age", "\(other).lock", "y.age", "y.lock"].sorted())
        #expect(s.run(["--profile", other, "get"]).status == 0)
        for bad in [".y.age.tmp-4000000-x", "-y", ".hidden"] {
            let refused = s.run(["--profile", bad, "store"], stdin: t.storeJSON)
            #expect(refused.status == 2 && Hostile.isOneLine(refused.stderr) && refused.stderr.contains("starting with a letter or digit"),
                    "\(bad): exit \(refused.status): \(refused.stderr)")
            let fromEnv = s.run(["get"], env: ["CHATGPT_CREDENTIAL_PROFILE": bad])
            #expect(fromEnv.status == 2 && Hostile.isOneLine(fromEnv.stderr), "\(bad) from the environment: \(fromEnv.stderr)")
        }
        #expect(Hostile.listing(s.dataDir) == [inFlight, "\(other).age", "\(other).lock", "y.age", "y.lock"].sorted())
    }

    // MARK: the command line's environment

    /// An empty `CHATGPT_CREDENTIAL_*` variable counts as unset; any other bad value is exit 2.
    @Test func emptyVariablesCountAsUnsetOtherBadValuesExit2() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        // The profile named `default` (not the sandbox's own): an empty PROFILE must mean it.
        let t = try s.storeSeeded(issuer, profile: "default")
        var empty: [String: String] = [:]
        for name in ["PROFILE", "STORE", "NONINTERACTIVE", "DEBUG", "ISSUER", "BACKEND", "CACHE", "CACHE_TTL",
                     "PASSPHRASE_FILE", "BROKER", "DBUS_TIMEOUT", "LOCK_TIMEOUT"] {
            empty["CHATGPT_CREDENTIAL_" + name] = ""
        }
        s.env.removeValue(forKey: "CHATGPT_CREDENTIAL_STORE")
        s.env.removeValue(forKey: "CHATGPT_CREDENTIAL_ISSUER")
        let got = s.run(["get"], env: empty)
        #expect(got.status == 0 && got.stdout == t.accessToken + "\n", "exit \(got.status): \(got.stderr)")
        #expect(got.stderr.isEmpty, "an empty CHATGPT_CREDENTIAL_DEBUG is off: \(got.stderr)")
        let status = s.run(["--no-cache", "status", "--json"], env: empty)
        #expect(status.status == 0 && status.stdout.contains(#""profile":"default","store":"file""#), "\(status.stdout)\(status.stderr)")

        for (name, value, verb) in [("PROFILE", " ", "get"), ("PROFILE", ".x", "get"), ("STORE", "cloud", "get"),
                                    ("CACHE", "maybe", "get"), ("CACHE_TTL", "0", "get"),
                                    ("ISSUER", "http://example.com", "get"), ("BACKEND", "ftp://example.com", "usage")] {
            var env = empty
            env["CHATGPT_CREDENTIAL_" + name] = value
            let r = s.run([verb], env: env)
            #expect(r.status == 2 && r.stdout.isEmpty && Hostile.isOneLine(r.stderr), "\(name)='\(value)': exit \(r.status): \(r.stderr)")
        }
    }

    /// argv comes from the process itself, not from /proc/self/cmdline: in a private mount
    /// namespace with /proc unmounted, `--version`, `get --help`, global options and the git
    /// helper's name still work (before, "missing verb", exit 2).
    @Test(.enabled(if: Self.unshareMount != nil, "needs unshare --mount (root or user namespaces)"))
    func argumentsWithoutProc() throws {
        let s = Sandbox(bus: .none)
        let link = s.root + "/git-credential-chatgpt"
        #expect(symlink(Harness.binary, link) == 0)
        func noProc(_ executable: String, _ args: [String], stdin: String? = nil) -> RunResult {
            let script = #"umount -l /proc && test ! -e /proc/self && exec "$0" "$@""#
            return Harness.run("/usr/bin/unshare", Self.unshareMount! + ["sh", "-c", script, executable] + args,
                               env: s.env, stdin: stdin.map { Array($0.utf8) }, timeout: 20)
        }
        let version = noProc(Harness.binary, ["--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("chatgpt-credential ") && version.stdout.hasSuffix("\n"),
                "exit \(version.status): \(version.stdout)\(version.stderr)")
        let help = noProc(Harness.binary, ["get", "--help"])
        #expect(help.status == 0 && help.stdout.hasPrefix("Usage: chatgpt-credential [GLOBAL OPTIONS] get"), "exit \(help.status): \(help.stderr)")
        let status = noProc(Harness.binary, ["--store", "file", "--profile", "noproc", "status"])
        #expect(status.status == 3 && status.stderr.contains("noproc"), "exit \(status.status): \(status.stderr)")
        let git = noProc(link, ["get"], stdin: "protocol=https\nhost=example.com\n\n")
        #expect(git.status == 0 && git.stdout.isEmpty && git.stderr.isEmpty, "exit \(git.status): \(git.stderr)")
        // The control: the same script refuses to run anything while /proc is still there.
        #expect(Harness.run("/bin/sh", ["-c", "test ! -e /proc/self"], env: s.env).status != 0)
    }

    /// The `unshare` options that give a private mount namespace here, or nil.
    static let unshareMount: [String]? = {
        for options in [["--mount", "--fork"], ["--user", "--map-root-user", "--mount", "--fork"]] {
            let r = Harness.run("/usr/bin/unshare", options + ["sh", "-c", "umount -l /proc && test ! -e /proc/self"],
                                env: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"], timeout: 10)
            if r.status == 0 { return options }
        }
        return nil
    }()

    // MARK: another user, loose modes

    @Test(arguments: ["owner", "mode"])
    func storeDirectoryNotPrivateIsRefused(problem: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer)
        let before = FileManager.default.contents(atPath: s.credentialPath())
        if problem == "owner" {
            #expect(chown(s.dataDir, Hostile.nobody, Hostile.nobody) == 0)
        } else {
            #expect(chmod(s.dataDir, 0o755) == 0)
        }
        let expected = problem == "owner" ? "belongs to another user" : "chmod 700"
        let g = s.run(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "off"]) // the store's refusal, not the access cache's earlier entry
        #expect(g.status == 5, "\(g.stderr)")
        #expect(g.stdout.isEmpty)
        #expect(Hostile.isOneLine(g.stderr) && g.stderr.contains(expected), "\(g.stderr)")
        let fresh = try issuer.seed()
        let st = s.run(["store"], stdin: fresh.storeJSON)
        #expect(st.status == 5, "\(st.stderr)")
        #expect(st.stderr.contains(expected))
        #expect(FileManager.default.contents(atPath: s.credentialPath()) == before) // untouched
        #expect(Hostile.listing(s.dataDir).sorted() == ["\(s.profile).age", "\(s.profile).lock"])
        _ = t
    }

    /// A credential file that belongs to another user is refused even when its mode is 0600
    /// (and the identity likewise): root would otherwise read it, and a normal user could be fed it.
    @Test(arguments: ["credential", "identity"])
    func fileOwnedByAnotherUserIsRefused(which: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer)
        let path = which == "credential" ? s.credentialPath() : s.identityFile
        #expect(chown(path, Hostile.nobody, Hostile.nobody) == 0)
        let g = s.run(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "off"]) // the store's refusal, not the access cache's earlier entry
        #expect(g.status == 5, "\(g.stderr)")
        #expect(g.stdout.isEmpty)
        #expect(g.stderr.contains("belongs to another user"), "\(g.stderr)")
        #expect(Hostile.isOneLine(g.stderr))
    }

    // MARK: lock files

    @Test(arguments: ["empty", "garbage", "loose-mode"])
    func staleLockFileDoesNotBlock(kind: String) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": -10])
        let lock = s.lockFile()
        unlink(lock)
        // Left behind by a process that died: the file exists, nobody holds the flock.
        #expect(FileManager.default.createFile(atPath: lock, contents: Data((kind == "garbage" ? "pid 999999\n" : "").utf8),
                                               attributes: [.posixPermissions: kind == "loose-mode" ? 0o644 : 0o600]))
        let started = Date()
        let r = s.run(["get"], env: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "10"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stdout != t.accessToken + "\n")
        #expect(try issuer.counter("refresh_success") == 1)
        #expect(Hostile.mode(lock) == 0o600)
    }

    @Test func fifoAsLockFileFailsFastAndFreshTokensStillPrint() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": 3600]) // expiring only for --min-ttl 4000
        let lock = s.lockFile()
        unlink(lock)
        #expect(mkfifo(lock, 0o600) == 0)
        let started = Date()
        let r = s.run(["get", "--min-ttl", "4000"], env: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "30"], timeout: 20)
        #expect(!r.timedOut)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.status == 5, "\(r.stderr)")
        #expect(Hostile.isOneLine(r.stderr))
        #expect(r.stderr.contains("not a regular file"))
        #expect(try issuer.counter("refresh_requests") == 0)
        // A token valid beyond the refresh window needs no lock at all.
        let fresh = s.run(["get"], timeout: 20)
        #expect(fresh.status == 0)
        #expect(fresh.stdout == t.accessToken + "\n")
        // A lock path that is a symlink or a directory is refused the same way.
        unlink(lock)
        #expect(symlink(s.root + "/lock-target", lock) == 0)
        let viaLink = s.run(["get", "--min-ttl", "4000"], timeout: 20)
        #expect(viaLink.status == 5, "\(viaLink.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.root + "/lock-target"))
    }
}
