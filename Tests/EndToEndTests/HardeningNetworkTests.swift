import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Where the tool may send a refresh token: `CHATGPT_CREDENTIAL_ISSUER` is checked before any
/// network I/O (the refusals run inside `unshare -rn`, a namespace with no route anywhere, with an
/// expired token so that a refresh would be needed), and redirects are never followed.
@Suite(.serialized) struct HardeningNetworkTests {
    /// A sandbox holding an expired credential, runnable inside an empty network namespace.
    func expiredSandbox() throws -> (Sandbox, TestIssuer, TestIssuer.SeededTokens) {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer, ["expires_in": -10])
        return (s, issuer, t)
    }

    func runOffline(_ s: Sandbox, _ args: [String], issuerURL: String, timeout: Double = 30) -> RunResult {
        var env = s.env
        env["CHATGPT_CREDENTIAL_ISSUER"] = issuerURL
        return Harness.run(Hostile.unshare, ["-rn", Harness.binary] + args, env: env, timeout: timeout)
    }

    static let refused = [
        "http://example.com", "http://10.0.0.1", "http://[fe80::1]", "http://127.0.0.1.evil.com",
        "ftp://127.0.0.1/", "http://127.1", "http://0x7f.0.0.1", "http://[::ffff:127.0.0.1]",
        "HTTP://example.com", "http://localhost.", "https://user:pw@auth.openai.com", "file:///etc/passwd",
        "http://localhost@evil.com", "https://auth.openai.com\u{1b}[2J", "",
    ]

    @Test(.enabled(if: Hostile.canUnshareNetwork), arguments: refused.filter { !$0.isEmpty })
    func disallowedIssuerExits2BeforeAnyNetworkIO(url: String) throws {
        let (s, issuer, t) = try expiredSandbox()
        let started = Date()
        let r = runOffline(s, ["get"], issuerURL: url)
        #expect(r.status == 2, "\(url): \(r.status) \(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("CHATGPT_CREDENTIAL_ISSUER") && r.stderr.contains("is not allowed"), "\(r.stderr)")
        #expect(Hostile.controlScalars(r.stderr).isEmpty)
        // Every verb that could talk to the issuer refuses the same way.
        for args in [["erase"], ["get", "--force-refresh"], ["status"]] {
            #expect(runOffline(s, args, issuerURL: url).status == 2, "\(args)")
        }
        #expect(try s.storedDocument()?["refresh_token"] as? String == t.refreshToken) // nothing erased
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    /// The control: inside the namespace even the loopback test issuer is unreachable, so a
    /// refresh that did start would end in exit 4, not 2.
    @Test(.enabled(if: Hostile.canUnshareNetwork))
    func namespaceHasNoRoute() throws {
        let (s, issuer, _) = try expiredSandbox()
        let r = runOffline(s, ["get"], issuerURL: issuer.url)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    @Test(.enabled(if: Hostile.canUnshareNetwork))
    func allowedSchemeWithNothingListeningExits4Quickly() throws {
        let (s, _, t) = try expiredSandbox()
        let started = Date()
        let r = runOffline(s, ["get"], issuerURL: "https://localhost:1")
        let elapsed = Date().timeIntervalSince(started)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(elapsed < 15, "took \(elapsed) s")
        #expect(r.stdout.isEmpty)
        #expect(Hostile.isOneLine(r.stderr), "\(r.stderr)")
        // Said once, not "try again later; try again later".
        #expect(r.stderr.components(separatedBy: "try again later").count == 2, "\(r.stderr)")
        #expect(try s.storedDocument()?["refresh_token"] as? String == t.refreshToken)
    }

    /// The issuer answers the refresh with a redirect to another loopback listener (a second test
    /// issuer, which counts every request it gets): the tool does not follow it, so the refresh
    /// token never reaches that listener; the expired token gives exit 4, the stored one is kept.
    @Test(arguments: [301, 302, 303, 307, 308])
    func refreshRedirectIsNotFollowed(status: Int) throws {
        let (s, issuer, t) = try expiredSandbox()
        let listener = try TestIssuer()
        try issuer.configure(["faults": [["redirect": listener.url + "/oauth/token", "status": status]]])
        let r = s.run(["get", "-v"])
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("HTTP \(status)"), "\(r.stderr)")
        #expect(try issuer.counter("faults_served") == 1)
        let seen = try listener.stats()
        let requests = (seen["requests"] as? [String: Int] ?? [:]).filter { !$0.key.hasPrefix("/__admin") }
        #expect(requests.isEmpty, "the redirect was followed: \(requests)")
        #expect(seen["last_refresh_token_seen"] is NSNull)
        for secret in t.secrets { #expect(!r.stderr.contains(secret)) }
        #expect(try s.storedDocument()?["refresh_token"] as? String == t.refreshToken)
        // Once the issuer behaves again (and the shared back-off it caused is over), the kept
        // token refreshes normally.
        s.forgetSharedBackoff()
        #expect(s.run(["get"]).status == 0)
    }
}
