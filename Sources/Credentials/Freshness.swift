import CredentialCore

/// What a caller needs of the access token (man page REFRESH): at least `minTTL` seconds left
/// (never less than `TokenDocument.refreshMargin`), or a refresh now. `requiredTTL` is the --min-ttl the caller
/// gave, if any: what a stored token must still satisfy to be printed when a refresh fails.
/// Without it, "not yet expired" is enough.
public struct Freshness: Sendable, Equatable {
    public var minTTL: Int64
    public var forceRefresh: Bool
    public var requiredTTL: Int64?

    public init(minTTL: Int64 = TokenDocument.refreshMargin, forceRefresh: Bool = false, requiredTTL: Int64? = nil) {
        self.minTTL = minTTL; self.forceRefresh = forceRefresh; self.requiredTTL = requiredTTL
    }
}
