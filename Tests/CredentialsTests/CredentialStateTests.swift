import Testing
@testable import Credentials
@testable import CredentialCore
import Secrets
import TestSupport

/// The stored credential's state as one value, read from the same stored fields (the JSON on disk
/// and in the keyring does not change).
@Suite struct CredentialStateTests {
    func document() -> TokenDocument {
        TokenDocument.fromTokens(accessToken: jwt(exp: 1_800_003_600), refreshToken: "rt-0", idToken: nil, now: 1_800_000_000)
    }

    func json(_ d: TokenDocument) -> String {
        d.serialized().withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test func eachStateReadsFromTheStoredFields() throws {
        let d = document()
        #expect(d.state == .signedIn)
        #expect(d.origin == .signIn)
        let dropped = d.accessDropped()
        #expect(dropped.state == .accessDropped)
        #expect(dropped.expiresAt == 0 && !dropped.hasAccessToken && dropped.refreshToken == d.refreshToken)
        #expect(d.rejected(code: "refresh_token_reused").state == .refreshRejected(code: "refresh_token_reused"))
        // A rejection stays what decides, whatever happens to the access token afterwards.
        #expect(d.rejected(code: "invalid_grant").accessDropped().state == .refreshRejected(code: "invalid_grant"))
        var imported = d
        imported.importedFrom = "codex"
        #expect(imported.origin == .codex)
    }

    /// The same bytes as the fields set by hand (how the owner wrote them before the state type).
    @Test func theStoredJSONIsUnchanged() throws {
        let marked = document().rejected(code: "refresh_token_reused")
        var byHand = document()
        byHand.refreshRejected = "refresh_token_reused"
        #expect(json(marked) == json(byHand))
        #expect(json(marked).contains(#""refresh_rejected":"refresh_token_reused""#))
        var droppedByHand = document()
        droppedByHand.accessToken = SecretToken()
        droppedByHand.expiresAt = 0
        #expect(json(document().accessDropped()) == json(droppedByHand))
        let back = try TokenDocument.parse(marked.serialized(), origin: "test", profile: .default)
        #expect(back.state == .refreshRejected(code: "refresh_token_reused"))
        #expect(back == marked)
    }
}
