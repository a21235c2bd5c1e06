import Foundation
import Testing
import Synchronization
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
import Secrets
import TestSupport

/// A refresher that answers from a script, counts calls, and can act while "on the wire"
/// (`during`), as another program would between our read and our write.
final class ScriptedRefresher: TokenRefreshing {
    var answers: [RefreshResult]
    var seen: [SecretToken] = []
    var during: () -> Void = {}
    init(_ answers: [RefreshResult]) { self.answers = answers }
    func refresh(refreshToken: SecretToken) -> RefreshResult {
        seen.append(refreshToken)
        during()
        return answers.isEmpty ? .unavailable(reason: "script exhausted") : answers.removeFirst()
    }
}

func jwt(exp: Int64, account: String = "acct-1") -> SecretToken {
    let payload = #"{"exp":\#(exp),"email":"a@b.c","https://api.openai.com/auth":{"chatgpt_account_id":"\#(account)","chatgpt_plan_type":"pro"}}"#
    return SecretToken(copying: "eyJhbGciOiJub25lIn0." + Base64.encode(Array(payload.utf8), alphabet: .urlSafe, padded: false) + ".sig")
}

/// Two memory stores behind a real `StoreSelector` and a real `ProfileLock` in a throwaway directory.
final class OwnerWorld {
    let now: Int64 = 1_800_000_000
    let profile = Profile.default
    let secretService = MemoryStore(kind: .secretService)
    let file = MemoryStore(kind: .file)
    let lockDirectory: String
    var choice: StoreChoice = .file

    init() {
        var template = Array("/tmp/ccred-owner-XXXXXX".utf8CString)
        lockDirectory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: lockDirectory) }

    var primary: MemoryStore { choice == .secretService ? secretService : file }

    func selector() -> StoreSelector {
        StoreSelector(choice: choice, secretService: { self.secretService }, file: { self.file },
                      fileHolds: { (try? self.file.readBytes($0)).flatMap { $0 } != nil },
                      probe: { self.secretService.locked ? .locked("locked") : .available })
    }

    /// How long a `refresh_token_reused` answer waits for a save in flight (short: most tests have none).
    var reuseGrace = 0.1

    func owner(_ r: ScriptedRefresher, lockPath: Bool = true) -> CredentialOwner {
        let o = CredentialOwner(profile: profile, selector: selector(),
                                lock: ProfileLock(profile: profile, path: lockPath ? self.lockDirectory + "/default.lock" : nil, timeout: 5),
                                now: { self.now }, refresher: { r })
        o.reuseGrace = reuseGrace
        return o
    }

    /// A document whose access token expires in `expiresIn` seconds, last refreshed an hour ago.
    @discardableResult
    /// `refreshedAgo: nil` leaves the time of the last refresh unknown (as for a bare token set given to `store`).
    func seed(expiresIn: Int64, rejected: String? = nil, in store: MemoryStore? = nil, refreshedAgo: Int64? = 3600) throws -> TokenDocument {
        var doc = TokenDocument.fromTokens(accessToken: jwt(exp: now + expiresIn), refreshToken: "rt-0", idToken: nil, now: now - (refreshedAgo ?? 0))
        if refreshedAgo == nil { doc.lastRefresh = 0 }
        if let rejected { doc = doc.rejected(code: rejected) }
        try (store ?? primary).save(doc, for: profile)
        return doc
    }

    func stored(_ store: MemoryStore? = nil) throws -> TokenDocument? { try (store ?? primary).load(profile) }
}

func rotation(expiresIn: Int64, refresh: SecretToken = "rt-1", now: Int64 = 1_800_000_000, sendExpiresIn: Int64? = nil) -> RefreshResult {
    .rotated(RefreshedTokens(accessToken: jwt(exp: now + expiresIn), refreshToken: refresh, idToken: nil, expiresIn: sendExpiresIn))
}

