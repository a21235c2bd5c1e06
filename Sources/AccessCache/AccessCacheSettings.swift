import CredentialCore

/// Whether the access cache is used and how long an entry may be served (man page ACCESS CACHE,
/// `--no-cache`, `CHATGPT_CREDENTIAL_CACHE`, `CHATGPT_CREDENTIAL_CACHE_TTL`).
public struct AccessCacheSettings: Sendable, Equatable {
    public static let defaultTTL: Int64 = 300
    /// What `CHATGPT_CREDENTIAL_CACHE_TTL` may say (read by `CLI/Settings.swift`).
    public static let ttlRange: ClosedRange<Int64> = 1...3600
    /// An entry disappears this long before its access token expires: the refresh margin of
    /// man page REFRESH, so a cached token is never one that `get` would refresh.
    public static let expiryMargin: Int64 = TokenDocument.refreshMargin

    /// Off: this process neither reads nor writes entries (a change it makes still removes the
    /// profile's entry, so that other processes do not go on serving what it replaced).
    public var enabled: Bool
    /// Seconds an entry may be served, within `ttlRange`.
    public var ttl: Int64

    public init(enabled: Bool = true, ttl: Int64 = AccessCacheSettings.defaultTTL) {
        self.enabled = enabled
        self.ttl = ttl
    }

    /// The kernel timeout for an entry whose access token expires at `expiresAt`:
    /// `min(ttl, expiresAt − 300 s − now)`. Zero or less means "do not cache".
    public func kernelTimeout(expiresAt: Int64, now: Int64) -> Int64 {
        // expiresAt comes from a JWT claim: subtracting must not trap on a hostile value.
        let (remaining, overflow) = expiresAt.subtractingReportingOverflow(now)
        if overflow { return expiresAt < now ? 0 : ttl }
        guard remaining > Self.expiryMargin else { return 0 }
        return min(ttl, remaining - Self.expiryMargin)
    }
}
