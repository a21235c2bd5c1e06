import Foundation
import Testing
@testable import CLI
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import Transport
@testable import CredentialCore
import Secrets
import TestSupport

/// CurlTransport and IssuerClient against the real loopback test issuer (never anything else).
@Suite struct CurlTransportTests {
    func client(_ issuer: TestIssuer, total: Double = 10, retry: RetryPolicy = .none) throws -> IssuerClient {
        var c = IssuerClient(config: try IssuerConfig(issuer.url), transport: CurlTransport(), retry: retry)
        c.connectTimeout = 5
        c.totalTimeout = total
        return c
    }

    @Test func realRefreshRotates() throws {
        let issuer = try TestIssuer()
        let seeded = try issuer.seed(["expires_in": 30, "email": "alice@example.com", "plan": "pro"])
        let result = try client(issuer).refresh(refreshToken: SecretToken(copying: seeded.refreshToken))
        guard case .rotated(let t) = result else { Issue.record("not rotated: \(result)"); return }
        let access = try #require(t.accessToken)
        #expect(t.refreshToken != nil && t.refreshToken != SecretToken(copying: seeded.refreshToken))
        #expect(t.idToken != nil)
        let claims = try #require(JWTClaims.decode(access))
        #expect(claims.email == "alice@example.com" && claims.plan == "pro")
        #expect(claims.accountId == seeded.accountId)
        #expect((claims.expiresAt ?? 0) > Clock.now() + 600) // the default lifetime, not the seed's 30 s
        let stats = try issuer.stats()
        #expect(stats["refresh_success"] as? Int == 1)
        #expect(stats["last_refresh_token_seen"] as? String == seeded.refreshToken)
        #expect(stats["last_refresh_client_id"] as? String == OAuthConstants.clientID)
        #expect((stats["last_token_request_content_type"] as? String)?.hasPrefix("application/json") == true)
        #expect(CurlTransport.isLoaded)
    }

