import Testing
@testable import CredentialCore
@testable import Secrets
import TestSupport

@Suite struct TokenDocumentTests {
    private func parse(_ text: String) throws -> TokenDocument {
        try TokenDocument.parse(SecretBytes(copying: text.utf8), origin: "test")
    }

    @Test func roundTrip() throws {
        let d = TokenDocument(accessToken: "a.b.c", refreshToken: "rt", idToken: "i.d.t", accountId: "acct",
                              expiresAt: 1_900_000_000, lastRefresh: 1_800_000_000, email: "e@x", plan: "plus")
            .rejected(code: "refresh_token_reused")
        #expect(try TokenDocument.parse(d.serialized(), origin: "test") == d)
    }

    /// A credential stored without a known last refresh keeps when it was stored (the idle
    /// rule counts from it); the member is written only then.
    @Test func storedAtRoundTripsAndIsWrittenOnlyWhenKnown() throws {
        var d = TokenDocument(accessToken: "a.b.c", refreshToken: "rt", expiresAt: 1_900_000_000, storedAt: 1_800_000_000)
        #expect(d.serialized().unsafeString().contains(#""stored_at":"2027-01-15T08:00:00Z""#))
        #expect(try TokenDocument.parse(d.serialized(), origin: "test") == d)
        #expect(d.idleSince == 1_800_000_000 && d.isIdle(now: 1_800_000_000 + 8 * 86400) && !d.isIdle(now: 1_800_000_000 + 8 * 86400 - 1))
        d.lastRefresh = 1_850_000_000 // a known last refresh wins
        #expect(d.idleSince == 1_850_000_000)
        d.storedAt = 0
        #expect(!d.serialized().unsafeString().contains("stored_at"))
        d.lastRefresh = 0
        #expect(d.idleSince == nil && !d.isIdle(now: .max))
    }

    @Test func numericTimesAreRead() throws {
        let d = try parse(#"{"access_token":"a","refresh_token":"r","expires_at":1900000000,"last_refresh":1.8e9}"#)
        #expect(d.expiresAt == 1_900_000_000)
        #expect(d.lastRefresh == 1_800_000_000)
    }

    /// Found by fuzz/targets/token_document (2026-11-29): a stored document whose time is a
    /// number beyond Int64 (`1e300`) crashed the process in `Int64(_:)` instead of reading as
    /// "unknown". A damaged keyring item or file must never crash `get`.
    @Test(arguments: ["1e300", "-1e300", "9.3e18", "-9.3e18", "1e15"])
    func outOfRangeNumericTimeIsUnknown(_ number: String) throws {
        let d = try parse(#"{"access_token":"a","refresh_token":"r","expires_at":"# + number + #","last_refresh":"# + number + "}")
        #expect(d.expiresAt == 0)
        #expect(d.lastRefresh == 0)
    }
}
