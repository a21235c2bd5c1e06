import Testing
@testable import Credentials
@testable import Stores
@testable import OAuth
@testable import CredentialCore
import Secrets
import TestSupport

/// A refresher that answers from a script and counts calls.
final class ScriptedRefresher: TokenRefreshing {
    var answers: [RefreshResult]
    var seen: [String] = []
    init(_ answers: [RefreshResult]) { self.answers = answers }
    func refresh(refreshToken: String) -> RefreshResult {
        seen.append(refreshToken)
        return answers.isEmpty ? .unavailable(reason: "script exhausted") : answers.removeFirst()
    }
}

func jwt(exp: Int64, account: String = "acct-1") -> String {
    let payload = #"{"exp":\#(exp),"email":"a@b.c","https://api.openai.com/auth":{"chatgpt_account_id":"\#(account)","chatgpt_plan_type":"pro"}}"#
    return "eyJhbGciOiJub25lIn0." + Base64.encode(Array(payload.utf8), alphabet: .urlSafe, padded: false) + ".sig"
}

@Suite struct RefreshCoordinatorTests {
    let now: Int64 = 1_800_000_000
    let profile = Profile.default

    func setup(expiresIn: Int64, rejected: String? = nil) throws -> (MemoryStore, TokenDocument) {
        let store = MemoryStore()
        var doc = TokenDocument.fromTokens(accessToken: jwt(exp: now + expiresIn), refreshToken: "rt-0", idToken: nil, now: now)
        doc.refreshRejected = rejected
        try store.save(doc, for: profile)
        return (store, doc)
    }

    func coordinator(_ store: MemoryStore, _ r: ScriptedRefresher) -> RefreshCoordinator {
        RefreshCoordinator(profile: profile, store: store, lockPath: nil, now: { self.now }, refresher: { r })
    }

    @Test func freshTokenMakesNoCall() throws {
        let (store, doc) = try setup(expiresIn: 3600)
        let r = ScriptedRefresher([])
        let fresh = try coordinator(store, r).fresh(doc, options: Freshness())
        #expect(r.seen.isEmpty)
        #expect(fresh.document == doc)
    }

    @Test func expiringTokenRotatesAndPersistsBeforeAnswering() throws {
        let (store, doc) = try setup(expiresIn: 200)
        let newAccess = jwt(exp: now + 3600)
        let r = ScriptedRefresher([.rotated(RefreshedTokens(accessToken: newAccess, refreshToken: "rt-1", idToken: nil))])
        let fresh = try coordinator(store, r).fresh(doc, options: Freshness())
        #expect(r.seen == ["rt-0"])
        #expect(fresh.document.accessToken == newAccess)
        let stored = try store.load(profile)
        #expect(stored?.refreshToken == "rt-1")
        #expect(stored?.accessToken == newAccess)
        #expect(stored?.accountId == "acct-1")
    }

    @Test func minTTLBeyondExpiryForcesRefresh() throws {
        let (store, doc) = try setup(expiresIn: 1000)
        let r = ScriptedRefresher([.rotated(RefreshedTokens(accessToken: jwt(exp: now + 9000), refreshToken: "rt-1", idToken: nil))])
        _ = try coordinator(store, r).fresh(doc, options: Freshness(minTTL: 2000, requiredTTL: 2000))
        #expect(r.seen.count == 1)
    }

    @Test func anotherProcessAlreadyRotated() throws {
        let (store, doc) = try setup(expiresIn: 100)
        let rotated = TokenDocument.fromTokens(accessToken: jwt(exp: now + 3600), refreshToken: "rt-9", idToken: nil, now: now)
        try store.save(rotated, for: profile) // happened while we waited for the lock
        let r = ScriptedRefresher([])
        let fresh = try coordinator(store, r).fresh(doc, options: Freshness())
        #expect(r.seen.isEmpty)
        #expect(fresh.document.refreshToken == "rt-9")
    }

