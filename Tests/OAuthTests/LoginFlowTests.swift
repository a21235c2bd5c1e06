import Testing
@testable import OAuth
@testable import SignIn
@testable import CredentialCore
@testable import SystemRuntime
@testable import Secrets
import TestSupport

/// Records what the flows report (they never print: the CLI words it, see CLITests' SignInPromptTests).
final class RecordingPresenter: SignInPresenter {
    var deviceCodes: [(url: String, code: String, expiresIn: Double)] = []
    var reminders: [Double] = []
    var authorizeURLs: [(String, AuthorizeURLUse)] = []
    var pasteRequests: [(callback: String, retry: PasteRetry?)] = []
    var notices: [String] = []
    func showDeviceCode(url: String, code: String, expiresIn seconds: Double) { deviceCodes.append((url, code, seconds)) }
    func waiting(remaining seconds: Double) { reminders.append(seconds) }
    func showAuthorizeURL(_ url: String, use: AuthorizeURLUse) { authorizeURLs.append((url, use)) }
    func askForPastedAddress(callback: String, retry: PasteRetry?) { pasteRequests.append((callback, retry)) }
    func notice(_ text: String) { notices.append(text) }
}

@Suite struct PastedAddressTests {
    /// The line as the flow reads it: into guarded memory.
    static func parse(_ text: String) throws(PasteBackFlow.BadPaste) -> CallbackParameters {
        try PasteBackFlow.parse(SecretBytes(copying: Array(text.utf8)))
    }

    @Test func fullAddressAndBareQuery() throws {
        let a = try Self.parse("  http://localhost:1455/auth/callback?code=ac_1&state=st_2#frag \n")
        #expect(a.code == "ac_1" && a.state == "st_2" && a.error == nil)
        let b = try Self.parse("code=ac_1&state=st%2D2")
        #expect(b.code == "ac_1" && b.state == "st-2")
        let c = try Self.parse("http://localhost:1455/auth/callback?error=access_denied&error_description=no&state=s")
        #expect(c.refusal?.message.contains("access_denied") == true)
    }

    @Test(arguments: ["hello", "http://localhost:1455/auth/callback", "https://x.test/?q=1", "code=a b&state=s",
                      "http://localhost:1455/auth/callback?code=%ZZ&state=s", "?code=x", "?state=s"])
    func garbage(_ text: String) {
        #expect(throws: PasteBackFlow.BadPaste.notTheAddress) { try Self.parse(text) }
    }

    @Test func nothingPasted() {
        #expect(throws: PasteBackFlow.BadPaste.nothingPasted) { try Self.parse("") }
    }

    @Test func unsafeCodeIsNoCode() throws {
        #expect(throws: PasteBackFlow.BadPaste.notTheAddress) { try Self.parse("code=%1B%5B2J&state=s") }
    }

    /// Each bad paste's cause decides the retry prompt and the error a sign-in ending on it reports
    /// (exit 1), never the words of that error.
    @Test func eachBadPasteHasItsRetryReasonAndItsError() {
        let p = Profile(unchecked: "work")
        #expect(PasteBackFlow.BadPaste.notTheAddress.retryReason == "That is not the whole address (http://localhost:1455/auth/callback?code=…&state=…)")
        #expect(PasteBackFlow.BadPaste.otherSignIn.retryReason == "That address belongs to a different sign-in")
        #expect(PasteBackFlow.BadPaste.nothingPasted.retryReason == "Nothing was pasted")
        #expect(PasteBackFlow.BadPaste.notTheAddress.error(p) == PasteBackFlow.garbage)
        #expect(PasteBackFlow.BadPaste.nothingPasted.error(p) == .loginFailed("nothing was pasted; nothing was stored"))
        #expect(PasteBackFlow.BadPaste.otherSignIn.error(p) == .loginFailed(
            "the pasted address belongs to a different sign-in (its state does not match); nothing was stored; run '\(p.command("login --no-browser"))' again and paste the address from that sign-in"))
        for bad in [PasteBackFlow.BadPaste.notTheAddress, .nothingPasted, .otherSignIn] { #expect(bad.error(p).exitCode == 1) }
    }

    @Test func entitlementIsNamedAndVendorTextSanitized() {
        let e = CallbackParameters([("error", .text("access_denied")), ("error_description", .text("missing_codex_entitlement"))]).refusal
        #expect(e?.message.contains("Codex is not enabled") == true)
        let f = CallbackParameters([("error", .text("server_error\u{1B}[2J")), ("error_description", .text("bad\nthing\u{07}"))]).refusal
        #expect(f?.message.contains("\u{1B}") == false)
        #expect(f?.message.contains("\n") == false)
    }
}

