import Foundation
import Testing
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
import Secrets
import TestSupport

/// The owner remembers a digest of each refresh token it spent, in the same save as the new
/// tokens, never the token (man page VERBS, doctor: another program holding one is on this chain).
@Suite struct SpentTokenDigestTests {
    @Test func aRotationRemembersTheSpentTokenInTheSameSave() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 200)
        _ = try w.owner(ScriptedRefresher([rotation(expiresIn: 3600, refresh: "rt-1")])).fresh(Freshness())
        let stored = try #require(try w.stored())
        #expect(stored.refreshToken == "rt-1")
        #expect(stored.hasSpent("rt-0"), "the spent token's digest is saved with its successor")
        #expect(!stored.hasSpent("rt-1") && !stored.hasSpent("rt-2"))
        // The stored bytes hold a digest, never the spent token.
        let text = String(decoding: try #require(try w.primary.readBytes(w.profile)), as: UTF8.self)
        #expect(!text.contains("\"rt-0\"") && text.contains(TokenDocument.spentDigestsKey))
    }

    @Test func onlyTheLastEightAreKept() throws {
        var d = TokenDocument(accessToken: "a", refreshToken: "r")
        for i in 0..<10 { d = d.spending(SecretToken(copying: "rt-\(i)")) }
        #expect(d.spentRefreshDigests.count == TokenDocument.spentDigestLimit)
        #expect(!d.hasSpent("rt-0") && !d.hasSpent("rt-1") && d.hasSpent("rt-2") && d.hasSpent("rt-9"))
        // Survives a save and a read, and a further rotation.
        let read = try TokenDocument.parse(d.serialized(), origin: "test")
        #expect(read.spentRefreshDigests == d.spentRefreshDigests)
        #expect(read.rotated(accessToken: nil, refreshToken: "r2", idToken: nil).hasSpent("rt-9"))
    }

    @Test func aDocumentWithoutOrWithDamagedDigestsReadsAsNone() throws {
        let plain = try TokenDocument.parse(SecretBytes(copying: #"{"access_token":"a","refresh_token":"r"}"#.utf8), origin: "test")
        #expect(plain.spentRefreshDigests.isEmpty)
        let good = String(repeating: "ab", count: 32)
        let damaged = #"{"access_token":"a","refresh_token":"r","spent_refresh_tokens_sha256":["xyz",7,"\#(good)",null]}"#
        let read = try TokenDocument.parse(SecretBytes(copying: damaged.utf8), origin: "test")
        #expect(read.spentRefreshDigests == [Array(repeating: 0xab, count: 32)])
        let notArray = #"{"access_token":"a","refresh_token":"r","spent_refresh_tokens_sha256":"x"}"#
        #expect(try TokenDocument.parse(SecretBytes(copying: notArray.utf8), origin: "test").spentRefreshDigests.isEmpty)
    }
}
