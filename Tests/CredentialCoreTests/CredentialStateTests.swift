import Testing
@testable import CredentialCore
import Secrets
import TestSupport

/// The stored credential's state as one value that the document holds, written as the same JSON
/// as before the state type (man page, STORES): each state's bytes are a fixture of that format.
@Suite struct CredentialStateTests {
    static let head = #"{"version":1,"access_token":"#
    static let names = #""account_id":"acct","#
    static let tail = #""last_refresh":"2027-01-15T08:00:00Z","email":"e@x","plan":"plus""#

    static func access(_ token: SecretToken = "at.a.b", expiresAt: Int64 = 1_900_000_000) -> AccessGrant {
        AccessGrant(token: token, expiresAt: expiresAt)!
    }

    static func document(_ state: CredentialState, origin: CredentialOrigin = .signIn) -> TokenDocument {
        TokenDocument(state: state, refreshToken: "rt", idToken: "it.x.y", accountId: "acct", lastRefresh: 1_800_000_000,
                      email: "e@x", plan: "plus", origin: origin)
    }

    /// Every state the owner writes, with the bytes the format had for it before the state type:
    /// a signed-in credential, one whose access token git's erase dropped, one whose refresh token
    /// the issuer rejected (with and without an access token left), and a Codex import.
    static let fixtures: [(String, TokenDocument, String)] = [
        ("signed in", document(.signedIn(access())),
         head + #""at.a.b","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"2030-03-17T17:46:40Z","# + tail + "}"),
        ("access dropped", document(.accessDropped),
         head + #""","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"1970-01-01T00:00:00Z","# + tail + "}"),
        ("refresh rejected", document(.refreshRejected(code: "refresh_token_reused", remaining: access())),
         head + #""at.a.b","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"2030-03-17T17:46:40Z","# + tail
            + #","refresh_rejected":"refresh_token_reused"}"#),
        ("refresh rejected, access dropped", document(.refreshRejected(code: "invalid_grant", remaining: nil)),
         head + #""","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"1970-01-01T00:00:00Z","# + tail
            + #","refresh_rejected":"invalid_grant"}"#),
        ("imported from Codex", document(.signedIn(access()), origin: .codex),
         head + #""at.a.b","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"2030-03-17T17:46:40Z","# + tail
            + #","imported_from":"codex"}"#),
        ("imported from Codex, rejected and dropped", document(.refreshRejected(code: "refresh_token_expired", remaining: nil), origin: .codex),
         head + #""","refresh_token":"rt","id_token":"it.x.y","# + names + #""expires_at":"1970-01-01T00:00:00Z","# + tail
            + #","refresh_rejected":"refresh_token_expired","imported_from":"codex"}"#),
    ]

    static func text(_ bytes: borrowing SecretBytes) -> String {
        bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test func eachStateIsWrittenAsTheUnchangedFormat() {
        for (name, document, fixture) in Self.fixtures {
            #expect(Self.text(document.serialized()) == fixture, "\(name)")
            #expect(document.serializedCount == fixture.utf8.count, "\(name)")
        }
    }

    @Test func eachFixtureReadsBackIntoItsState() throws {
        for (name, document, fixture) in Self.fixtures {
            let back = try TokenDocument.parse(SecretBytes(copying: fixture.utf8), origin: "test")
            #expect(back == document, "\(name)")
            #expect(back.state == document.state && back.origin == document.origin, "\(name)")
            #expect(Self.text(back.serialized()) == fixture, "\(name): not written back byte for byte")
        }
    }

    /// The owner's transitions: exactly the combinations above.
    @Test func transitionsKeepWhatTheOtherFactSays() {
        let d = Self.document(.signedIn(Self.access()))
        #expect(d.accessDropped().state == .accessDropped)
        #expect(d.accessDropped().expiresAt == 0 && d.accessDropped().accessToken.isEmpty && d.accessDropped().refreshToken == d.refreshToken)
        #expect(d.rejected(code: "refresh_token_reused").state == .refreshRejected(code: "refresh_token_reused", remaining: Self.access()))
        // A rejection stays whatever happens to the access token afterwards, and the other way round.
        #expect(d.rejected(code: "invalid_grant").accessDropped().state == .refreshRejected(code: "invalid_grant", remaining: nil))
        #expect(d.accessDropped().rejected(code: "invalid_grant").state == .refreshRejected(code: "invalid_grant", remaining: nil))
        // A rotation is signed in again, and keeps where the credential came from.
        let imported = Self.document(.refreshRejected(code: "refresh_token_expired", remaining: nil), origin: .codex)
        let rotated = imported.rotated(accessToken: "at.new.x", refreshToken: "rt-2", idToken: nil, expiresIn: 3600, now: 1_800_000_000)
        #expect(rotated.state == .signedIn(Self.access("at.new.x", expiresAt: 1_800_003_600)) && rotated.origin == .codex)
        // Without a new access token a dropped one stays dropped.
        #expect(Self.document(.accessDropped).rotated(accessToken: nil, refreshToken: "rt-2", idToken: nil).state == .accessDropped)
        #expect(d.origin == .signIn && d.state.rejection == nil && d.state.access == Self.access())
    }

    /// The reading rule of the stored fields: an empty access token is a dropped one, so an empty
    /// token never stands in a grant.
    @Test func anEmptyAccessTokenIsNoGrant() throws {
        #expect(AccessGrant(token: SecretToken(), expiresAt: 1) == nil)
        let odd = try TokenDocument.parse(SecretBytes(copying: #"{"access_token":"","refresh_token":"r","expires_at":"2030-03-17T17:46:40Z"}"#.utf8), origin: "test")
        #expect(odd.state == .accessDropped && odd.expiresAt == 0)
        let other = try TokenDocument.parse(SecretBytes(copying: #"{"access_token":"a","refresh_token":"r","imported_from":"elsewhere","refresh_rejected":""}"#.utf8), origin: "test")
        #expect(other.origin == .imported(from: "elsewhere") && other.state == .refreshRejected(code: "", remaining: Self.access("a", expiresAt: 0)))
    }
}