    @Test(arguments: [401, 400])
    func reuseIsDetectedAndPermanent(_ status: Int) throws {
        let issuer = try TestIssuer()
        try issuer.configure(["reuse_status": status])
        let seeded = try issuer.seed()
        let c = try client(issuer, retry: .standard)
        guard case .rotated(let t) = c.refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) else { Issue.record("first refresh failed"); return }
        #expect(c.refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) == .rejected(code: "refresh_token_reused"))
        // the reuse invalidated the family, including the token just issued
        #expect(c.refresh(refreshToken: try #require(t.refreshToken)) == .rejected(code: "refresh_token_invalidated"))
        let stats = try issuer.stats()
        #expect(stats["refresh_reused"] as? Int == 1)
        #expect(stats["refresh_requests"] as? Int == 3, "permanent failures are not retried")
    }

    @Test func expiredRefreshToken() throws {
        let issuer = try TestIssuer()
        let seeded = try issuer.seed(["refresh_expired": true])
        #expect(try client(issuer).refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) == .rejected(code: "refresh_token_expired"))
    }

    @Test func scriptedOutageThenSuccessHonoursRetryAfter() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["status": 500], ["status": 429, "retry_after": 1]]])
        let seeded = try issuer.seed()
        var sleeps: [Double] = []
        var policy = RetryPolicy.standard
        policy.sleep = { sleeps.append($0); RetryPolicy.systemSleep(min($0, 1)) }
        let result = try client(issuer, retry: policy).refresh(refreshToken: SecretToken(copying: seeded.refreshToken))
        guard case .rotated = result else { Issue.record("not rotated: \(result)"); return }
        #expect(sleeps.count == 2)
        #expect(sleeps.last == 1, "Retry-After: 1 was read from the real response")
        #expect(try issuer.counter("refresh_requests") == 3)
        #expect(try issuer.counter("refresh_success") == 1)
    }

    @Test func retryAfterHeaderReachesTheResponse() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["status": 429, "retry_after": 2, "body": ["error": "rate_limited"]]]])
        let r = try CurlTransport().send(HTTPRequest(method: "POST", url: issuer.url + "/oauth/token",
                                                      headers: [HTTPHeader("Content-Type", "application/json")],
                                                      body: SecretBytes(copying: #"{"grant_type":"refresh_token"}"#.utf8), bypassProxy: true))
        #expect(r.status == 429)
        #expect(r.header("Retry-After") == "2")
        #expect(r.header("content-type")?.hasPrefix("application/json") == true)
        #expect(r.body.unsafeString() == #"{"error": "rate_limited"}"#)
    }

    @Test func endlessBodyHitsTheTotalTimeout() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["hang": true]]])
        let start = Date()
        do {
            _ = try CurlTransport().send(HTTPRequest(method: "POST", url: issuer.url + "/oauth/token",
                                                      headers: [HTTPHeader("Content-Type", "application/json")],
                                                      body: SecretBytes(copying: #"{"grant_type":"refresh_token"}"#.utf8),
                                                      connectTimeout: 2, totalTimeout: 1.5, bypassProxy: true))
            Issue.record("an endless body returned")
        } catch let e as TransportError {
            #expect(e.kind == .timeout)
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 1.4 && elapsed < 5, "took \(elapsed) s")
    }

    @Test func endlessBodyDuringRefreshIsTemporaryAndBounded() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["hang": true], ["hang": true], ["hang": true]]])
        let seeded = try issuer.seed()
        var policy = RetryPolicy.standard
        policy.totalBudget = 3
        policy.baseDelay = 0.1
        let start = Date()
        let result = try client(issuer, total: 1, retry: policy).refresh(refreshToken: SecretToken(copying: seeded.refreshToken))
        guard case .unavailable(let reason, _) = result else { Issue.record("\(result)"); return }
        #expect(reason.contains("in time"))
        #expect(Date().timeIntervalSince(start) < 8)
        #expect(try issuer.counter("refresh_success") == 0)
    }

    @Test(arguments: [false, true])
    func tenMegabyteBodyIsRefused(_ unknownLength: Bool) throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["huge": 10 << 20, "chunked_unknown_length": unknownLength]]])
        do {
            _ = try CurlTransport().send(HTTPRequest(method: "POST", url: issuer.url + "/oauth/token",
                                                      headers: [HTTPHeader("Content-Type", "application/json")],
                                                      body: SecretBytes(copying: #"{"grant_type":"refresh_token"}"#.utf8),
                                                      maxResponseBytes: 256 * 1024, bypassProxy: true))
            Issue.record("a 10 MB body was accepted")
        } catch let e as TransportError {
            #expect(e.kind == .tooLarge)
            #expect(e.message.contains("262144"))
        }
    }

    @Test func tenMegabyteBodyDuringRefresh() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["huge": 10 << 20]]])
        let seeded = try issuer.seed()
        let result = try client(issuer, retry: .standard).refresh(refreshToken: SecretToken(copying: seeded.refreshToken))
        guard case .unavailable(let reason, _) = result else { Issue.record("\(result)"); return }
        #expect(reason.contains("larger than"))
        #expect(try issuer.counter("refresh_requests") == 1, "a too-large answer is not retried")
    }

    @Test func htmlPage() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["faults": [["html": true]]])
        let seeded = try issuer.seed()
        guard case .unavailable(let reason, _) = try client(issuer).refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) else {
            Issue.record("HTML accepted"); return
        }
        #expect(reason.contains("HTML"))
    }

    @Test(arguments: ["esc", "newline"])
    func poisonedTokenIsRejected(_ poison: String) throws {
        let issuer = try TestIssuer()
        try issuer.configure(["poison": poison])
        let seeded = try issuer.seed()
        #expect(try client(issuer).refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) ==
                .unavailable(reason: "the issuer sent a token with unsafe characters; nothing was stored"))
        #expect(try issuer.counter("refresh_success") == 1, "the issuer did answer; the client refused")
    }

    @Test func connectionRefused() throws {
        // A port nothing listens on: bind one, note it, close it.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p -> Int32 in
                _ = bind(fd, p, len)
                return getsockname(fd, p, &len)
            }
        }
        let port = Int(UInt16(bigEndian: addr.sin_port))
        close(fd)
        do {
            _ = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/", connectTimeout: 2,
                                                      totalTimeout: 3, bypassProxy: true))
            Issue.record("connected to a closed port")
        } catch let e as TransportError {
            #expect(e.kind == .connect)
            #expect(e.isTransient)
        }
    }

    @Test func deviceFlowEndToEnd() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["approve_after": 2, "interval": 3, "interval_as_string": true])
        let c = try client(issuer)
        let device = try c.requestDeviceCode(for: .default)
        #expect(device.interval == 3)
        #expect(device.verificationURL == issuer.url + "/codex/device")
        #expect(try c.pollDeviceToken(device) == .pending)
        #expect(try c.pollDeviceToken(device) == .pending)
        guard case .approved(let code, let verifier) = try c.pollDeviceToken(device) else { Issue.record("not approved"); return }
        let grant = try c.exchangeCode(code: code, verifier: verifier, redirectURI: c.config.deviceRedirectURI)
        #expect(JWTClaims.decode(grant.accessToken)?.accountId == "acct-test-0001")
        #expect(try issuer.counter("code_exchanges") == 1)
        // the grant's refresh token works
        guard case .rotated = c.refresh(refreshToken: grant.refreshToken) else { Issue.record("refresh failed"); return }
    }

    @Test func deviceFlowDisabled() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["device_disabled": true])
        #expect(throws: CredentialError.loginFailed(IssuerClient.deviceNotEnabledMessage(.default))) { try client(issuer).requestDeviceCode(for: .default) }
    }

    @Test func browserFlowWithPKCE() throws {
        let issuer = try TestIssuer()
        let c = try client(issuer)
        let pkce = PKCE()
        let redirect = OAuthConstants.browserRedirectURI(port: 1455)
        // The scripted browser answers /oauth/authorize with a redirect carrying code and state;
        // CurlTransport does not follow it.
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: c.authorizeURL(redirectURI: redirect, pkce: pkce),
                                                      bypassProxy: true))
        #expect(r.status == 302)
        let locationHeader = r.header("location") // HTTPResponse is noncopyable: #require takes the value
        let location = try #require(locationHeader)
        #expect(location.hasPrefix(redirect + "?"))
        let query = try #require(FormEncoding.decode(String(location.split(separator: "?", maxSplits: 1)[1])))
        let code = SecretToken(copying: try #require(query.first { $0.0 == "code" }?.1))
        #expect(query.first { $0.0 == "state" }?.1 == pkce.state)

        // A wrong verifier is refused (PKCE is checked), and the code is single-use.
        #expect(throws: CredentialError.loginFailed("the issuer refused the sign-in code (HTTP 400: invalid_grant: PKCE verification failed)")) {
            try c.exchangeCode(code: code, verifier: PKCE().verifier, redirectURI: redirect)
        }
        #expect(throws: CredentialError.loginFailed("the issuer refused the sign-in code (HTTP 400: invalid_grant: unknown or used code)")) {
            try c.exchangeCode(code: code, verifier: pkce.verifier, redirectURI: redirect)
        }
        let r2 = try CurlTransport().send(HTTPRequest(method: "GET", url: c.authorizeURL(redirectURI: redirect, pkce: pkce),
                                                       bypassProxy: true))
        let loc2Header = r2.header("location") // HTTPResponse is noncopyable: #require takes the value
        let loc2 = try #require(loc2Header)
        let q2 = try #require(FormEncoding.decode(String(loc2.split(separator: "?")[1])))
        let code2 = SecretToken(copying: try #require(q2.first { $0.0 == "code" }?.1))
        let grant = try c.exchangeCode(code: code2, verifier: pkce.verifier, redirectURI: redirect)
        #expect(Sanitize.isTokenSafe(grant.accessToken) && grant.idToken != nil)
    }

    @Test func unregisteredRedirectPortFailsAtTokenWith403() throws {
        let issuer = try TestIssuer()
        let c = try client(issuer)
        let pkce = PKCE()
        let redirect = "http://localhost:9999/auth/callback"
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: c.authorizeURL(redirectURI: redirect, pkce: pkce),
                                                      bypassProxy: true))
        let locHeader = r.header("location") // HTTPResponse is noncopyable: #require takes the value
        let loc = try #require(locHeader)
        let q = try #require(FormEncoding.decode(String(loc.split(separator: "?")[1])))
        let code = SecretToken(copying: try #require(q.first { $0.0 == "code" }?.1))
        #expect {
            try c.exchangeCode(code: code, verifier: pkce.verifier, redirectURI: redirect)
        } throws: { e in
            guard case .loginFailed(let m)? = e as? CredentialError else { return false }
            return m.contains("HTTP 403")
        }
    }

    @Test func revokeInvalidatesTheFamily() throws {
        let issuer = try TestIssuer()
        let seeded = try issuer.seed()
        let c = try client(issuer)
        #expect(c.revoke(refreshToken: SecretToken(copying: seeded.refreshToken)))
        #expect(try issuer.stats()["last_revoked_token"] as? String == seeded.refreshToken)
        #expect(c.refresh(refreshToken: SecretToken(copying: seeded.refreshToken)) == .rejected(code: "refresh_token_invalidated"))
    }
}

/// The PERFORMANCE RULE: the binary must not load libcurl (or OpenSSL) at start-up.
@Suite struct LazyLoadingTests {
    @Test func binaryDoesNotLinkLibcurl() throws {
        let r = Harness.run("/usr/bin/ldd", [Harness.binary], env: ["PATH": "/usr/bin:/bin"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("libsodium"), "ldd output is real: \(r.stdout)")
        #expect(!r.stdout.contains("libcurl"))
        #expect(!r.stdout.contains("libssl"))
    }

    @Test func binaryDoesNotLoadLibcurlAtStartUp() throws {
        let sandbox = Sandbox(bus: .none)
        let r = sandbox.run(["--version"], env: ["LD_DEBUG": "libs"])
        #expect(r.stderr.contains("libsodium"), "LD_DEBUG output is real")
        #expect(!r.stderr.contains("libcurl"))
        #expect(!r.stderr.contains("libssl"))
    }
}
