import Secrets

/// An access token the issuer granted and when it expires: never empty (a token that is not
/// there is no `AccessGrant`, it is a state of its own; see `CredentialState`).
public struct AccessGrant: Equatable, Sendable {
    public let token: SecretToken
    /// Unix seconds (see `TokenDocument.expiresAt`); 0 when unknown.
    public var expiresAt: Int64

    /// nil for an empty token.
    public init?(token: SecretToken, expiresAt: Int64) {
        guard !token.isEmpty else { return nil }
        self.token = token
        self.expiresAt = expiresAt
    }
}

/// What a stored credential is, as one value the owner decides on (ARCHITECTURE.md, "Rules of
/// thumb"). Exactly the combinations the owner writes: the refresh token is live or rejected, and
/// independently the access token is there or was dropped — git's `erase` drops it from a
/// rejected credential too, and a refresh of a dropped one can be rejected.
///
/// The JSON does not change (man page, STORES): `refresh_rejected` holds the issuer's code, and a
/// dropped access token is stored as an empty `access_token` with `expires_at` 0
/// (`TokenDocument.json`, `.parse`).
public enum CredentialState: Equatable, Sendable {
    /// An access token (fresh or not) and a refresh token the issuer has not refused.
    case signedIn(AccessGrant)
    /// The access token was dropped (a client said it was rejected); the refresh token stays,
    /// so the next `get` refreshes.
    case accessDropped
    /// The issuer refused the refresh token (`code`): no refresh is tried until a new sign-in;
    /// the access token that remains, if any, is served until it expires.
    case refreshRejected(code: String, remaining: AccessGrant?)

    /// The state the stored fields say: `refresh_rejected` when present, and an empty access
    /// token (whatever `expires_at` says) is one that was dropped.
    public init(storedAccessToken token: SecretToken, expiresAt: Int64, refreshRejected: String?) {
        let access = AccessGrant(token: token, expiresAt: expiresAt)
        if let code = refreshRejected {
            self = .refreshRejected(code: code, remaining: access)
        } else {
            self = access.map { .signedIn($0) } ?? .accessDropped
        }
    }

    /// The access token that can still be served, whatever the refresh token's standing.
    public var access: AccessGrant? {
        switch self {
        case .signedIn(let access): return access
        case .accessDropped: return nil
        case .refreshRejected(_, let remaining): return remaining
        }
    }

    /// The issuer's code when it refused the refresh token.
    public var rejection: String? {
        if case .refreshRejected(let code, _) = self { return code }
        return nil
    }

    /// After the issuer refused the refresh token: the access token stays as it is.
    public func rejected(code: String) -> CredentialState {
        .refreshRejected(code: code, remaining: access)
    }

    /// After a client said the access token was rejected: a rejection stays.
    public func droppingAccess() -> CredentialState {
        if let code = rejection { return .refreshRejected(code: code, remaining: nil) }
        return .accessDropped
    }
}

/// Where a stored credential came from: `erase` does not revoke an import whose source may still
/// use the same session (`imported_from`, man page STORES).
public enum CredentialOrigin: Equatable, Sendable {
    case signIn
    case imported(from: String)

    /// Codex's auth.json or keyring item.
    public static let codex = CredentialOrigin.imported(from: "codex")

    /// What `imported_from` holds; nil for a sign-in (the member is not written).
    public var importedFrom: String? {
        if case .imported(let from) = self { return from }
        return nil
    }
}
