import Testing
import CredentialCore
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
import TestSupport

/// Every write and delete of the owner checks the copy's version, the fallbacks included, and an
/// error asking the version is an error (ARCHITECTURE.md, "Rules of thumb").
@Suite struct CredentialTransactionTests {
    /// The rotation could not be saved to the file, so it went to the Secret Service; meanwhile a
    /// program that ignores the lock replaced the file's copy. That copy is not the spent one: it
    /// is left in place, and the notice says so.
    @Test func theFallbackDeleteLeavesACopyChangedMeanwhile() throws {
        let w = OwnerWorld()
        w.choice = .auto
        try w.seed(expiresIn: 100, in: w.file)
        var other = try #require(try w.stored(w.file))
        other.refreshToken = "rt-other"
        var acting = false
        w.file.beforeWrite = {
            guard !acting else { return }
            acting = true
            w.file.failWrites = false
            try? w.file.save(other, for: w.profile)
            w.file.failWrites = true
            acting = false
        }
        w.file.failWrites = true
        let fresh = try w.owner(ScriptedRefresher([rotation(expiresIn: 3600)])).fresh(Freshness())
        #expect(fresh.refreshed)
        #expect(try w.stored(w.secretService)?.refreshToken == "rt-1")
        #expect(try w.stored(w.file)?.refreshToken == "rt-other")
        #expect(fresh.notices.contains { $0.contains("still holds the spent refresh token") }, "\(fresh.notices)")
    }

    /// Without that change the fallback removes the spent copy, as before.
    @Test func theFallbackDeleteRemovesTheSpentCopy() throws {
        let w = OwnerWorld()
        w.choice = .auto
        try w.seed(expiresIn: 100, in: w.file)
        w.file.failWrites = true
        let fresh = try w.owner(ScriptedRefresher([rotation(expiresIn: 3600)])).fresh(Freshness())
        #expect(try w.stored(w.secretService)?.refreshToken == "rt-1")
        w.file.failWrites = false
        #expect(try w.file.readBytes(w.profile) == nil)
        #expect(fresh.notices.count == 1, "\(fresh.notices)")
    }

    /// The store stops answering between the read under the lock and the write: the write is not
    /// made on the assumption that nothing changed, the error is reported (exit 5's kind).
    @Test func anErrorAskingTheVersionIsAnError() throws {
        let w = OwnerWorld()
        let seeded = try w.seed(expiresIn: 3600)
        // The read under the lock gives the version of its bytes, so the first look at the
        // version is the write's check.
        w.file.beforeVersion = { throw CredentialError.storeNotAnswering("the test keyring did not answer") }
        #expect(throws: CredentialError.storeNotAnswering("the test keyring did not answer")) {
            try w.owner(ScriptedRefresher([])).dropAccessToken { $0 == seeded.accessToken }
        }
        #expect(try w.stored()?.accessToken == seeded.accessToken)
    }

    /// What was read is what is checked (man page, THE ONE OWNER): a program that ignores the lock
    /// replaces the copy right after the owner read it under the lock, before anything asked its
    /// version. The rotation is not written over that copy (the old code took the newer version
    /// for the one it had read, and overwrote it).
    @Test func aWriterAfterTheReadIsNeverTakenForWhatWasRead() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        var other = try #require(try w.stored())
        other.refreshToken = "rt-other"
        var acted = false
        w.file.beforeVersion = {
            guard !acted else { return }
            acted = true
            try w.file.save(other, for: w.profile)
        }
        _ = try? w.owner(ScriptedRefresher([rotation(expiresIn: 3600)])).fresh(Freshness())
        #expect(acted)
        #expect(try w.stored()?.refreshToken == "rt-other")
    }
}
