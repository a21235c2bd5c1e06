import Foundation
import Testing

/// Issue 29: the timer and a passphrase store. The passphrase reaches a systemd unit as the
/// credential `chatgpt-credential.passphrase` in `$CREDENTIALS_DIRECTORY` (`LoadCredential=`),
/// checked here without systemd: the directory is made as systemd makes it (0700, the file 0400).
@Suite struct PassphraseCredentialTests {
    static func rfc3339(_ t: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(t)))
    }

    @Test func refreshAllIfIdleReadsThePassphraseFromTheSystemdCredential() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let credentials = s.root + "/credentials"
        #expect(mkdir(credentials, 0o700) == 0)
        let passphrase = credentials + "/chatgpt-credential.passphrase"
        #expect(FileManager.default.createFile(atPath: passphrase, contents: Data("correct horse\n".utf8)))
        #expect(chmod(passphrase, 0o400) == 0)

        // A passphrase store whose last refresh is nine days old: the timer's run refreshes it.
        let t = try issuer.seed(["expires_in": 5 * 86400])
        let now = Int64(Date().timeIntervalSince1970)
        let auth = #"{"tokens":{"id_token":"\#(t.idToken)","access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","account_id":"\#(t.accountId)"},"last_refresh":"\#(Self.rfc3339(now - 9 * 86400))"}"#
        let stored = s.run(["store"], stdin: auth, env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": passphrase])
        #expect(stored.status == 0, "\(stored.stderr)")
        let file = s.dataDir + "/" + s.profile + ".age"
        let head = FileManager.default.contents(atPath: file).map { String(decoding: $0.prefix(32), as: UTF8.self) } ?? ""
        #expect(head.hasPrefix("age-encryption.org/v1\n-> scrypt "), "not a passphrase file: \(head)")

        // As the unit runs it, without a terminal or the variable: before, exit 5.
        let without = s.run(["--no-cache", "refresh", "--all", "--if-idle", "7"])
        #expect(without.status == 5, "exit 5 (store problem) without the credential: \(without.stderr)")
        #expect(without.stderr.contains("LoadCredential=chatgpt-credential.passphrase:"), "\(without.stderr)")
        let with = s.run(["--no-cache", "refresh", "--all", "--if-idle", "7"], env: ["CREDENTIALS_DIRECTORY": credentials])
        #expect(with.status == 0, "exit \(with.status): \(with.stderr)")
        #expect(with.stdout.isEmpty)
        #expect(try issuer.counter("refresh_requests") == 1)
        // Still a passphrase file, and the same passphrase opens it.
        let after = FileManager.default.contents(atPath: file).map { String(decoding: $0.prefix(32), as: UTF8.self) } ?? ""
        #expect(after.hasPrefix("age-encryption.org/v1\n-> scrypt "))
        let get = s.run(["--no-cache", "get"], env: ["CREDENTIALS_DIRECTORY": credentials])
        #expect(get.status == 0 && get.stdout != t.accessToken + "\n", "\(get.stderr)")
        // A directory that is not absolute is not systemd's: ignored.
        #expect(s.run(["--no-cache", "get"], env: ["CREDENTIALS_DIRECTORY": "credentials"]).status == 5)
    }

    /// On a terminal a wrong passphrase is asked again, three times in all; the third right one
    /// opens the store (exit 0); three wrong ones end in "try again", never advice to erase (exit 5).
    /// A pty from Python's `pty` answers each prompt once it is shown.
    @Test func aTerminalIsAskedThreeTimes() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let pf = s.root + "/pass"
        #expect(FileManager.default.createFile(atPath: pf, contents: Data("correct horse\n".utf8)))
        #expect(chmod(pf, 0o600) == 0)
        let t = try issuer.seed([:])
        let shape = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)","account_id":"\#(t.accountId)"}"#
        #expect(s.run(["store"], stdin: shape, env: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]).status == 0)
        let driver = #"""
        import os, pty, sys
        answers = sys.argv[2:]
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.argv[1], [sys.argv[1], "--no-cache", "get"])
        seen = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if answers and seen.rstrip().endswith(b":") and b"Passphrase for" in seen.split(b"\n")[-1]:
                os.write(fd, answers.pop(0).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(seen.decode(errors="replace"))
        sys.exit(os.waitstatus_to_exitcode(status))
        """#
        let script = s.root + "/driver.py"
        try driver.write(toFile: script, atomically: true, encoding: .utf8)
        let third = Harness.run("/usr/bin/python3", [script, Harness.binary, "nope", "still not", "correct horse"], env: s.env, timeout: 60)
        #expect(third.status == 0, "exit \(third.status): \(third.stdout)")
        #expect(third.stdout.contains("Wrong passphrase; try again (2 tries left)") && third.stdout.contains("(1 try left)"), "\(third.stdout)")
        #expect(third.stdout.contains(t.accessToken), "\(third.stdout)")
        let wrong = Harness.run("/usr/bin/python3", [script, Harness.binary, "a", "b", "c", "d"], env: s.env, timeout: 60)
        #expect(wrong.status == 5, "exit 5 (store problem) after three wrong passphrases: \(wrong.stdout)")
        #expect(wrong.stdout.contains("wrong passphrase for") && wrong.stdout.contains("try again") && !wrong.stdout.contains("erase"), "\(wrong.stdout)")
    }
}