@Suite struct CredentialOwnerRefreshTests {
    @Test func freshTokenMakesNoCall() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 3600)
        let r = ScriptedRefresher([])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty)
        #expect(fresh.credential == doc.served && !fresh.refreshed && fresh.notices.isEmpty)
    }

    /// The lock file's path is found when a lock is first taken, and once: a read that takes no
    /// lock (a fresh token) never looks for the lock directory.
    @Test func theLockPathIsFoundOnlyWhenALockIsFirstTaken() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 3600)
        let finds = Mutex(0)
        let path = w.lockDirectory + "/default.lock"
        func find() -> String? { finds.withLock { $0 += 1 }; return path }
        let r = ScriptedRefresher([rotation(expiresIn: 3600), rotation(expiresIn: 3600, refresh: "rt-2")])
        let owner = CredentialOwner(profile: w.profile, selector: w.selector(),
                                    lock: ProfileLock(profile: w.profile, path: find(), timeout: 5),
                                    now: { w.now }, refresher: { r })
        _ = try owner.fresh(Freshness())
        #expect(finds.withLock { $0 } == 0)
        _ = try owner.fresh(Freshness(forceRefresh: true))
        #expect(finds.withLock { $0 } == 1)
        _ = try owner.fresh(Freshness(forceRefresh: true))
        #expect(r.seen == ["rt-0", "rt-1"])
        #expect(finds.withLock { $0 } == 1)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func expiringTokenRotatesAndPersistsBeforeAnswering() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 200)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen == ["rt-0"])
        #expect(fresh.refreshed && fresh.notices.isEmpty)
        let stored = try #require(try w.stored())
        #expect(stored.refreshToken == "rt-1")
        #expect(stored.accessToken == fresh.credential.accessToken)
        #expect(stored.accountId == "acct-1")
        #expect(stored.lastRefresh == w.now)
    }

    @Test func minTTLBeyondExpiryForcesRefresh() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 1000)
        let r = ScriptedRefresher([rotation(expiresIn: 9000)])
        let fresh = try w.owner(r).fresh(Freshness(minTTL: 2000, requiredTTL: 2000))
        #expect(r.seen.count == 1)
        #expect(fresh.notices.isEmpty)
    }

    @Test func anotherProcessAlreadyRotated() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 100)
        let owner = w.owner(ScriptedRefresher([]))
        let located = try #require(try owner.locate())
        // Happens while we wait for the lock: another process rotated.
        let rotated = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 3600), refreshToken: "rt-9", idToken: nil, now: w.now)
        try w.file.save(rotated, for: w.profile)
        let fresh = try owner.fresh(located, Freshness())
        #expect(located.document == doc)
        #expect(fresh.credential == rotated.served && !fresh.refreshed)
    }

    @Test func permanentRejectionOnExpiredTokenExits3AndKeepsDocument() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: -10)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_reused")) {
            try w.owner(r).fresh(Freshness())
        }
        let kept = try #require(try w.stored())
        #expect(kept.refreshToken == "rt-0")
        #expect(kept.state.rejection == "refresh_token_reused")
        // A second get does not ask the issuer again.
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_reused")) {
            try w.owner(r).fresh(Freshness())
        }
        #expect(r.seen.count == 1)
    }

    @Test func permanentRejectionOnValidTokenPrintsWithWarning() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 120)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_invalidated")])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential.accessToken == doc.accessToken)
        #expect(fresh.notices.count == 1 && fresh.notices[0].contains("sign in again soon: chatgpt-credential login"))
        // With --min-ttl beyond what is left: exit 3.
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_invalidated")) {
            try w.owner(r).fresh(Freshness(minTTL: 600, requiredTTL: 600))
        }
        #expect(r.seen.count == 1)
    }

    @Test func transientFailureKeepsDocumentFallsBackAndIsShared() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 120)
        let before = try w.file.readBytes(w.profile)
        let r = ScriptedRefresher([.unavailable(reason: "HTTP 500")])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential == doc.served)
        #expect(fresh.notices.first?.hasPrefix("notice: could not refresh the token: HTTP 500; printing the stored one") == true)
        #expect(try w.file.readBytes(w.profile) == before)
        // The outcome is recorded beside the lock: the next caller does not ask the issuer.
        #expect(throws: CredentialError.temporary("could not refresh the token: HTTP 500, so the issuer is not asked again for 15 s")) {
            try w.owner(r).fresh(Freshness(minTTL: 600, requiredTTL: 600))
        }
        #expect(r.seen.count == 1)
    }

    @Test func aLocalFailureIsExit1AndIsNotShared() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 120)
        let r = ScriptedRefresher([.failed(reason: "cannot load libcurl.so.4 (install libcurl4)")])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential == doc.served)
        #expect(fresh.notices == ["notice: could not refresh the token: cannot load libcurl.so.4 (install libcurl4); printing the stored one, which expires in 2 min 0 s"])
        #expect(IssuerBackoff(lockPath: w.lockDirectory + "/default.lock").current(now: w.now) == nil)
        r.answers = [.failed(reason: "cannot load libcurl.so.4 (install libcurl4)")]
        #expect(throws: CredentialError.failure("could not refresh the token: cannot load libcurl.so.4 (install libcurl4)")) {
            try w.owner(r).fresh(Freshness(minTTL: 600, requiredTTL: 600))
        }
        #expect(r.seen.count == 2)
    }

    @Test func retryAfterSetsTheSharedBackoff() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 120)
        let r = ScriptedRefresher([.unavailable(reason: "HTTP 429", retryAfter: 40)])
        _ = try w.owner(r).fresh(Freshness())
        let record = try #require(IssuerBackoff(lockPath: w.lockDirectory + "/default.lock").current(now: w.now))
        #expect(record == IssuerBackoff.Record(until: w.now + 40, reason: "HTTP 429"))
    }

    @Test func droppedAccessTokenRefreshesEvenRightAfterARefresh() throws {
        let w = OwnerWorld()
        let seeded = try w.seed(expiresIn: 3600, refreshedAgo: 5)
        let owner = w.owner(ScriptedRefresher([]))
        #expect(try owner.dropAccessToken { $0 == seeded.accessToken })
        let r = ScriptedRefresher([rotation(expiresIn: 3600, refresh: "rt-2")])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen == ["rt-0"])
        let stored = try w.stored()
        #expect(fresh.refreshed && stored?.refreshToken == "rt-2" && fresh.credential == stored?.served)
    }

    @Test func gitEraseOfAnotherTokenChangesNothing() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 3600)
        #expect(try w.owner(ScriptedRefresher([])).dropAccessToken { _ in false } == false)
        #expect(try w.stored() == doc)
    }

    @Test func noRefreshWithinAMinuteOfTheLast() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100, refreshedAgo: 20)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty)
        #expect(fresh.notices == ["notice: this token was refreshed 20 s ago and is not refreshed again within 60 s (--force-refresh does); it expires in 1 min 40 s"])
        // --force-refresh does.
        _ = try w.owner(r).fresh(Freshness(forceRefresh: true))
        #expect(r.seen.count == 1)
    }

    @Test func minTTLBeyondTheIssuersLifetimeIsNotALoop() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 1000, refreshedAgo: nil)
        let r = ScriptedRefresher([rotation(expiresIn: 3600, sendExpiresIn: 3600), rotation(expiresIn: 3600, refresh: "rt-2")])
        let first = try w.owner(r).fresh(Freshness(minTTL: 7200, requiredTTL: 7200))
        #expect(r.seen.count == 1 && first.refreshed)
        #expect(first.notices == ["notice: the issuer grants tokens valid for 1 h 0 min, less than the 7200 s asked for; printing this one, which expires in 1 h 0 min; it is not refreshed again before the usual 300 s margin"])
        let second = try w.owner(r).fresh(Freshness(minTTL: 7200, requiredTTL: 7200))
        #expect(r.seen.count == 1 && !second.refreshed)
        #expect(second.credential == first.credential)
        #expect(second.notices.count == 1 && second.notices[0].hasPrefix("notice: the issuer grants tokens valid for 1 h 0 min"))
    }

    @Test func expiresInAtReceiptWinsOverAnExpSkewedByTheClock() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        // The issuer's clock is two hours behind ours: its exp is already past by our clock.
        let r = ScriptedRefresher([rotation(expiresIn: -3600, sendExpiresIn: 3600)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential.expiresAt == w.now + 3600)
        #expect(try w.stored()?.expiresAt == w.now + 3600)
        _ = try w.owner(r).fresh(Freshness())
        #expect(r.seen.count == 1)
    }
}