    @Test func permanentRejectionOnExpiredTokenExits3AndKeepsDocument() throws {
        let (store, doc) = try setup(expiresIn: -10)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_reused")])
        #expect(throws: CredentialError.refreshRejected(profile: "default", code: "refresh_token_reused")) {
            try coordinator(store, r).fresh(doc, options: Freshness())
        }
        let kept = try #require(try store.load(profile))
        #expect(kept.refreshToken == "rt-0")
        #expect(kept.refreshRejected == "refresh_token_reused")
        // A second get does not ask the issuer again.
        #expect(throws: CredentialError.self) { try coordinator(store, r).fresh(kept, options: Freshness()) }
        #expect(r.seen.count == 1)
    }

    @Test func permanentRejectionOnValidTokenPrintsWithWarning() throws {
        let (store, doc) = try setup(expiresIn: 120)
        let r = ScriptedRefresher([.rejected(code: "refresh_token_invalidated")])
        let fresh = try coordinator(store, r).fresh(doc, options: Freshness())
        #expect(fresh.document.accessToken == doc.accessToken)
        #expect(fresh.notices.count == 1 && fresh.notices[0].contains("sign in again"))
        // With --min-ttl beyond what is left: exit 3.
        #expect(throws: CredentialError.self) {
            try coordinator(store, r).fresh(try store.load(profile)!, options: Freshness(minTTL: 600, requiredTTL: 600))
        }
        #expect(r.seen.count == 1)
    }

    @Test func transientFailureKeepsDocumentAndFallsBack() throws {
        let (store, doc) = try setup(expiresIn: 120)
        let before = try store.read(profile)
        let r = ScriptedRefresher([.unavailable(reason: "HTTP 500"), .unavailable(reason: "HTTP 500")])
        let fresh = try coordinator(store, r).fresh(doc, options: Freshness())
        #expect(fresh.document == doc)
        #expect(fresh.notices.first?.contains("could not refresh") == true)
        #expect(try store.read(profile) == before)
        #expect(throws: CredentialError.temporary("could not refresh the token: HTTP 500")) {
            try coordinator(store, r).fresh(doc, options: Freshness(minTTL: 600, requiredTTL: 600))
        }
    }

    @Test func droppedAccessTokenRefreshes() throws {
        let (store, _) = try setup(expiresIn: 3600)
        var dropped = try #require(try store.load(profile))
        dropped.accessToken = ""
        dropped.expiresAt = 0
        try store.save(dropped, for: profile)
        let r = ScriptedRefresher([.rotated(RefreshedTokens(accessToken: jwt(exp: now + 3600), refreshToken: "rt-2", idToken: nil))])
        let fresh = try coordinator(store, r).fresh(dropped, options: Freshness())
        #expect(r.seen == ["rt-0"])
        #expect(fresh.document.refreshToken == "rt-2")
    }

    @Test func persistFailureIsReportedAsStoreProblem() throws {
        let (store, doc) = try setup(expiresIn: 10)
        final class FailingWrites: CredentialStore {
            let inner: MemoryStore
            init(_ s: MemoryStore) { inner = s }
            var kind: StoreKind { .file }
            func location(for p: Profile) -> String { "x" }
            func read(_ p: Profile) throws -> [UInt8]? { try inner.read(p) }
            func write(_ p: Profile, secret: [UInt8]) throws { throw CredentialError.storeFailure("disk full") }
            func delete(_ p: Profile) throws -> Bool { false }
            func profiles() throws -> [String] { [] }
        }
        let r = ScriptedRefresher([.rotated(RefreshedTokens(accessToken: jwt(exp: now + 3600), refreshToken: "rt-1", idToken: nil))])
        let c = RefreshCoordinator(profile: profile, store: FailingWrites(store), lockPath: nil, now: { self.now }, refresher: { r })
        do {
            _ = try c.fresh(doc, options: Freshness())
            Issue.record("expected a store failure")
        } catch let e as CredentialError {
            #expect(e.exitCode == 5)
            #expect(e.message.contains("could not save"))
        }
    }
}
