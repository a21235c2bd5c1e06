import AccessCache
import CredentialCore
import Stores

/// The access cache as the one owner uses it (SPEC "Access cache"): entries keyed by the store a
/// document lives in (the Secret Service's bus, or the encrypted file's path) and the profile.
/// `get` answers from a fresh entry without touching the store; every change the owner makes
/// updates or removes the entry before the profile's lock is released.
package final class CredentialCache {
    let keyring: KeyringCache
    /// The identity of the profile's copy in a kind of store; nil when that store is not cached
    /// (no session bus, no data directory).
    let identity: (StoreKind, Profile) -> StoreIdentity?

    package init(keyring: KeyringCache, identity: @escaping (StoreKind, Profile) -> StoreIdentity?) {
        self.keyring = keyring
        self.identity = identity
    }

    /// False when lookups cannot answer (cache off, refused by the kernel, entries unreadable
    /// here): then a miss need not be filled under the lock.
    package var canServe: Bool { keyring.canServe }

    /// The profile's entry for `kind`, when there is one.
    package func entry(_ kind: StoreKind, _ profile: Profile) -> AccessCacheEntry? {
        guard let id = identity(kind, profile) else { return nil }
        return keyring.lookup(id, profile)
    }

    /// Mirrors one change of the owner's.
    package func apply(_ change: CredentialChange, _ profile: Profile) {
        switch change {
        case .stored(let document, let store):
            if let id = identity(store.kind, profile) { keyring.update(to: document, id, profile) }
        case .removed(let store):
            revoke(store.kind, profile)
        }
    }

    package func revoke(_ kind: StoreKind, _ profile: Profile) {
        if let id = identity(kind, profile) { keyring.revoke(id, profile) }
    }
}

extension AccessCacheEntry {
    /// The entry as a document to answer from: everything `get` prints, no refresh token.
    var document: TokenDocument {
        TokenDocument(accessToken: accessToken, refreshToken: SecretToken(), idToken: idToken, accountId: accountId,
                      expiresAt: expiresAt, lastRefresh: lastRefresh, email: email, plan: plan, storedAt: storedAt)
    }
}
