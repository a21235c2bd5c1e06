import Foundation
import Testing
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
import Secrets
import TestSupport

/// The idle rule (man page, REFRESH): a credential last refreshed 8 days ago or more is refreshed
/// whatever its expiry; one stored without a known last refresh is counted from when it was stored.
@Suite struct IdleRefreshTests {
    static let day: Int64 = 86400

    @Test func aCredentialIdleForNineDaysIsRefreshedOnceThenLeftAlone() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 5 * Self.day, refreshedAgo: 9 * Self.day)
        let r = ScriptedRefresher([rotation(expiresIn: 10 * Self.day), rotation(expiresIn: 10 * Self.day, refresh: "rt-2")])
        let first = try w.owner(r).fresh(Freshness())
        #expect(r.seen == ["rt-0"] && first.refreshed)
        #expect(try w.stored()?.lastRefresh == w.now)
        let second = try w.owner(r).fresh(Freshness())
        #expect(r.seen.count == 1 && !second.refreshed, "refreshed again: \(r.seen)")
    }

    @Test func oneDayIdleIsNotRefreshed() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 5 * Self.day, refreshedAgo: Self.day)
        let r = ScriptedRefresher([rotation(expiresIn: 10 * Self.day)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty && fresh.credential == doc.served)
    }

    @Test func theRuleStartsAtExactlyEightDays() {
        let now: Int64 = 1_800_000_000
        var d = TokenDocument(accessToken: "a", refreshToken: "r", expiresAt: now + 5 * Self.day, lastRefresh: now - 8 * Self.day + 1)
        #expect(RefreshPolicy.decide(d, Freshness(), now: now) == .use(notice: nil))
        d.lastRefresh = now - 8 * Self.day
        #expect(RefreshPolicy.decide(d, Freshness(), now: now) == .refresh)
        // A last refresh in the future (the clock was set back) is not idle.
        d.lastRefresh = now + Self.day
        #expect(RefreshPolicy.decide(d, Freshness(), now: now) == .use(notice: nil))
    }

    @Test func storedWithoutALastRefreshCountsFromTheStore() throws {
        let w = OwnerWorld()
        var bare = TokenDocument.fromTokens(accessToken: jwt(exp: w.now + 5 * Self.day), refreshToken: "rt-0", idToken: nil, now: w.now)
        bare.lastRefresh = 0
        let r = ScriptedRefresher([rotation(expiresIn: 10 * Self.day)])
        _ = try w.owner(r).replace(with: bare) { _ in }
        let stored = try #require(try w.stored())
        #expect(stored.lastRefresh == 0 && stored.storedAt == w.now)
        _ = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty, "a credential just stored was refreshed at once")

        // Nine days after it was stored, the rule applies.
        var old = stored
        old.storedAt = w.now - 9 * Self.day
        try w.file.save(old, for: w.profile)
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen == ["rt-0"] && fresh.refreshed)
        let rotated = try #require(try w.stored())
        #expect(rotated.lastRefresh == w.now && rotated.storedAt == 0)
    }

    @Test func aDocumentThatKnowsNeitherTimeIsLeftAlone() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 5 * Self.day, refreshedAgo: nil)
        let r = ScriptedRefresher([rotation(expiresIn: 10 * Self.day)])
        _ = try w.owner(r).fresh(Freshness())
        #expect(r.seen.isEmpty)
    }

    @Test func anIdleRefreshThatFailsPrintsTheStoredTokenWithANotice() throws {
        let w = OwnerWorld()
        let doc = try w.seed(expiresIn: 5 * Self.day, refreshedAgo: 9 * Self.day)
        let r = ScriptedRefresher([.unavailable(reason: "HTTP 503", retryAfter: nil)])
        let fresh = try w.owner(r).fresh(Freshness())
        #expect(r.seen.count == 1 && !fresh.refreshed && fresh.credential == doc.served)
        #expect(fresh.notices.count == 1 && fresh.notices[0].hasPrefix("notice: could not refresh the token: HTTP 503; printing the stored one"))
    }

    @Test func nextRefreshIsTheEarlierOfExpiryAndTheIdleDay() throws {
        let now: Int64 = 1_800_000_000
        var d = TokenDocument(accessToken: "a", refreshToken: "r", expiresAt: now + 10 * Self.day, lastRefresh: now - Self.day)
        #expect(RefreshPolicy.nextRefresh(d) == now + 7 * Self.day)
        d.state = .signedIn(try #require(AccessGrant(token: "a", expiresAt: now + 3600)))
        #expect(RefreshPolicy.nextRefresh(d) == now + 3600 - 300)
        d.lastRefresh = 0
        d.storedAt = now - 7 * Self.day
        d.state = .signedIn(try #require(AccessGrant(token: "a", expiresAt: now + 10 * Self.day)))
        #expect(RefreshPolicy.nextRefresh(d) == now + Self.day)
        d.storedAt = 0
        #expect(RefreshPolicy.nextRefresh(d) == now + 10 * Self.day - 300)
    }

    // MARK: what `refresh` asks of the owner: a refresh now, and its failure is an error

    static let refreshVerb = Freshness(forceRefresh: true, requiredTTL: .max)

    @Test func theRefreshVerbsFailuresAreErrorsNotTheStoredToken() throws {
        let w = OwnerWorld()
        try w.seed(expiresIn: 5 * Self.day)
        #expect(throws: CredentialError.temporary("could not refresh the token: HTTP 503")) {
            try w.owner(ScriptedRefresher([.unavailable(reason: "HTTP 503", retryAfter: nil)])).fresh(Self.refreshVerb)
        }
        let w2 = OwnerWorld()
        try w2.seed(expiresIn: 5 * Self.day)
        do {
            _ = try w2.owner(ScriptedRefresher([.rejected(code: "refresh_token_reused")])).fresh(Self.refreshVerb)
            Issue.record("a rejected refresh token was no error")
        } catch let e as CredentialError {
            #expect(e.exitCode == 3)
        }
        // A fresh token is refreshed all the same.
        let w3 = OwnerWorld()
        try w3.seed(expiresIn: 5 * Self.day, refreshedAgo: 3600)
        let r = ScriptedRefresher([rotation(expiresIn: 10 * Self.day)])
        #expect(try w3.owner(r).fresh(Self.refreshVerb).refreshed && r.seen == ["rt-0"])
    }
}
