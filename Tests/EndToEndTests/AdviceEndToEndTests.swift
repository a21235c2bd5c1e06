import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Advice that works when followed (issue 23): each message that suggests a command is
/// triggered through the built binary, the suggested command is run as printed, and what the
/// message promised is checked. Also: `status` says the same from the store and from the
/// access cache, and notices are one short sentence without nested parentheses.
@Suite(.serialized) struct AdviceEndToEndTests {
    /// The command a message suggests after `marker` (up to the end of the line, or the closing
    /// quote when the suggestion is quoted), as arguments for the binary: "chatgpt-credential"
    /// dropped. nil when the marker is not there.
    static func suggested(after marker: String, in stderr: String) -> [String]? {
        guard let r = stderr.range(of: marker) else { return nil }
        var tail = stderr[r.upperBound...].prefix { $0 != "\n" }
        if let quote = tail.firstIndex(of: "'") { tail = tail[..<quote] }
        let words = tail.split(separator: " ").map(String.init)
        guard words.first == "chatgpt-credential" else { return nil }
        return Array(words.dropFirst())
    }

    /// The deepest parenthesis nesting in `line`.
    static func nesting(_ line: Substring) -> Int {
        var depth = 0, deepest = 0
        for c in line {
            if c == "(" { depth += 1; deepest = max(deepest, depth) } else if c == ")" { depth -= 1 }
        }
        return deepest
    }

    static func expectShortNotices(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for line in stderr.split(separator: "\n") where line.contains("notice:") {
            #expect(nesting(line) <= 1, "nested parentheses: \(line)", sourceLocation: sourceLocation)
            #expect(!line.contains("…"), "cut off: \(line)", sourceLocation: sourceLocation)
        }
    }

    // MARK: status from the store and from the cache

