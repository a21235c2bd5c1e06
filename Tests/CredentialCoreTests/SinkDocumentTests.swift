import Testing
@testable import CredentialCore
@testable import Secrets
import TestSupport

/// A profile's sinks in its stored document (man page chatgpt-credential(7), SINKS) and what each
/// format renders.
@Suite struct SinkDocumentTests {
    static let signedIn = TokenDocument(accessToken: "a.b.c", refreshToken: "rt-secret", idToken: "i.d.t", accountId: "acct",
                                        expiresAt: 1_900_000_000, lastRefresh: 1_800_000_000, email: "e@x", plan: "plus")

    @Test func sinksRoundTripAndAreWrittenOnlyWhenThereAreSome() throws {
        var d = Self.signedIn
        #expect(!d.serialized().unsafeString().contains("sinks"))
        d.sinks = [SinkRecord(format: .codex, path: "/h/.codex/auth.json", digest: "ab", previousDigest: "cd", onChange: ["systemctl", "--user", "restart", "x"]),
                   SinkRecord(format: .env, path: "/h/app.env", digest: "ef")]
        let back = try TokenDocument.parse(d.serialized(), origin: "test")
        #expect(back == d)
        #expect(back.sinks.count == 2 && back.sinks[0].onChange == ["systemctl", "--user", "restart", "x"])
    }

    /// Read leniently: an entry that is not one (an unknown format, a relative path, not an object)
    /// is skipped; the rest of the document is read as always (a newer version's sink kinds do not
    /// make the credential unreadable).
    @Test func malformedSinkEntriesAreSkipped() throws {
        let text = #"{"version":1,"access_token":"a.b.c","refresh_token":"rt","sinks":[{"format":"codex","path":"/ok"},{"format":"vault","path":"/x"},{"format":"env","path":"rel"},7,{"path":"/nof"}]}"#
        let d = try TokenDocument.parse(SecretBytes(copying: text.utf8), origin: "test")
        #expect(d.sinks.map(\.path) == ["/ok"])
        let notAnArray = #"{"version":1,"access_token":"a.b.c","refresh_token":"rt","sinks":{"a":1}}"#
        #expect(try TokenDocument.parse(SecretBytes(copying: notAnArray.utf8), origin: "test").sinks.isEmpty)
    }

    @Test func aRotationKeepsTheSinks() {
        var d = Self.signedIn
        d.sinks = [SinkRecord(format: .token, path: "/t", digest: "00")]
        let next = d.rotated(accessToken: "n.e.w", refreshToken: "rt2", idToken: nil, expiresIn: 3600, now: 1_850_000_000)
        #expect(next.sinks == d.sinks)
    }

    static func text(_ format: SinkFormat, _ d: TokenDocument = signedIn) -> String? {
        SinkRendering.render(format, d)?.unsafeString()
    }

    @Test func codexAndChatmockShapesHoldNoRefreshTokenAndTheIssueTime() throws {
        for format in [SinkFormat.codex, .chatmock] {
            let text = try #require(Self.text(format))
            #expect(text == #"{"OPENAI_API_KEY":null,"tokens":{"id_token":"i.d.t","access_token":"a.b.c","refresh_token":"","account_id":"acct"},"last_refresh":"2027-01-15T08:00:00Z"}"# + "\n")
            #expect(!text.contains("rt-secret"))
        }
    }

    @Test func tokenEnvAndJSONFormats() throws {
        #expect(Self.text(.token) == "a.b.c\n")
        #expect(Self.text(.env) == "CHATGPT_ACCESS_TOKEN=a.b.c\nCHATGPT_ACCOUNT_ID=acct\n")
        #expect(Self.text(.json)
                == #"{"access_token":"a.b.c","account_id":"acct","expires_at":"2030-03-17T17:46:40Z","email":"e@x","plan":"plus"}"# + "\n")
        for format in SinkFormat.allCases {
            #expect(!(Self.text(format) ?? "").contains("rt-secret"), "\(format)")
        }
    }

    /// Nothing to serve (an access token dropped by git's erase): nothing is rendered, so the file
    /// keeps the last token rather than an empty one.
    @Test func aDroppedAccessTokenRendersNothing() {
        #expect(Self.text(.token, Self.signedIn.accessDropped()) == nil)
    }

    @Test func aFileIsOursWhenItHoldsTheLastWriteOrTheOneBefore() {
        let r = SinkRecord(format: .token, path: "/t", digest: "aa", previousDigest: "bb")
        #expect(r.isOurs("aa") && r.isOurs("bb") && !r.isOurs("cc") && !r.isOurs(""))
        #expect(!SinkRecord(format: .token, path: "/t").isOurs(""))
    }
}