@Suite struct DeviceFlowUnitTests {
    let usercode = ScriptedTransport.Outcome.json(200, #"{"device_auth_id":"da_1","user_code":"ABCD-EFGH","interval":0}"#)
    let approved = ScriptedTransport.Outcome.json(200, #"{"authorization_code":"ac_1","code_challenge":"x","code_verifier":"ver_1"}"#)
    let pending = ScriptedTransport.Outcome.json(403, #"{"error":{"code":"deviceauth_authorization_pending"}}"#)

    func client(_ script: [ScriptedTransport.Outcome]) throws -> (IssuerClient, ScriptedTransport) {
        let t = ScriptedTransport(script)
        return (IssuerClient(config: try IssuerConfig("http://127.0.0.1:9"), transport: t, retry: .none), t)
    }

    @Test func theCodeIsShownOnceThenExchangedWithTheDeviceRedirect() throws {
        let (c, t) = try client([usercode, pending, approved, .json(200, goodTokens)])
        let presenter = RecordingPresenter()
        let flow = DeviceCodeFlow(client: c, presenter: presenter, interrupt: nil, profile: .default)
        let grant = try flow.run()
        #expect(grant.refreshToken == "rt_new")
        // The code is shown once, with the page to enter it on.
        #expect(presenter.deviceCodes.count == 1)
        #expect(presenter.deviceCodes.first?.code == "ABCD-EFGH")
        #expect(presenter.deviceCodes.first?.url == "http://127.0.0.1:9/codex/device")
        #expect(presenter.deviceCodes.first?.expiresIn == OAuthConstants.deviceCodeLifetime)
        #expect(presenter.notices.isEmpty && presenter.authorizeURLs.isEmpty)
        // Exchanged with the device redirect URI and the verifier from the poll answer.
        let body = String(decoding: t.requests.last?.body ?? [], as: UTF8.self)
        #expect(body.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fdeviceauth%2Fcallback"))
        #expect(body.contains("code_verifier=ver_1"))
        #expect(body.contains("code=ac_1"))
    }

    @Test func slowDownAddsToTheInterval() throws {
        let slow = ScriptedTransport.Outcome.json(400, #"{"error":"slow_down"}"#)
        let (c, _) = try client([usercode, slow, approved, .json(200, goodTokens)])
        var flow = DeviceCodeFlow(client: c, presenter: RecordingPresenter(), interrupt: nil, profile: .default)
        flow.slowDownStep = 0.3
        let start = Clock.monotonicMillis()
        _ = try flow.run()
        #expect(Clock.monotonicMillis() - start >= 280)
    }

    @Test func temporaryFailuresGiveUpAfterALimit() throws {
        let down = ScriptedTransport.Outcome.json(503, "{}")
        let (c, t) = try client([usercode, down, down, down])
        var flow = DeviceCodeFlow(client: c, presenter: RecordingPresenter(), interrupt: nil, profile: .default)
        flow.maxInterval = 0.01
        #expect(throws: CredentialError.temporary(
            "gave up polling for the device sign-in after 3 failed attempts (the issuer is unavailable (HTTP 503)); nothing was stored"
        )) { try flow.run() }
        #expect(t.requests.count == 4)
    }

    @Test func lifetimeEndsPolling() throws {
        let (c, t) = try client([.json(200, #"{"device_auth_id":"da_1","user_code":"AB-CD","interval":1}"#), pending])
        var flow = DeviceCodeFlow(client: c, presenter: RecordingPresenter(), interrupt: nil, profile: .default)
        flow.lifetime = 0.2
        let start = Clock.monotonicMillis()
        #expect(throws: DeviceCodeFlow.expired(.default)) { try flow.run() }
        #expect(Clock.monotonicMillis() - start < 900, "the wait is cut to the deadline")
        #expect(t.requests.count == 1)
    }
}
