import Secrets

/// The times every decision about a credential reads, stored (`TokenDocument`) or served
/// (`ServedCredential`): the idle rule and the granted lifetime are computed once, here.
public protocol CredentialTimes {
    /// Unix seconds when the access token expires (0 when unknown or dropped).
    var expiresAt: Int64 { get }
    /// Unix seconds of the last refresh (or sign-in); 0 when unknown.
    var lastRefresh: Int64 { get }
    /// Unix seconds when a credential without a known last refresh was stored; 0 otherwise.
    var storedAt: Int64 { get }
}

extension CredentialTimes {
    /// How long the issuer made this access token valid for, when the credential says: the span
    /// from its receipt (`lastRefresh`) to its expiry. Nil when either is unknown.
    public var grantedLifetime: Int64? {
        guard lastRefresh > 0, expiresAt > lastRefresh else { return nil }
        return expiresAt - lastRefresh
    }

    /// What the idle rule counts from: the last refresh, else when the credential was stored
    /// without one; nil when neither is known (such a credential is never refreshed for idleness).
    public var idleSince: Int64? {
        if lastRefresh > 0 { return lastRefresh }
        return storedAt > 0 ? storedAt : nil
    }

    /// When the idle rule will ask for a refresh: `idleSince` + 8 days; nil when unknown.
    public var idleRefreshDue: Int64? {
        idleSince.map { $0 &+ TokenDocument.idleRefreshInterval }
    }

    /// True when the idle rule asks for a refresh at `now`.
    public func isIdle(now: Int64) -> Bool {
        guard let due = idleRefreshDue else { return false }
        return now >= due
    }
}

/// What is served to a caller (man page, `get`): everything `get`'s formats, git's and docker's
/// answers, `exec`, `usage`, the broker's token answer and `status` take from a credential, and
/// no refresh token — so whatever is printed cannot hold one. An access-cache entry is one
/// (`AccessCacheEntry`), and so is client mode's answer from the broker; the owner serves the
/// stored document as one (`TokenDocument.served`).
public struct ServedCredential: CredentialTimes, Equatable, Sendable {
    public var accessToken: SecretToken
    public var accountId: String
    public var idToken: SecretToken
    /// Unix seconds, as in `TokenDocument.expiresAt`.
    public var expiresAt: Int64
    /// Unix seconds, as in `TokenDocument.lastRefresh` and `.storedAt` (0: unknown): what the
    /// idle rule counts from, and what `status` shows.
    public var lastRefresh: Int64
    public var storedAt: Int64
    public var email: String
    public var plan: String

    public init(accessToken: SecretToken, accountId: String = "", idToken: SecretToken = SecretToken(), expiresAt: Int64 = 0,
                lastRefresh: Int64 = 0, storedAt: Int64 = 0, email: String = "", plan: String = "") {
        self.accessToken = accessToken; self.accountId = accountId; self.idToken = idToken
        self.expiresAt = expiresAt; self.lastRefresh = lastRefresh; self.storedAt = storedAt
        self.email = email; self.plan = plan
    }
}

extension TokenDocument {
    /// What is served of this document: its access token (whatever the refresh token's
    /// standing) and the rest but the refresh token; nil when it has none (dropped).
    public var served: ServedCredential? {
        guard let access = state.access else { return nil }
        return ServedCredential(accessToken: access.token, accountId: accountId, idToken: idToken, expiresAt: access.expiresAt,
                                lastRefresh: lastRefresh, storedAt: storedAt, email: email, plan: plan)
    }
}