@Suite struct CredentialOwnerSaveTests {
    @Test func reserveBeforeSpendPrintsTheStoredTokenWhenUsable() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 200)
        w.file.full = true
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty) // nothing spent
        #expect(fresh.credential == doc.served)
        #expect(fresh.notices == ["notice: not refreshing, the refreshed tokens could not be saved (the test store has no room); printing the stored token, which expires in 3 min 20 s"])
    }

    @Test func reserveBeforeSpendFailsWithTheStoreErrorWhenNotUsable() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: -5)
        w.file.full = true
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        #expect(throws: CredentialError.storeFailure("the test store has no room")) { try w.owner(r).fresh(Freshness()) }
        #expect(r.seen.isEmpty)
    }

    @Test func saveFailureAfterRotationUnderAutoSavesToTheOtherStore() throws {
        let w = OwnerWorld()
        w.choice = .auto
        try w.seed(expiresIn: 100, in: w.secretService)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { w.secretService.notAnswering = true } // the keyring dies mid-refresh
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.refreshed)
        #expect(fresh.notices == [
            "notice: could not save the refreshed tokens to memory:secret-service:default (the test keyring did not answer); saved them to memory:file:default instead",
            // The keyring still holds the spent token and could not be asked to remove it.
            "notice: the copy in memory:secret-service:default still holds the spent refresh token; once it answers again, run: secret-tool clear service chatgpt-credential profile default",
        ])
        #expect(try w.stored(w.file)?.refreshToken == "rt-1")
    }

    @Test func saveFailureAfterRotationWithAnExplicitStorePrintsTheNewToken() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { w.file.full = true }
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.refreshed && fresh.credential.accessToken == jwt(exp: w.now + 3600)) // the rotation's, not the stored one
        #expect(fresh.notices == ["notice: could not save the refreshed tokens to memory:file:default (the test store is full): the new refresh token is lost; this access token expires in 1 h 0 min, then sign in again: chatgpt-credential login"])
    }

    @Test func aDocumentChangedDuringTheRefreshIsNotOverwritten() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let other = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 3600, account: "acct-other"), refreshToken: "rt-other", idToken: nil, now: w.now)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { try? w.file.save(other, for: w.profile) } // another program, not honouring the lock
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.notices == ["notice: the stored credential was changed by another program during the refresh; the refreshed tokens were not saved over it"])
        #expect(try w.stored() == other)
    }

    @Test func aCredentialDeletedDuringTheRefreshStaysDeleted() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { _ = try? w.file.delete(w.profile) }
        _ = try w.owner(r).fresh(Freshness())
        #expect(try w.stored() == nil)
    }

    @Test func aRejectionAfterAnotherRotationDoesNotMarkTheNewDocument() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let rotated = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 3600), refreshToken: "rt-9", idToken: nil, now: w.now)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        r.during = { try? w.file.save(rotated, for: w.profile) }
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential == rotated.served)
        #expect(try w.stored()?.state.rejection == nil)
    }
}