    /// Durations ("in 59 min 58 s", "2 s ago") move between two runs; everything else must not.
    static func withoutDurations(_ text: String) -> String {
        text.replacingOccurrences(of: #"\((expires in|expired|in|due)[^)]*\)|\([^()]* ago\)"#, with: "(…)", options: .regularExpression)
    }

    static func object(_ r: RunResult) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any], "\(r.stdout)")
    }

    @Test func statusIsTheSameFromTheStoreAndFromTheCache() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        defer { _ = s.run(["erase", "--no-revoke"]) }
        _ = try s.storeSeeded(issuer, ["expires_in": 3600])
        // Twice: stored without a known last refresh (stored_at shown), then after a refresh.
        for round in 0..<2 {
            if round == 1 { #expect(s.run(["get", "--force-refresh"]).status == 0) }
            let coldText = s.run(["--no-cache", "status"])
            let coldJSON = s.run(["--no-cache", "status", "--json"])
            #expect(coldText.status == 0 && coldJSON.status == 0, "\(coldText.stderr)")
            #expect(s.run(["get"]).status == 0) // fills the cache
            let warmText = s.run(["status"])
            let warmJSON = s.run(["status", "--json"])
            #expect(warmText.status == 0 && warmJSON.status == 0, "\(warmText.stderr)")
            var cold = try Self.object(coldJSON), warm = try Self.object(warmJSON)
            #expect(cold["cached"] == nil)
            #expect(warm.removeValue(forKey: "cached") as? Bool == true, "status did not answer from the cache: \(warmJSON.stdout)")
            for key in ["expires_in"] { cold.removeValue(forKey: key); warm.removeValue(forKey: key) }
            #expect(NSDictionary(dictionary: cold) == NSDictionary(dictionary: warm), "round \(round):\n\(coldJSON.stdout)\n\(warmJSON.stdout)")
            #expect(round == 0 ? cold["stored_at"] != nil : cold["last_refresh"] is String, "\(coldJSON.stdout)")
            #expect(Self.withoutDurations(coldText.stdout) == Self.withoutDurations(warmText.stdout),
                    "round \(round):\n\(coldText.stdout)\n\(warmText.stdout)")
        }
    }

    // MARK: "run: … login" and "sign in again: … login"

    @Test func theSuggestedLoginSignsIn() throws {
        let f = try LoginFixture(["interval": 1, "approve_after": 1])
        let notSignedIn = f.run(["get"])
        #expect(notSignedIn.status == 3, "exit 3, not signed in: \(notSignedIn.stderr)")
        let login = try #require(Self.suggested(after: "; run: ", in: notSignedIn.stderr), "\(notSignedIn.stderr)")
        #expect(login == ["--profile", f.sandbox.profile, "login"])
        let signedIn = f.run(login)
        #expect(signedIn.status == 0, "\(signedIn.stderr)")
        #expect(f.run(["get"]).status == 0)

        // The issuer rejects the refresh token: "sign in again: …" signs in again.
        try f.issuer.configure(["faults": [["status": 401, "body": ["error": ["code": "refresh_token_invalidated"]]]]])
        let rejected = f.run(["get", "--force-refresh"])
        #expect(rejected.status == 0, "exit 0, the token still works: \(rejected.stderr)")
        let again = try #require(Self.suggested(after: "sign in again soon: ", in: rejected.stderr), "\(rejected.stderr)")
        #expect(again == login)
        // status and status --all say the same, and point at the same command.
        let status = f.run(["status"])
        #expect(Self.suggested(after: "; run: ", in: status.stdout) == again, "\(status.stdout)")
        let all = f.run(["status", "--all"])
        #expect(all.stdout.split(separator: "\n").contains { $0.hasPrefix("* " + f.sandbox.profile + " ") && $0.hasSuffix("  sign in again") }, "\(all.stdout)")
        let relogin = f.run(again)
        #expect(relogin.status == 0, "\(relogin.stderr)")
        #expect(f.run(["get", "--force-refresh"]).status == 0)
        #expect(f.run(["status"]).stdout.hasPrefix("Signed in as "))
    }

    /// `usage --all` with no profile: "run: chatgpt-credential login" signs in the profile used
    /// without --profile, and then `usage --all` answers for it.
    @Test func theSuggestedLoginMakesUsageAllAnswer() throws {
        let f = try LoginFixture(["interval": 1, "approve_after": 1])
        f.sandbox.env["CHATGPT_CREDENTIAL_BACKEND"] = f.issuer.url + "/backend-api"
        let none = f.run(["usage", "--all"])
        #expect(none.status == 3, "exit 3, nobody signed in: \(none.stderr)")
        let login = try #require(Self.suggested(after: "; run: ", in: none.stderr), "\(none.stderr)")
        #expect(login == ["login"])
        #expect(f.run(login).status == 0)
        let usage = f.run(["usage", "--all"])
        #expect(usage.status == 0, "\(usage.stderr)")
        #expect(usage.stdout.contains(f.sandbox.profile), "\(usage.stdout)")
    }

    // MARK: "remove it with '… erase' and sign in again: … login"

    @Test func theSuggestedEraseAndLoginReplaceADamagedCredential() throws {
        let f = try LoginFixture(["interval": 1, "approve_after": 1])
        let s = f.sandbox
        mkdir(s.dataDir, 0o700)
        #expect(FileManager.default.createFile(atPath: s.dataDir + "/\(s.profile).age", contents: Data("age-encryption.org/v1\ngarbage".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let damaged = f.run(["get"])
        #expect(damaged.status == 5, "exit 5, damaged: \(damaged.stderr)")
        let erase = try #require(Self.suggested(after: "remove it with '", in: damaged.stderr), "\(damaged.stderr)")
        let login = try #require(Self.suggested(after: "and sign in again: ", in: damaged.stderr), "\(damaged.stderr)")
        #expect(erase == ["--profile", s.profile, "erase"] && login == ["--profile", s.profile, "login"])
        let erased = f.run(erase)
        #expect(erased.status == 0, "\(erased.stderr)")
        #expect(f.run(["get"]).status == 3) // gone: not signed in
        let signedIn = f.run(login)
        #expect(signedIn.status == 0, "\(signedIn.stderr)")
        #expect(f.run(["get"]).status == 0)
    }

    // MARK: "run: chmod 600 FILE"

    @Test func theSuggestedChmodMakesTheFileReadable() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        _ = try s.storeSeeded(issuer)
        let path = s.dataDir + "/\(s.profile).age"
        chmod(path, 0o644)
        let refused = s.run(["--no-cache", "get"])
        #expect(refused.status == 5, "exit 5, permissions too open: \(refused.stderr)")
        let marker = "; run: "
        let r = try #require(refused.stderr.range(of: marker), "\(refused.stderr)")
        let command = String(refused.stderr[r.upperBound...].prefix { $0 != "\n" })
        #expect(command == "chmod 600 \(path)")
        #expect(Harness.run("/bin/sh", ["-c", command], env: ["PATH": "/usr/bin:/bin"]).status == 0)
        #expect(s.run(["--no-cache", "get"]).status == 0)
    }

    // MARK: a locked keyring

    /// A keyring holding the profile, then a new login session where it is locked (password "pw").
    static func lockedKeyring(_ s: Sandbox, token: TestIssuer.SeededTokens) throws -> PrivateBus {
        var base = s.env
        base.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        base.removeValue(forKey: "CHATGPT_CREDENTIAL_STORE")
        base["XDG_RUNTIME_DIR"] = s.root + "/run1"
        mkdir(s.root + "/run1", 0o700)
        do {
            let bus = try #require(PrivateBus(env: base))
            #expect(bus.startDaemon("gnome-keyring-daemon --unlock --components=secrets", stdin: "pw", log: s.root + "/k1.log").status == 0)
            let stored = Harness.run(Harness.binary, ["--store", "secret-service", "store"], env: bus.env, stdin: Array(token.storeJSON.utf8))
            #expect(stored.status == 0, "\(stored.stderr)")
        }
        base["XDG_RUNTIME_DIR"] = s.root + "/run2"
        mkdir(s.root + "/run2", 0o700)
        let bus = try #require(PrivateBus(env: base))
        #expect(bus.startDaemon("gnome-keyring-daemon --start --components=secrets", log: s.root + "/k2.log").status == 0)
        return bus
    }

    @Test func aLockedKeyringSaysHowToUnlockAndTheUnlockWorks() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let bus = try Self.lockedKeyring(s, token: try issuer.seed())
        let locked = Harness.run(Harness.binary, ["status"], env: bus.env)
        #expect(locked.status == 5, "exit 5, keyring locked: \(locked.stderr)")
        // No file holds the profile: --store file would only say "not signed in", so it is not offered.
        #expect(!locked.stderr.contains("--store file"), "\(locked.stderr)")
        #expect(Harness.run(Harness.binary, ["--store", "file", "status"], env: bus.env).status == 3)
        let marker = "or with: "
        let r = try #require(locked.stderr.range(of: marker), "\(locked.stderr)")
        let unlock = String(locked.stderr[r.upperBound...].prefix { $0 != "\n" })
        #expect(unlock == #"printf '%s' "$PASSWORD" | gnome-keyring-daemon --replace --unlock"#)
        var env = bus.env
        env["PASSWORD"] = "pw"
        let ran = Harness.run("/bin/bash", ["-c", #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done 2>/dev/null; "#
                                            + unlock + " >/dev/null 2>&1"], env: env)
        #expect(ran.status == 0)
        let unlocked = Harness.run(Harness.binary, ["status"], env: bus.env)
        #expect(unlocked.status == 0, "after the suggested unlock: \(unlocked.stderr)")
        #expect(unlocked.stdout.contains("  store:         keyring ") && unlocked.stdout.contains("(Secret Service), kept on disk"), "\(unlocked.stdout)")
    }

    /// A Secret Service that is not there (no session bus) under --store secret-service: `store`
    /// is told it can keep the credential in the file instead (the unreachable store's kind decides,
    /// `CredentialError.storeUnavailable`'s `secretService`), and following it works.
    @Test func anUnreachableSecretServiceOffersTheFileToStoreAndTheFileTakesIt() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let json = try issuer.seed().storeJSON
        let refused = s.run(["--store", "secret-service", "store"], stdin: json)
        #expect(refused.status == 5, "exit 5, store unavailable: \(refused.stderr)")
        #expect(refused.stderr.contains("the Secret Service cannot be reached: "), "\(refused.stderr)")
        #expect(refused.stderr.hasSuffix("; or add --store file to keep the credential in the encrypted file; see: chatgpt-credential doctor\n"), "\(refused.stderr)")
        let followed = s.run(["--store", "file", "store"], stdin: json)
        #expect(followed.status == 0, "\(followed.stderr)")
        #expect(s.run(["--store", "file", "status"]).status == 0)
    }

    @Test func storeFileIsOfferedOnlyWhenTheFileHoldsTheProfileAndThenWorks() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let bus = try Self.lockedKeyring(s, token: try issuer.seed())
        let explicit = Harness.run(Harness.binary, ["--store", "secret-service", "status"], env: bus.env)
        #expect(explicit.status == 5 && !explicit.stderr.contains("--store file"), "\(explicit.stderr)")
        // Keep a copy in the file while the keyring is locked: the keyring's copy stays, and the
        // notice says how to remove it once it answers.
        let toFile = Harness.run(Harness.binary, ["--store", "file", "store"], env: bus.env, stdin: Array(try issuer.seed().storeJSON.utf8))
        #expect(toFile.status == 0, "\(toFile.stderr)")
        Self.expectShortNotices(toFile.stderr)
        // Not `erase`, which would remove the new copy in the file as well.
        let marker0 = "once it answers, run: "
        let at = try #require(toFile.stderr.range(of: marker0), "\(toFile.stderr)")
        let clear = String(toFile.stderr[at.upperBound...].prefix { $0 != "\n" })
        #expect(clear == "secret-tool clear service chatgpt-credential profile \(s.profile)")
        let withFile = Harness.run(Harness.binary, ["--store", "secret-service", "status"], env: bus.env)
        #expect(withFile.status == 5, "exit 5, keyring locked: \(withFile.stderr)")
        let marker = "or use --store file, which holds this profile"
        #expect(withFile.stderr.contains(marker), "\(withFile.stderr)")
        let followed = Harness.run(Harness.binary, ["--store", "file", "status"], env: bus.env)
        #expect(followed.status == 0, "\(followed.stderr)")
        #expect(followed.stdout.contains("  store:         encrypted file "), "\(followed.stdout)")
        // Unlock, then the suggested erase removes the keyring's old copy.
        var env = bus.env
        env["PASSWORD"] = "pw"
        _ = Harness.run("/bin/bash", ["-c", #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done 2>/dev/null; printf '%s' "$PASSWORD" | gnome-keyring-daemon --replace --unlock >/dev/null 2>&1"#], env: env)
        #expect(Harness.run(Harness.binary, ["--store", "secret-service", "status"], env: bus.env).status == 0)
        let erased = bus.sh(clear)
        #expect(erased.status == 0, "\(erased.stderr)")
        #expect(Harness.run(Harness.binary, ["--store", "secret-service", "status"], env: bus.env).status == 3)
        #expect(Harness.run(Harness.binary, ["status"], env: bus.env).status == 0) // the file's copy
    }

    // MARK: the shared back-off names its issuer

    @Test func aBackoffNamesItsIssuerAndAnotherIssuerIgnoresIt() throws {
        let first = try TestIssuer(), second = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        defer { s.forgetSharedBackoff() }
        _ = try s.storeSeeded(first, ["expires_in": 200]) // refresh due, token still usable
        try first.configure(["faults": [["status": 403, "body": "forbidden", "content_type": "text/plain"]]])
        let failed = s.run(["--no-cache", "get"])
        #expect(failed.status == 0, "the stored token is printed: \(failed.stderr)")
        #expect(failed.stderr.contains("notice: could not refresh the token: "), "\(failed.stderr)")
        Self.expectShortNotices(failed.stderr)
        let record = try String(contentsOfFile: s.lockDir + "/\(s.profile).backoff", encoding: .utf8)
        #expect(record.split(separator: "\n", omittingEmptySubsequences: false).dropFirst().first == Substring(first.url), "\(record)")
        // The same issuer: the record answers, naming that issuer in full.
        let shared = s.run(["--no-cache", "get"])
        #expect(shared.status == 0)
        #expect(shared.stderr.contains("so \(first.url) is not asked again for "), "\(shared.stderr)")
        #expect(shared.stderr.split(separator: "\n").count == 1, "one line: \(shared.stderr)")
        Self.expectShortNotices(shared.stderr)
        #expect(try first.counter("faults_served") == 1)
        // The issuer address changed: the old record is ignored and the new issuer is asked.
        try second.configure(["faults": [["status": 403, "body": "forbidden", "content_type": "text/plain"]]])
        let moved = s.run(["--no-cache", "get"], env: ["CHATGPT_CREDENTIAL_ISSUER": second.url])
        #expect(moved.status == 0)
        #expect(try second.counter("faults_served") == 1, "the new issuer was not asked: \(moved.stderr)")
        #expect(!moved.stderr.contains(first.url), "a notice quotes the old issuer: \(moved.stderr)")
        Self.expectShortNotices(moved.stderr)
    }

    // MARK: the fallback notice

    @Test func theFallbackNoticeIsOneSentenceWithoutNesting() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none)
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let bus = try Self.lockedKeyring(s, token: try issuer.seed())
        // auto with a locked keyring: the new credential goes to the file, said in one notice.
        let stored = Harness.run(Harness.binary, ["--profile", s.profile + "-new", "store"], env: bus.env, stdin: Array(try issuer.seed().storeJSON.utf8))
        #expect(stored.status == 0, "\(stored.stderr)")
        let notice = stored.stderr.split(separator: "\n").first { $0.contains("notice: storing the credential in the encrypted file") }
        #expect(notice?.hasSuffix("because the Secret Service keyring is locked") == true, "\(stored.stderr)")
        Self.expectShortNotices(stored.stderr)
    }
}
