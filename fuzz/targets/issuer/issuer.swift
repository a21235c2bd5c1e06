// Issuer response bodies through the real IssuerClient (code exchange, device code, device poll,
// refresh) behind a transport that answers with the fuzz input. Byte 0-1: status, byte 2: the
// content type, the rest: the body.
@testable import CredentialCore
import FuzzSupport
@testable import OAuth
@testable import Transport

private let permanent = Set(OAuthConstants.permanentRefreshErrors)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let canned = CannedTransport(fuzzing: &input)
    let (status, body) = (canned.status, canned.body)
    var client = IssuerClient(config: .default, transport: canned, retry: .none)
    client.retry.sleep = { _ in fuzzFail("slept with retry .none") }

    do {
        let g = try client.exchangeCode(code: "c", verifier: "v", redirectURI: "http://localhost:1455/auth/callback")
        require((200...299).contains(status), "tokens from HTTP \(status)")
        require(Sanitize.isTokenSafe(g.accessToken) && Sanitize.isTokenSafe(g.refreshToken), "unsafe token accepted")
        if let id = g.idToken { require(Sanitize.isTokenSafe(id), "unsafe id token accepted") }
    } catch { requireCleanError(error) }

    do {
        let d = try client.requestDeviceCode(for: .default)
        require((200...299).contains(status), "device code from HTTP \(status)")
        require(Sanitize.isTokenSafe(d.deviceAuthId) && Sanitize.isTokenSafe(d.userCode), "unsafe device code accepted")
        require(d.userCode.utf8.count <= 64, "user code too long")
        require((1...60).contains(d.interval), "interval \(d.interval) out of range")
    } catch { requireCleanError(error) }

    do {
        let device = DeviceCode(deviceAuthId: "id", userCode: "CODE-1234", interval: 5, verificationURL: "https://x")
        switch try client.pollDeviceToken(device) {
        case .approved(let code, let verifier):
            require((200...299).contains(status), "approved from HTTP \(status)")
            require(Sanitize.isTokenSafe(code) && Sanitize.isTokenSafe(verifier), "unsafe code accepted")
        case .denied(let reason):
            require(["access_denied", "deviceauth_denied", "authorization_declined"].contains(reason), "denied with \(reason.debugDescription)")
        case .pending, .slowDown, .expired: break
        }
    } catch { requireCleanError(error) }

    switch client.refresh(refreshToken: "rt") {
    case .rotated(let t):
        require((200...299).contains(status), "rotated from HTTP \(status)")
        require(t.accessToken != nil || t.refreshToken != nil || t.idToken != nil, "rotated with no token")
        for x in [t.accessToken, t.refreshToken, t.idToken].compactMap({ $0 }) { require(Sanitize.isTokenSafe(x), "unsafe refreshed token") }
    case .rejected(let code):
        require(permanent.contains(code) || (code == "unauthorized" && status == 401), "rejected with \(code.debugDescription) at HTTP \(status)")
    case .unavailable(let reason, _):
        require(isCleanLine(reason), "reason with control bytes: \(reason.debugDescription)")
    case .failed(let reason):
        fuzzFail("a local failure from a transport that always answers: \(reason.debugDescription)")
    }

    // Retry-After and the retry loop: never more attempts than allowed, never sleeping past the
    // budget, whatever the header says (fake clock, no real sleeping).
    let retryAfter = String(decoding: body.prefix(24), as: UTF8.self)
    if let ra = RetryPolicy.retryAfterSeconds(retryAfter) { require(ra >= 0 && ra <= 9_999_999_999, "Retry-After \(ra)") }
    var clock = 0.0, slept = 0.0, attempts = 0
    var policy = RetryPolicy.standard
    policy.sleep = { s in require(s >= 0 && s.isFinite, "sleep(\(s))"); slept += s; clock += s }
    policy.now = { clock }
    policy.random = { 0.999 }
    _ = try? policy.run { _ in attempts += 1; clock += 0.5; return HTTPResponse(status: status, headers: ["Retry-After": retryAfter]) }
    require(attempts >= 1 && attempts <= policy.maxAttempts, "\(attempts) attempts")
    require(slept <= policy.totalBudget, "slept \(slept) s, budget \(policy.totalBudget) s")

    if let json = try? JSON.parse(body) {
        if let c = IssuerClient.errorCode(json) { require(isCleanLine(c) && !c.isEmpty, "unclean error code") }
        if let m = IssuerClient.errorMessage(json) { require(isCleanLine(m) && !m.isEmpty, "unclean error message") }
    }
    return 0
}