/// When two writers meet anyway (a program that ignores the lock): scripted interleavings of
/// another writer's save with our refresh (man page, "When two writers meet").
@Suite struct TwoWritersTests {
    /// The other writer spent rt-0 first and failed; its rejection mark on rt-0 lands while our
    /// refresh of rt-0 is at the issuer. Our rotation holds the only live token: it is saved.
    @Test func aRotationReplacesARejectionMarkOnTheTokenItSpent() throws {
        let w = OwnerWorld()
        let seeded = try w.seed(expiresIn: 100)
        let marked = seeded.rejected(code: "refresh_token_reused")
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { try? w.file.save(marked, for: w.profile) }
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.refreshed && fresh.notices.isEmpty, "\(fresh.notices)")
        let stored = try #require(try w.stored())
        #expect(stored.refreshToken == "rt-1")
        #expect(stored.state.rejection == nil)
        #expect(stored.served == fresh.credential)
    }

    /// The same when the other writer only dropped the spent token's access token (git erase).
    @Test func aRotationReplacesTheSpentTokensDocumentWhateverElseChanged() throws {
        let w = OwnerWorld()
        let dropped = try w.seed(expiresIn: 100).accessDropped()
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { try? w.file.save(dropped, for: w.profile) }
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(try w.stored()?.refreshToken == "rt-1")
        #expect(try w.stored()?.served == fresh.credential)
    }

    /// A rejection mark on a token other than the one spent (an older sign-in) is not ours to replace.
    @Test func aRotationDoesNotReplaceAMarkOnAnotherToken() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let other = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 60), refreshToken: "rt-other", idToken: nil, now: w.now)
            .rejected(code: "refresh_token_expired")
        let r = ScriptedRefresher([rotation(expiresIn: 3600)])
        r.during = { try? w.file.save(other, for: w.profile) }
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.notices.first?.contains("changed by another program") == true)
        #expect(try w.stored() == other)
    }

    /// Our rt-0 is answered `refresh_token_reused` because the other writer spent it a moment
    /// before; its rotation (rt-9) lands on the third read after the answer. Nothing is marked;
    /// its token is the answer.
    @Test func aReusedAnswerWaitsForTheSaveInFlight() throws {
        let w = OwnerWorld()
        w.reuseGrace = 2.5
        try w.seed(expiresIn: -10)
        let theirs = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 3600, account: "acct-theirs"), refreshToken: "rt-9", idToken: nil, now: w.now)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        var reads = 0
        r.during = {
            w.file.beforeRead = {
                reads += 1
                if reads == 3 { try? w.file.save(theirs, for: w.profile) }
            }
        }
        let started = Clock.monotonicMillis()
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(fresh.credential == theirs.served && !fresh.refreshed)
        #expect(try w.stored() == theirs)
        #expect(try w.stored()?.state.rejection == nil)
        #expect(reads >= 3)
        #expect(Clock.monotonicMillis() - started < 2000, "it waited for the whole grace although the save had landed")
        #expect(r.seen.count == 1)
    }

    /// Nobody is saving: after the bounded wait the credential is marked rejected (exit 3).
    @Test func aReusedAnswerWithNoSaveInFlightIsMarkedAfterABoundedWait() throws {
        let w = OwnerWorld()
        w.reuseGrace = 0.5
        try w.seed(expiresIn: -10)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        let started = Clock.monotonicMillis()
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_reused")) {
            try w.owner(r).fresh(Freshness())
        }
        let waited = Clock.monotonicMillis() - started
        #expect(waited >= 500 && waited < 2000, "waited \(waited) ms")
        #expect(try w.stored()?.state.rejection == "refresh_token_reused")
    }

    /// Other permanent answers (expired, invalidated) have no writer to wait for: marked at once.
    @Test func anExpiredAnswerIsMarkedWithoutWaiting() throws {
        let w = OwnerWorld()
        w.reuseGrace = 5
        try w.seed(expiresIn: -10)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_expired")])
        let started = Clock.monotonicMillis()
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_expired")) {
            try w.owner(r).fresh(Freshness())
        }
        #expect(Clock.monotonicMillis() - started < 1000)
        #expect(try w.stored()?.state.rejection == "refresh_token_expired")
    }

    /// The other writer's save lands while we wait, but it erased the credential: erased stays erased.
    @Test func aReusedAnswerThenAnErasureIsNotSignedIn() throws {
        let w = OwnerWorld()
        w.reuseGrace = 2.5
        try w.seed(expiresIn: -10)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        r.during = { w.file.beforeRead = { _ = try? w.file.delete(w.profile) } }
        #expect(throws: CredentialError.notSignedIn(profile: "default")) { try w.owner(r).fresh(Freshness()) }
        #expect(try w.stored() == nil)
    }
}

