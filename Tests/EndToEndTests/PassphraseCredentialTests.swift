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
}
