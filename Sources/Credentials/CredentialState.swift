import CredentialCore

/// What a stored credential is, as one value the owner decides on (ARCHITECTURE.md, "The one
/// owner"). Read from the document's stored fields, whose JSON is unchanged: `refresh_rejected`
/// (the issuer's code), an empty access token with `expires_at` 0 (dropped by git's `erase`).
package enum CredentialState: Equatable {
    /// An access token (fresh or not) and a refresh token the issuer has not refused.
    case signedIn
    /// The access token was dropped (a client said it was rejected); the refresh token stays,
    /// so the next `get` refreshes.
    case accessDropped
    /// The issuer refused the refresh token (`code`): no refresh is tried until a new sign-in;
    /// whatever access token remains is served until it expires.
    case refreshRejected(code: String)
}

/// Where a stored credential came from: `erase` does not revoke an import whose source may
/// still use the same session (`imported_from`).
package enum CredentialOrigin: Equatable {
    case signIn
    case imported(from: String)

    /// Codex's auth.json or keyring item.
    package static let codex = CredentialOrigin.imported(from: "codex")
}

extension TokenDocument {
    package var state: CredentialState {
        if let code = refreshRejected { return .refreshRejected(code: code) }
        return hasAccessToken ? .signedIn : .accessDropped
    }

    package var origin: CredentialOrigin {
        importedFrom.map { .imported(from: $0) } ?? .signIn
    }

    /// The document after the issuer refused its refresh token.
    package func rejected(code: String) -> TokenDocument {
        var d = self
        d.refreshRejected = code
        return d
    }

    /// The document without its access token (stored as an empty token expiring at 0); the
    /// refresh token and any rejection stay.
    package func accessDropped() -> TokenDocument {
        var d = self
        d.accessToken = SecretToken()
        d.expiresAt = 0
        return d
    }
}

extension TokenDocument {
    var isRefreshRejected: Bool {
        if case .refreshRejected = state { return true }
        return false
    }
}