@Suite struct CredentialOwnerChangeTests {
    @Test func replaceRemovesTheCopyInTheOtherStoreEvenForAnExplicitStore() throws {
        let w = OwnerWorld()
        w.choice = .secretService
        try w.seed(expiresIn: 3600, in: w.file)
        let newer = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 3600, account: "acct-new"), refreshToken: "rt-new", idToken: nil, now: w.now)
        var notices: [String] = []
        let store = try w.owner(ScriptedRefresher([])).replace(with: newer) { notices.append($0) }
        #expect(store === w.secretService)
        #expect(try w.stored(w.secretService) == newer)
        #expect(try w.file.readBytes(w.profile) == nil)
        #expect(notices.isEmpty)
    }

    @Test func eraseRemovesEveryCopyDamagedIncludedAndRevokesOnce() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 3600, in: w.secretService)
        try w.file.write(w.profile, bytes: Array("not a document".utf8))
        var revoked: [SecretToken] = []
        let erasure = try w.owner(ScriptedRefresher([])).erase(revoke: { revoked.append($0); return nil })
        #expect(erasure.removed.map(\.kind) == [.secretService, .file])
        #expect(revoked == ["rt-0"])
        #expect(try w.secretService.readBytes(w.profile) == nil && w.file.readBytes(w.profile) == nil)
        // Erasing what is already gone is no error.
        #expect(try w.owner(ScriptedRefresher([])).erase(revoke: nil).removed.isEmpty)
    }

    @Test func eraseOfACodexImportDoesNotRevoke() throws {
        let w = OwnerWorld()
        var doc = try w.seed(expiresIn: 3600)
        doc.origin = .codex
        try w.file.save(doc, for: w.profile)
        var revoked: [SecretToken] = []
        let erasure = try w.owner(ScriptedRefresher([])).erase(revoke: { revoked.append($0); return nil })
        #expect(revoked.isEmpty)
        #expect(erasure.notices == ["notice: the refresh token was not revoked: it came from Codex, which may still use the same session (sign out there with: codex logout)"])
        #expect(try w.file.readBytes(w.profile) == nil)
    }

    @Test func eraseNamesTheCopyItCouldNotRemoveAndRemovesTheRest() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 3600, in: w.secretService)
        try w.seed(expiresIn: 3600, in: w.file)
        w.secretService.locked = true
        #expect(throws: CredentialError.keyringLocked("erased the copy in memory:file:default, but the copy in memory:secret-service:default remains: the test keyring is locked")) {
            try w.owner(ScriptedRefresher([])).erase(revoke: nil)
        }
        #expect(try w.file.readBytes(w.profile) == nil)
        w.secretService.locked = false
        #expect(try w.secretService.readBytes(w.profile) != nil)
    }

    @Test func aKeyringThatDoesNotAnswerIsNeverNotSignedIn() throws {
        let w = OwnerWorld()
        w.choice = .auto
        try w.seed(expiresIn: 3600, in: w.secretService)
        w.secretService.notAnswering = true
        #expect(throws: CredentialError.storeNotAnswering("the test keyring did not answer")) { try w.owner(ScriptedRefresher([])).fresh(Freshness()) }
        #expect(throws: CredentialError.storeNotAnswering("the copy in memory:secret-service:default remains: the test keyring did not answer")) {
            try w.owner(ScriptedRefresher([])).erase(revoke: nil)
        }
        w.secretService.notAnswering = false
        #expect(try w.secretService.readBytes(w.profile) != nil)
    }

    @Test func changesAreObservedUnderTheLock() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 100)
        let owner = w.owner(ScriptedRefresher([rotation(expiresIn: 3600)]))
        var seen: [String] = []
        owner.observe = { change in
            switch change {
            case .stored(let d, let store): seen.append("stored \(d.refreshToken.unsafeString()) in \(store.kind.rawValue)")
            case .removed(let store): seen.append("removed from \(store.kind.rawValue)")
            case .withdrawn: seen.append("withdrawn")
            }
        }
        _ = try owner.fresh(Freshness())
        _ = try owner.erase(revoke: nil)
        #expect(seen == ["stored rt-1 in file", "removed from file", "withdrawn"])
    }
}
