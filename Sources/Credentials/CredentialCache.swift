import AccessCache
import CredentialCore
import Stores

/// The access cache as the one owner uses it (man page ACCESS CACHE): entries keyed by the store a
/// document lives in (the Secret Service's bus, or the encrypted file's real path, both
/// normalised by `StoreIdentity`) and the profile. `get` answers from a fresh entry without
/// reading the store, but only after the checks a store read would make and that cost no
/// decryption (`storeCheck`: for the file store, the file's owner and mode); every change the
/// owner makes removes the profile's entries under every identity and writes the current one
/// before the profile's lock is released.
package final class CredentialCache {
    let keyring: KeyringCache
    /// The identity of the profile's copy in a kind of store; nil when that store is not cached
    /// (no session bus, no data directory).
    let identity: (StoreKind, Profile) -> StoreIdentity?
    /// True when a store read of the profile's copy in that store would pass the checks made
    /// before any decryption (the file store: the file and its key are this user's regular files
    /// that group and others cannot read). A hit that fails it is a miss, so the store read
    /// itself reports the exact error (exit 5).
    let storeCheck: (StoreKind, Profile) -> Bool

    package init(keyring: KeyringCache, identity: @escaping (StoreKind, Profile) -> StoreIdentity?,
                 storeCheck: @escaping (StoreKind, Profile) -> Bool = { _, _ in true }) {
        self.keyring = keyring
        self.identity = identity
        self.storeCheck = storeCheck
    }

    /// False when lookups cannot answer (cache off, refused by the kernel, entries unreadable
    /// here): then a miss need not be filled under the lock.
    package var canServe: Bool { keyring.canServe }

    /// The profile's entry for `kind`, when there is one.
    package func entry(_ kind: StoreKind, _ profile: Profile) -> AccessCacheEntry? {
        guard let id = identity(kind, profile), let entry = keyring.lookup(id, profile) else { return nil }
        return storeCheck(kind, profile) ? entry : nil
    }

    /// Mirrors one change of the owner's: the current entry written (or removed, for a document
    /// that must not be served), then the profile's entries under every other identity removed,
    /// so a store named two ways is one store.
    package func apply(_ change: CredentialChange, _ profile: Profile) {
        switch change {
        case .stored(let document, let store):
            let id = identity(store.kind, profile)
            if let id { keyring.update(to: document, id, profile) }
            let served = AccessCacheEntry(cacheable: document) != nil
            keyring.revokeEverywhere(profile, keeping: served ? id : nil)
        case .removed(let store):
            // What the other kind of store holds is unchanged by this removal: its entry stays
            // (a new credential saved there just before, whose older copy here is now removed).
            let other = StoreKind.allCases.first { $0 != store.kind }
            keyring.revokeEverywhere(profile, keeping: other.flatMap { identity($0, profile) })
        case .withdrawn:
            keyring.revokeEverywhere(profile)
        }
    }

    /// A miss filled from what the store holds: no change, so other identities' entries stay.
    package func fill(_ document: TokenDocument, from store: CredentialStore, _ profile: Profile) {
        if let id = identity(store.kind, profile) { keyring.update(to: document, id, profile) }
    }
}
