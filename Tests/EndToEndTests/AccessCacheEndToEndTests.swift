import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The access cache (man page ACCESS CACHE) through the built binary, read back with `keyctl`
/// (keyutils), against the test issuer, real gnome-keyrings and a real seccomp filter.
@Suite(.serialized) struct AccessCacheEndToEndTests {
    static let keyctl = "/usr/bin/keyctl"

    static func tool(_ args: [String], env: [String: String] = ["PATH": "/usr/bin:/bin"]) -> RunResult {
        Harness.run(keyctl, args, env: env)
    }

    /// The entry's serial, found by description in the user keyring; nil when there is none.
    static func serial(_ description: String) -> String? {
        let r = tool(["search", "@u", "user", description])
        guard r.status == 0 else { return nil }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func fileEntry(_ s: Sandbox, _ profile: String? = nil) -> String {
        let profile = profile ?? s.profile
        return "chatgpt-credential:v2:\(profile):file:\(s.dataDir)/\(profile).age"
    }

    /// The entry of a bus: its address normalised as the man page says (here: `guid` dropped;
    /// the test buses' socket paths are already real paths).
    static func busEntry(_ address: String, _ profile: String) -> String {
        let normalised = address.split(separator: ",").filter { !$0.hasPrefix("guid=") }.joined(separator: ",")
        return "chatgpt-credential:v2:\(profile):secret-service:\(normalised)"
    }

    /// A file-store sandbox signed in through `store`, its token expiring in `expiresIn`.
    static func signedIn(expiresIn: Int64 = 3600) throws -> (Sandbox, TestIssuer, TestIssuer.SeededTokens) {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": expiresIn])
        return (s, issuer, t)
    }

    @Test func anEntryHoldsNoRefreshTokenAndOnlyItsPossessorReadsIt() throws {
        let (s, issuer, t) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
        let serial = try #require(Self.serial(Self.fileEntry(s)), "no entry after a get")
        #expect(Self.tool(["rdescribe", serial]).stdout == "user;\(geteuid());\(getegid());001b0000;\(Self.fileEntry(s))\n")
        let payload = Self.tool(["pipe", serial])
        #expect(payload.status == 0)
        #expect(Hostile.contains(payload.stdoutBytes, t.accessToken) && Hostile.contains(payload.stdoutBytes, t.idToken))
        #expect(!Hostile.contains(payload.stdoutBytes, t.refreshToken), "the refresh token is in the key")
        // Another user cannot read it.
        let nobody = Harness.run("/usr/bin/setpriv", Sandbox.asNobody + [Self.keyctl, "pipe", serial], env: ["PATH": "/usr/bin:/bin"])
        #expect(nobody.status != 0 && nobody.stdoutBytes.isEmpty, "uid 65534 read the entry")

        // After a refresh the entry holds the new access token, and still no refresh token.
        #expect(s.run(["get", "--force-refresh"]).status == 0)
        let rotated = try #require(try s.storedDocument())
        let after = Self.tool(["pipe", try #require(Self.serial(Self.fileEntry(s)))])
        #expect(Hostile.contains(after.stdoutBytes, rotated["access_token"] as? String ?? "-"))
        #expect(!Hostile.contains(after.stdoutBytes, rotated["refresh_token"] as? String ?? "-"))
        #expect(!Hostile.contains(after.stdoutBytes, t.refreshToken))
        #expect(try issuer.counter("refresh_success") == 1)
    }

    @Test func aWarmGetTouchesNeitherTheStoreNorItsKey() throws {
        let (s, _, t) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
        // Without its key the file cannot be read; the entry answers all the same.
        #expect(rename(s.identityFile, s.identityFile + ".away") == 0)
        for args in [["get"], ["get", "--account-id"], ["get", "--json"], ["--protocol", "git", "get"]] {
            let r = s.run(args, stdin: args.contains("git") ? "protocol=https\nhost=chatgpt.com\n\n" : nil)
            #expect(r.status == 0 && r.stdout.contains(args == ["get", "--account-id"] ? t.accountId : t.accessToken), "\(args): \(r.stderr)")
        }
        let status = s.run(["status", "--json"])
        #expect(status.status == 0 && status.stdout.contains("\"cached\":true"), "\(status.stdout)")
        #expect(s.run(["--no-cache", "get"]).status == 5) // the store itself cannot answer
        #expect(rename(s.identityFile + ".away", s.identityFile) == 0)
    }

    /// An entry answers only while the file store would pass the checks its read makes before
    /// decrypting (man page ACCESS CACHE): the store's directory, the file, the identity and the
    /// identity's directory. Any of them opened to others: the cached get refuses as the read does.
    @Test(arguments: ["data directory", "encrypted file", "identity", "identity directory"])
    func aStoreTheReadWouldRefuseIsNotAnsweredFromTheCache(_ what: String) throws {
        let (s, _, t) = try Self.signedIn()
        defer { _ = s.run(["erase", "--no-revoke"]) }
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
        #expect(Self.serial(Self.fileEntry(s)) != nil, "no entry after a get")
        let (path, open, mode): (String, mode_t, mode_t) = switch what {
        case "data directory": (s.dataDir, 0o755, 0o700)
        case "encrypted file": (s.dataDir + "/\(s.profile).age", 0o644, 0o600)
        case "identity": (s.identityFile, 0o644, 0o600)
        default: (s.configDir, 0o755, 0o700)
        }
        #expect(chmod(path, open) == 0)
        defer { chmod(path, mode) }
        let read = s.run(["--no-cache", "get"])
        #expect(read.status == 5, "the store's read: \(read.status) \(read.stderr)")
        let cached = s.run(["get"])
        #expect(cached.status == 5 && cached.stdout.isEmpty, "\(what) \(String(open, radix: 8)): served from the cache: \(cached.stdout)")
        #expect(cached.stderr == read.stderr)
    }

    @Test func changesMadeThroughTheToolAreSeenAtOnce() throws {
        let (s, issuer, t) = try Self.signedIn()
        #expect(s.run(["get"]).stdout == t.accessToken + "\n")
        // git reports the cached token rejected: the next get refreshes.
        let rejected = s.run(["--protocol", "git", "erase"], stdin: "protocol=https\nhost=chatgpt.com\npassword=\(t.accessToken)\n\n")
        #expect(rejected.status == 0)
        let refreshed = s.run(["get"])
        #expect(refreshed.status == 0 && refreshed.stdout != t.accessToken + "\n")
        #expect(try issuer.counter("refresh_success") == 1)
        // A forced refresh replaces the entry.
        let forced = s.run(["get", "--force-refresh"])
        #expect(forced.status == 0 && forced.stdout != refreshed.stdout)
        #expect(s.run(["get"]).stdout == forced.stdout)
        // Another account stored: answered at once.
        try issuer.configure(["account_id": "acct-other"])
        let other = try issuer.seed()
        #expect(s.run(["store"], stdin: other.storeJSON).status == 0)
        #expect(s.run(["get", "--account-id"]).stdout == "acct-other\n")
        #expect(s.run(["get"]).stdout == other.accessToken + "\n")
        // Erased: gone at once, and so is the entry.
        #expect(s.run(["erase", "--no-revoke"]).status == 0)
        #expect(s.run(["get"]).status == 3)
        #expect(Self.serial(Self.fileEntry(s)) == nil)
    }

    @Test(arguments: [true, false])
    func withTheCacheOffNoKeyIsMade(byEnvironment: Bool) throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let off = byEnvironment ? [] : ["--no-cache"]
        if byEnvironment { s.env["CHATGPT_CREDENTIAL_CACHE"] = "off" }
        let t = try issuer.seed(["expires_in": 200])
        #expect(s.run(off + ["store"], stdin: t.storeJSON).status == 0)
        let refreshed = s.run(off + ["get"])
        #expect(refreshed.status == 0 && refreshed.stdout != t.accessToken + "\n")
        #expect(s.run(off + ["get"]).stdout == refreshed.stdout)
        #expect(s.run(off + ["status"]).status == 0)
        #expect(Self.serial(Self.fileEntry(s)) == nil)
        #expect(s.run(off + ["erase", "--no-revoke"]).status == 0)
    }

    @Test(.enabled(if: hasSessionBus, "needs the keyring make test provides"))
    func aKeyringItemDeletedBehindItsBackIsSeenWithinTheTTL() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .inherit, store: "secret-service")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        s.env["CHATGPT_CREDENTIAL_CACHE_TTL"] = "2"
        let profile = uniqueProfile("ttl")
        let t = try issuer.seed()
        #expect(s.run(["--profile", profile, "store"], stdin: t.storeJSON).status == 0)
        #expect(s.run(["--profile", profile, "get"]).stdout == t.accessToken + "\n")
        let cleared = Harness.run("/usr/bin/secret-tool", ["clear", "service", "chatgpt-credential", "profile", profile], env: s.env)
        #expect(cleared.status == 0)
        #expect(s.run(["--profile", profile, "get"]).stdout == t.accessToken + "\n") // still cached
        // The fact waited for: the entry's key is gone from the kernel (its 2 s timeout), then get
        // reads the keyring, which no longer holds the item.
        let filled = Date()
        var gone = s.run(["--profile", profile, "get"])
        while gone.status == 0 && Date().timeIntervalSince(filled) < 10 {
            #expect(gone.stdout == t.accessToken + "\n")
            usleep(100_000)
            gone = s.run(["--profile", profile, "get"])
        }
        #expect(gone.status == 3, "\(gone.stderr)")
        #expect(Date().timeIntervalSince(filled) < 4, "seen only after \(Date().timeIntervalSince(filled)) s, TTL 2 s")
    }

