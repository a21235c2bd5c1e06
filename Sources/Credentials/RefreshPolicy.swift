import CredentialCore
import OAuth

/// When a stored access token must be refreshed, and when one that could not be refreshed may
/// still be printed (man page REFRESH). Pure: no I/O, no clock of its own.
package enum RefreshPolicy {
    /// Refresh when the token expires within this many seconds (or `--min-ttl`, when longer).
    package static let margin = TokenDocument.refreshMargin
    /// No refresh loops: a token refreshed less than this long ago is not refreshed again
    /// (unless `--force-refresh`).
    package static let minimumInterval: Int64 = 60
    /// Idle sign-ins: refreshed once the last refresh is this old, whatever the expiry.
    package static let idleInterval = TokenDocument.idleRefreshInterval

    package enum Decision: Equatable {
        /// Print it; `notice` says why it falls short of what was asked, when it does.
        case use(notice: String?)
        case refresh
    }

    package static func decide(_ d: TokenDocument, _ need: Freshness, now: Int64) -> Decision {
        // No access token (dropped, by git's `erase` or before a rejection) or a forced refresh:
        // refresh. A rejected refresh token is the caller's to handle (it is never spent again).
        guard let access = d.state.access, !need.forceRefresh else { return .refresh }
        // The idle rule (man page, REFRESH): counted from the last refresh, or from when a
        // credential without one was stored; a document that knows neither is left alone. It
        // cannot loop: a refresh resets the count, and 8 days are far beyond the 60 s guard.
        if d.isIdle(now: now) { return .refresh }
        let remaining = access.expiresAt - now
        let wanted = max(margin, need.minTTL)
        // When the issuer grants tokens shorter than what was asked, no refresh can meet the
        // request: refreshing again would only spend refresh tokens. The usual margin applies then.
        let lifetime = d.grantedLifetime
        let unattainable = lifetime.map { wanted > $0 } ?? false
        if remaining >= (unattainable ? margin : wanted) {
            guard remaining < wanted, let lifetime else { return .use(notice: nil) }
            return .use(notice: shortLifetimeNotice(lifetime: lifetime, wanted: wanted, remaining: remaining))
        }
        if d.lastRefresh > 0, now - d.lastRefresh < minimumInterval, now >= d.lastRefresh {
            return .use(notice: "notice: this token was refreshed \(now - d.lastRefresh) s ago and is not refreshed again within \(minimumInterval) s (--force-refresh does); it \(TimeSpan.expiry(remaining))")
        }
        return .refresh
    }

    /// After a refresh in this process: a notice when even the new token falls short of the request.
    package static func afterRefresh(_ d: some CredentialTimes, _ need: Freshness, now: Int64) -> String? {
        let wanted = max(margin, need.minTTL)
        let remaining = d.expiresAt - now
        guard remaining < wanted else { return nil }
        return shortLifetimeNotice(lifetime: d.grantedLifetime ?? remaining, wanted: wanted, remaining: remaining)
    }

    static func shortLifetimeNotice(lifetime: Int64, wanted: Int64, remaining: Int64) -> String {
        "notice: the issuer grants tokens valid for \(TimeSpan.describe(lifetime)), less than the \(wanted) s asked for; printing this one, which \(TimeSpan.expiry(remaining)); it is not refreshed again before the usual \(margin) s margin"
    }

    /// When the next refresh is due without `--min-ttl` or `--force-refresh`: the earlier of the
    /// expiry less the margin and the idle rule's day (what `status` shows as `next_refresh`).
    package static func nextRefresh(_ d: some CredentialTimes) -> Int64 {
        let byExpiry = d.expiresAt &- margin
        guard let idle = d.idleRefreshDue else { return byExpiry }
        return min(byExpiry, idle)
    }

    /// Whether a token that could not be refreshed is still good enough to print: at least
    /// `--min-ttl` seconds left when one was given, else simply not yet expired.
    package static func stillUsable(_ d: TokenDocument, _ need: Freshness, now: Int64) -> Bool {
        guard let access = d.state.access else { return false }
        if let required = need.requiredTTL { return access.expiresAt - now >= required }
        return access.expiresAt > now
    }
}
