import Testing
@testable import CLI
@testable import OAuth
@testable import SignIn
@testable import UsageBackend
@testable import Transport
@testable import HelperProtocols
@testable import CredentialCore
import Secrets
import TestSupport

/// Every message that tells the person to sign in (or erase) names the profile when it is not
/// the default one: the command it gives must work as typed.
@Suite struct ProfileMessagesTests {
    let work = Profile(unchecked: "work")
    let unsafe = ServedCredential(accessToken: "a\u{1b}[2Jb", accountId: "acct")

    @Test func theCommandsNameANonDefaultProfileOnly() {
        #expect(work.loginCommand == "chatgpt-credential --profile work login")
        #expect(Profile.default.loginCommand == "chatgpt-credential login")
        #expect(work.removeDamagedHint
                == "remove it with 'chatgpt-credential --profile work erase' and sign in again: chatgpt-credential --profile work login")
    }

    @Test func getAnswersName() {
        #expect(throws: CredentialError.storeCorrupt(
            "the stored access token contains characters a token cannot have; sign in again: chatgpt-credential --profile work login")) {
            _ = try GetFormatter.format(unsafe, .token, profile: work)
        }
        let noIdToken = ServedCredential(accessToken: "tok", accountId: "acct")
        #expect(throws: CredentialError.failure("the stored credential has no id token; sign in again: chatgpt-credential --profile work login")) {
            _ = try GetFormatter.format(noIdToken, .idToken, profile: work)
        }
    }

    @Test func gitAndDockerAnswersName() throws {
        let request = GitCredentialRequest(protocol: "https", host: "chatgpt.com")
        #expect(throws: CredentialError.storeCorrupt(
            "the stored access token contains characters that cannot be sent; sign in again: chatgpt-credential --profile work login")) {
            _ = try GitCredentialProtocol.answer(for: request, credential: unsafe, profile: work)
        }
        let noAccount = ServedCredential(accessToken: "tok")
        #expect(throws: CredentialError.storeCorrupt(
            "the stored credential has no usable account id; sign in again: chatgpt-credential --profile work login")) {
            _ = try GitCredentialProtocol.answer(for: request, credential: noAccount, profile: work)
        }
        #expect(throws: CredentialError.storeCorrupt(
            "the stored access token contains characters that cannot be sent; sign in again: chatgpt-credential --profile work login")) {
            _ = try DockerCredentialProtocol.getAnswer(serverURL: "https://chatgpt.com", credential: unsafe, profile: work)
        }
    }

    @Test func storeOfACodexFileWithoutASignInNames() {
        #expect(throws: CredentialError.badInput(
            "store: this Codex auth.json holds no ChatGPT sign-in (API-key mode?); run 'codex login' first or sign in with: chatgpt-credential --profile work login")) {
            _ = try TokenImport.parse(SecretBytes(copying: #"{"OPENAI_API_KEY":"sk-test","tokens":null}"#.utf8), profile: work)
        }
    }

    @Test func aDamagedStoredDocumentNames() {
        #expect(throws: CredentialError.storeCorrupt(
            "the credential in memory:work is damaged; remove it with 'chatgpt-credential --profile work erase' and sign in again: chatgpt-credential --profile work login")) {
            _ = try TokenDocument.parse(SecretBytes(copying: "not a document".utf8), origin: "memory:work", profile: work)
        }
    }

    @Test func usageNames() {
        let client = UsageClient(config: .default, transport: Unreachable(), retry: .none, userAgent: "test")
        #expect(throws: CredentialError.storeCorrupt(
            "the stored access token or account id contains characters a header cannot carry; sign in again: chatgpt-credential --profile work login")) {
            _ = try client.fetch(accessToken: "tok\r\nX-Injected: 1", accountId: "acct", profile: work, now: { 0 })
        }
    }

    @Test func deviceSignInNames() throws {
        let disabled = IssuerClient(config: try IssuerConfig("http://127.0.0.1:9"), transport: Canned(status: 404, body: "{}"), retry: .none)
        #expect(throws: CredentialError.loginFailed(
            "device code sign-in is not enabled for this account: turn it on in ChatGPT Settings > Security (or ask your workspace admin), "
            + "or sign in with: chatgpt-credential --profile work login --browser (or --no-browser on a machine without one)")) {
            _ = try disabled.requestDeviceCode(for: work)
        }
        let started = IssuerClient(config: try IssuerConfig("http://127.0.0.1:9"),
                                   transport: Canned(status: 200, body: #"{"device_auth_id":"da_1","user_code":"AB-CD","interval":0}"#),
                                   retry: .none)
        var flow = DeviceCodeFlow(client: started, presenter: SignInPrompts(console: SilentConsole()), interrupt: nil, profile: work)
        flow.lifetime = 0
        #expect(throws: CredentialError.loginFailed(
            "the device code expired before the sign-in was approved; nothing was stored; run 'chatgpt-credential --profile work login' again")) {
            _ = try flow.run()
        }
    }

    @Test func notSignedInAndRejectionsName() {
        #expect(CredentialError.notSignedIn(profile: "work").message == "profile 'work' is not signed in; run: chatgpt-credential --profile work login")
        #expect(CredentialError.refreshRejected(profile: "work", code: "refresh_token_reused").message
                == "the issuer rejected the refresh token (refresh_token_reused); sign in again: chatgpt-credential --profile work login")
    }
}

/// Answers every request with one canned response.
private struct Canned: HTTPTransport {
    let status: Int
    let body: String
    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse { HTTPResponse(status: status, text: body) }
}

/// A transport the test must never reach.
private struct Unreachable: HTTPTransport {
    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse {
        Issue.record("a request was sent")
        return HTTPResponse(status: 599, text: "")
    }
}