    @Test func twoDBusSessionsNeverSeeEachOthersEntries() throws {
        let issuer = try TestIssuer()
        let profile = uniqueProfile("buses")
        var results: [(address: String, token: String, sandbox: Sandbox, bus: PrivateBus)] = []
        for n in 0..<2 {
            let s = Sandbox(bus: .none, store: "secret-service")
            s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
            var env = s.env
            env["XDG_RUNTIME_DIR"] = s.root + "/run"
            let bus = try #require(PrivateBus(env: env))
            #expect(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: s.root + "/keyring\(n).log").status == 0)
            s.env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
            let t = try issuer.seed()
            #expect(s.run(["--profile", profile, "store"], stdin: t.storeJSON).status == 0)
            results.append((bus.address, t.accessToken, s, bus))
        }
        for _ in 0..<2 { // the second round is answered from each session's own entry
            for r in results {
                #expect(r.sandbox.run(["--profile", profile, "get"]).stdout == r.token + "\n")
            }
        }
        let serials = results.map { Self.serial(Self.busEntry($0.address, profile)) }
        #expect(serials.allSatisfy { $0 != nil } && serials[0] != serials[1], "\(serials)")
        for r in results { _ = r.sandbox.run(["--profile", profile, "erase", "--no-revoke"]) }
    }

