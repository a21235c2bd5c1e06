import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Names that come from tokens (email, plan, account id) and text that comes from the issuer reach
/// terminals. Whatever they hold — ESC, OSC 52 clipboard writes, CSI, BEL, C1 controls, bidi
/// overrides — no output of the tool carries a control byte, and a value that must be printed
/// verbatim (the account id for a header) is refused rather than printed raw.
@Suite(.serialized) struct HardeningTerminalTests {
    static let osc52 = "\u{1b}]52;c;ZWNobyBwd25lZA==\u{07}"
    static var hostile: [String: Any] { [
        "email": "a\(osc52)b\u{9b}31m@ex\u{202e}moc.com\u{1b}[2J",
        "plan": "pro\u{1b}[31m\r\n\u{85}",
        "account_id": "acct\u{1b}[1;1H-\u{2066}1\u{7f}",
    ] }

    func check(_ r: RunResult, _ what: String) {
        #expect(Hostile.controlScalars(r.stdout).isEmpty, "\(what) stdout: \(Hostile.controlScalars(r.stdout))")
        #expect(Hostile.controlScalars(r.stderr).isEmpty, "\(what) stderr: \(Hostile.controlScalars(r.stderr))")
    }

    /// The names arrive inside JWTs from the issuer (seeded there), through `store` and a refresh.
    @Test func hostileNamesInTokensNeverReachTheTerminal() throws {
        let issuer = try TestIssuer()
        try issuer.configure(Self.hostile) // also in the tokens every refresh hands out
        let s = Sandbox(bus: .none, store: "file")
        let t = try issuer.seed(Self.hostile.merging(["expires_in": 200]) { a, _ in a })
        s.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let stored = s.run(["store", "-v"], stdin: t.storeJSON)
        #expect(stored.status == 0, "\(stored.stderr)")
        check(stored, "store")
        #expect(stored.stderr.contains("stored the credential for"))
        for args in [["status"], ["status", "--json"], ["status", "--all"], ["status", "--all", "--json"],
                     ["get", "--json"], ["get", "--account-id"], ["get", "--header"], ["get", "--env"], ["get", "-v"],
                     ["get", "--force-refresh", "-v", "--json"]] {
            let r = s.run(args)
            #expect(r.status == 0 || r.status == 5, "\(args): \(r.stderr)")
            check(r, args.joined(separator: " "))
        }
        #expect(try issuer.counter("refresh_success") >= 1)
        let status = s.run(["status"])
        #expect(status.stdout.hasPrefix("Signed in as a"), "\(status.stdout)")
    }

    /// A stored document written by something else (an older version, another tool, a restored
    /// backup) with raw control bytes in its names: what must be printed verbatim is refused with
    /// exit 5; everything else comes out clean.
    @Test func unsafeStoredNamesAreRefusedOrCleaned() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer) // makes the identity
        let now = Int(Date().timeIntervalSince1970)
        var doc: [String: Any] = ["version": 1, "access_token": t.accessToken, "refresh_token": t.refreshToken,
                                  "id_token": t.idToken, "expires_at": now + 3000, "last_refresh": now]
        for (k, v) in Self.hostile { doc[k] = v }
        try s.plantDocument(doc, profile: "planted")
        for args in [["get", "--account-id"], ["get", "--header"], ["get", "--env"]] {
            let r = s.run(["--profile", "planted"] + args)
            #expect(r.status == 5, "\(args): \(r.status) \(r.stdout)")
            #expect(r.stdout.isEmpty, "\(args)")
            #expect(Hostile.isOneLine(r.stderr))
            check(r, args.joined(separator: " "))
        }
        for args in [["get"], ["get", "--json"], ["status"], ["status", "--json"], ["status", "--all"], ["status", "--all", "--json"]] {
            let r = s.run(["--profile", "planted"] + args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            check(r, args.joined(separator: " "))
        }
        // The JSON still carries the values, escaped: a JSON reader gets them back exactly.
        let json = s.run(["--profile", "planted", "status", "--json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [String: Any])
        #expect(o["email"] as? String == Self.hostile["email"] as? String)
        #expect(o["account_id"] as? String == Self.hostile["account_id"] as? String)
    }

    /// Issuer error text with terminal escapes (and in the error code) is stripped before it is shown.
    @Test func issuerErrorTextIsStripped() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        try s.storeSeeded(issuer, ["expires_in": -10])
        try issuer.configure(["faults": [
            ["status": 400, "body": ["error": ["message": "bad\(Self.osc52)\u{1b}[2J\u{9b}1m\u{202e}", "code": "x\u{1b}]0;title\u{07}"]]],
            ["status": 403, "body": "<b>\u{1b}[5mforbidden\u{07}</b>", "content_type": "text/plain"],
        ]])
        for _ in 0..<2 {
            let r = s.run(["get", "-v"])
            #expect(r.status == 4, "\(r.stderr)")
            check(r, "get")
            // The failure is shared (man page REFRESH): a get right after it uses the recorded outcome,
            // whose text is stripped as well, without asking the issuer.
            let shared = s.run(["get", "-v"])
            #expect(shared.status == 4, "\(shared.stderr)")
            #expect(shared.stderr.contains("is not asked again for"), "\(shared.stderr)")
            check(shared, "get after a shared failure")
            // Forget the shared outcome so the next round reaches the next fault.
            s.forgetSharedBackoff()
        }
        #expect(try issuer.counter("faults_served") == 2)
    }
}
