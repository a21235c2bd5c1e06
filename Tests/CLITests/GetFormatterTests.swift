import Testing
@testable import CLI
@testable import CredentialCore

@Suite struct GetFormatterTests {
    let doc = TokenDocument(accessToken: "tok.en-1", refreshToken: "secret-refresh", idToken: "id.tok", accountId: "acc-9",
                            expiresAt: 1_800_000_000, lastRefresh: 0, email: "e@x.io", plan: "pro")

    @Test func everyFormatExactly() throws {
        #expect(try GetFormatter.format(doc, .token) == "tok.en-1\n")
        #expect(try GetFormatter.format(doc, .accountId) == "acc-9\n")
        #expect(try GetFormatter.format(doc, .idToken) == "id.tok\n")
        #expect(try GetFormatter.format(doc, .header) == "Authorization: Bearer tok.en-1\nChatGPT-Account-ID: acc-9\n")
        #expect(try GetFormatter.format(doc, .env) == "CHATGPT_ACCESS_TOKEN='tok.en-1'\nCHATGPT_ACCOUNT_ID='acc-9'\n")
        let json = try GetFormatter.format(doc, .json)
        #expect(json == #"{"access_token":"tok.en-1","account_id":"acc-9","expires_at":"2027-01-15T08:00:00Z","email":"e@x.io","plan":"pro"}"# + "\n")
        #expect(!json.contains("secret-refresh"))
    }

    @Test func refusesUnsafeValues() {
        var bad = doc
        bad.accessToken = "a\u{1b}[2Jb"
        #expect(throws: CredentialError.storeCorrupt("the stored access token contains characters a token cannot have; sign in again: chatgpt-credential login")) {
            try GetFormatter.format(bad, .token)
        }
        #expect(GetFormatter.shellQuote("it's") == "'it'\\''s'")
    }
}