    @Test(arguments: [1, 38]) // EPERM (Docker's default profile), ENOSYS
    func aKernelThatRefusesKeysIsSkippedSilently(errno code: Int) throws {
        let (s, issuer, t) = try Self.signedIn(expiresIn: 200)
        defer { _ = issuer }
        defer { _ = s.run(["erase", "--no-revoke"]) }
        // A fresh sandbox's entry would not exist yet; make sure none does.
        _ = Self.serial(Self.fileEntry(s)).map { _ = Self.tool(["unlink", $0, "@u"]) }
        let wrapper = Harness.productsDirectory + "/seccomp-exec"
        let get = Harness.run(wrapper, [String(code), Harness.binary, "get"], env: s.env)
        #expect(get.status == 0 && get.stdout != t.accessToken + "\n", "\(get.stderr)") // refreshed, from the store
        #expect(get.stderr.isEmpty, "\(get.stderr)")
        let verbose = Harness.run(wrapper, [String(code), Harness.binary, "-v", "get"], env: s.env)
        #expect(verbose.status == 0 && verbose.stdout == get.stdout)
        #expect(verbose.stderr.contains("access cache:"), "\(verbose.stderr)")
        #expect(Self.serial(Self.fileEntry(s)) == nil, "a key was made although the kernel refused")
    }
}
