import Testing
@testable import CLI
@testable import CredentialCore
import TestSupport

@Suite struct GetFormatterTests {
    let doc = ServedCredential(accessToken: "tok.en-1", accountId: "acc-9", idToken: "id.tok",
                               expiresAt: 1_800_000_000, lastRefresh: 0, email: "e@x.io", plan: "pro")

    /// The answer as text (a test may copy it out; the formatter builds it in guarded memory).
    func text(_ d: ServedCredential, _ format: OutputFormat) throws -> String {
        try GetFormatter.format(d, format).unsafeString()
    }

    @Test func everyFormatExactly() throws {
        #expect(try text(doc, .token) == "tok.en-1\n")
        #expect(try text(doc, .accountId) == "acc-9\n")
        #expect(try text(doc, .idToken) == "id.tok\n")
        #expect(try text(doc, .header) == "Authorization: Bearer tok.en-1\nChatGPT-Account-ID: acc-9\n")
        #expect(try text(doc, .env) == "export CHATGPT_ACCESS_TOKEN='tok.en-1'\nexport CHATGPT_ACCOUNT_ID='acc-9'\n")
        let json = try text(doc, .json)
        #expect(json == #"{"access_token":"tok.en-1","account_id":"acc-9","expires_at":"2027-01-15T08:00:00Z","email":"e@x.io","plan":"pro"}"# + "\n")
    }

    /// The broker's cached answers are `get --json` sent as the text around the token: the same
    /// bytes, whatever the other members hold (escapes, non-ASCII, an empty plan).
    @Test func jsonAroundTheTokenIsExactlyTheJSONAnswer() throws {
        var odd = doc
        odd.email = "q\"uo\\te\u{7}é\u{202E}@x.io"
        odd.plan = ""
        odd.accountId = "acc/\n9"
        for d in [doc, odd] {
            let around = try #require(try GetFormatter.jsonAroundToken(d))
            let spliced = around.before + around.token.withUnsafeBytes { Array($0) } + around.after
            #expect(String(decoding: spliced, as: UTF8.self) == (try text(d, .json)))
        }
    }

    /// A token with a byte JSON escapes is left to `format`, which escapes it.
    @Test func jsonAroundATokenThatNeedsAnEscapeIsNotMade() throws {
        for (token, written) in [("a\"b", #""access_token":"a\"b""#), ("a\\b", #""access_token":"a\\b""#)] {
            var d = doc
            d.accessToken = SecretToken(copying: token)
            #expect(try GetFormatter.jsonAroundToken(d) == nil)
            #expect(try text(d, .json).contains(written))
        }
    }

    /// Each answer is built into a buffer of exactly its size: no region is made and dropped
    /// while it grows (each costs a mapping on the hot path).
    @Test func answersAreBuiltInOneBufferOfExactlyTheirSize() throws {
        for format in [OutputFormat.token, .idToken, .json, .header, .env] {
            let answer = try GetFormatter.format(doc, format)
            #expect(answer.capacity == answer.count, "\(format)")
        }
    }

    /// A quote is token-safe: `--env` quotes it the way `shellQuote` quotes a String.
    @Test func envQuotesAQuoteInTheToken() throws {
        var quoted = doc
        quoted.accessToken = "it's"
        #expect(try text(quoted, .env) == "export CHATGPT_ACCESS_TOKEN='it'\\''s'\nexport CHATGPT_ACCOUNT_ID='acc-9'\n")
        #expect(try text(quoted, .env).hasPrefix("export CHATGPT_ACCESS_TOKEN=" + GetFormatter.shellQuote("it's") + "\n"))
    }

    @Test func refusesUnsafeValues() {
        var bad = doc
        bad.accessToken = "a\u{1b}[2Jb"
        #expect(throws: CredentialError.storeCorrupt("the stored access token contains characters a token cannot have; sign in again: chatgpt-credential login")) {
            _ = try GetFormatter.format(bad, .token)
        }
        #expect(GetFormatter.shellQuote("it's") == "'it'\\''s'")
    }
}
