import Testing
@testable import HelperProtocols
@testable import CredentialCore
@testable import Secrets
import TestSupport

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

private let storedDoc = ServedCredential(accessToken: "tok.en.value", accountId: "acct-123", expiresAt: 1_900_000_000)

@Suite struct DockerProtocolTests {
    // MARK: server URL input

    @Test func readsTrimmedServerURL() throws {
        #expect(try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes("https://chatgpt.com\n"))) == "https://chatgpt.com")
        #expect(try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes(" \t chatgpt.com \r\n"))) == "chatgpt.com")
        #expect(try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes("https://api.openai.com/v1"))) == "https://api.openai.com/v1")
    }

    @Test func rejectsEmptyServerURL() {
        for input in ["", "\n", "  \r\n\t"] {
            #expect(throws: CredentialError.badInput("no credentials server URL")) {
                try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes(input)))
            }
        }
    }

    @Test func rejectsOversizedServerURL() {
        let big = bytes("https://chatgpt.com/" + String(repeating: "a", count: 70_000))
        #expect(throws: CredentialError.badInput("docker credential input is larger than 65536 bytes")) {
            try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: big))
        }
    }

    @Test func rejectsControlBytesAndInvalidUTF8() {
        for input in ["https://chatgpt.com\nhttps://evil.com", "chatgpt.com\u{0}", "https://chatgpt.com\r/x", "chatgpt.com\u{1B}]52;"] {
            #expect(throws: CredentialError.badInput("the server URL contains a control character")) {
                try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes(input)))
            }
        }
        #expect(throws: CredentialError.badInput("the server URL is not valid UTF-8")) {
            try DockerCredentialProtocol.parseServerURL(SecretBytes(copying: bytes("https://chatgpt.com/") + [0xFF, 0xFE]))
        }
    }

    // MARK: host rule

    @Test(arguments: [
        "https://chatgpt.com", "https://chatgpt.com/", "chatgpt.com", "CHATGPT.COM", "HTTPS://ChatGPT.com",
        "https://chatgpt.com:443", "chatgpt.com:443/v1", "https://chatgpt.com/backend-api/codex",
        "https://chatgpt.com?x=1", "https://chatgpt.com#frag", "https://chatgpt.com.", "https://www.chatgpt.com",
        "https://api.openai.com/v1", "api.openai.com", "https://api.openai.com:443/v1/", "chatgpt.com/a?u=https://evil.com",
        "https://chatgpt.com/@evil.com", "https://chatgpt.com?@evil.com",
    ])
    func acceptsOurServers(_ url: String) {
        #expect(DockerCredentialProtocol.isChatGPTServer(url))
    }

    @Test(arguments: [
        "https://chatgpt.com@evil.com", "https://user:pw@chatgpt.com", "https://chatgpt.com:443@evil.com",
        "https://evil.com/chatgpt.com", "https://evil.com?chatgpt.com", "https://evil.com#chatgpt.com",
        "https://evil.com\\@chatgpt.com", "https://evil.com\\chatgpt.com", "chatgpt.com.evil.com",
        "https://chatgpt.com.evil.com", "https://evilchatgpt.com", "evilchatgpt.com", "http://chatgpt.com",
        "ftp://chatgpt.com", "ssh://chatgpt.com", "hxxps://chatgpt.com", "https:chatgpt.com", "https:/chatgpt.com",
        "//chatgpt.com", "https://", "", "/", "https://:443", "https://chatgpt.com:", "https://chatgpt.com:0",
        "https://chatgpt.com:99999", "evil.com:80://chatgpt.com", "https://chatgpt.com:8080", "chatgpt.com:8443/v1",
        "https://api.openai.com:8443/v1", "https://www.chatgpt.com:80/", "https://[::1]", "https://chatgpt.c\u{043E}m",
        "https://xn--chatgpt.com", "https://chatgpt.com%2eevil.com", "https://chatgpt%2ecom", "https://chatgpt.com evil",
        "https://openai.com", "https://platform.openai.com", "docker.io", "https://index.docker.io/v1/",
        "https://api.openai.com.evil.com/v1",
    ])
    func rejectsEverythingElse(_ url: String) {
        #expect(!DockerCredentialProtocol.isChatGPTServer(url))
    }

    // MARK: answers

    @Test func getAnswerIsExact() throws {
        #expect(try DockerCredentialProtocol.getAnswer(serverURL: "https://chatgpt.com", credential: storedDoc, profile: .default).unsafeString()
            == #"{"ServerURL":"https://chatgpt.com","Username":"acct-123","Secret":"tok.en.value"}"# + "\n")
        // The URL is echoed as given, JSON-escaped.
        #expect(try DockerCredentialProtocol.getAnswer(serverURL: "chatgpt.com/\"x\\", credential: storedDoc, profile: .default).unsafeString()
            == #"{"ServerURL":"chatgpt.com/\"x\\","Username":"acct-123","Secret":"tok.en.value"}"# + "\n")
    }

    @Test func getAnswerRefusesUnsafeStoredValues() {
        for access in ["", "a\nb", "a\"b c", "t\u{0}"] {
            let d = ServedCredential(accessToken: SecretToken(copying: access), accountId: "acct")
            #expect(throws: CredentialError.storeCorrupt("the stored access token contains characters that cannot be sent; sign in again: chatgpt-credential login")) {
                _ = try DockerCredentialProtocol.getAnswer(serverURL: "chatgpt.com", credential: d, profile: .default)
            }
        }
        let d = ServedCredential(accessToken: "tok", accountId: "acct\n")
        #expect(throws: CredentialError.storeCorrupt("the stored account id contains characters that cannot be sent; sign in again: chatgpt-credential login")) {
            _ = try DockerCredentialProtocol.getAnswer(serverURL: "chatgpt.com", credential: d, profile: .default)
        }
    }

    @Test func listAnswer() {
        #expect(DockerCredentialProtocol.listAnswer(accountId: "acct-123") == #"{"https://chatgpt.com":"acct-123"}"# + "\n")
        #expect(DockerCredentialProtocol.listAnswer(accountId: nil) == "{}\n")
    }

    @Test func notFoundTextIsExact() {
        #expect(DockerCredentialProtocol.notFoundMessage == "credentials not found in native keychain")
        #expect(DockerCredentialProtocol.notFoundOutput == "credentials not found in native keychain\n")
    }

    @Test func verbs() {
        for v in ["get", "store", "erase", "list", "version"] {
            #expect(DockerCredentialProtocol.Verb(argument: v)?.rawValue == v)
        }
        #expect(DockerCredentialProtocol.Verb(argument: "login") == nil)
    }

    // MARK: store input

    @Test func parsesStoreRequest() throws {
        let r = try DockerStoreRequest.parse(SecretBytes(copying: bytes(#"{"ServerURL":"https://chatgpt.com","Username":"u","Secret":"s"}"#)))
        #expect(r == DockerStoreRequest(serverURL: "https://chatgpt.com", username: "u", secret: "s"))
        let minimal = try DockerStoreRequest.parse(SecretBytes(copying: bytes(#" {"ServerURL":"x","Secret":null} "# + "\n")))
        #expect(minimal == DockerStoreRequest(serverURL: "x", username: "", secret: ""))
    }

    @Test func rejectsBadStoreRequests() {
        let cases: [(String, String)] = [
            ("", "docker store input is not JSON (unexpected end at byte 0)"),
            ("https://chatgpt.com", "docker store input is not JSON (unexpected character at byte 0)"),
            ("[]", "docker store input is not a JSON object"),
            ("{}", "no credentials server URL"),
            (#"{"ServerURL":""}"#, "no credentials server URL"),
            (#"{"ServerURL":1}"#, "docker store input: ServerURL is not a string"),
            (#"{"ServerURL":"x","Secret":{}}"#, "docker store input: Secret is not a string"),
            (#"{"ServerURL":"x","Username":true}"#, "docker store input: Username is not a string"),
        ]
        for (input, reason) in cases {
            #expect(throws: CredentialError.badInput(reason)) { try DockerStoreRequest.parse(SecretBytes(copying: bytes(input))) }
        }
        let big = bytes(#"{"ServerURL":"x","Secret":""# + String(repeating: "s", count: 70_000) + #""}"#)
        #expect(throws: CredentialError.badInput("docker credential input is larger than 65536 bytes")) {
            try DockerStoreRequest.parse(SecretBytes(copying: big))
        }
    }
}
