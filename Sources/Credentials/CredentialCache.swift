import AccessCache
import CredentialCore
import Stores

/// The access cache as the one owner uses it (man page ACCESS CACHE): entries keyed by the store a
/// document lives in (the Secret Service's bus, or the encrypted file's real path, both
/// normalised by `StoreIdentity`) and the profile. `get` answers from a fresh entry without
/// reading the store, but only after the checks a store read would make and that cost no
/// decryption (`storeCheck`: for the file store, the file's owner and mode), and only while the
/// store's copy is the version the entry was filled from (for the file store, the same file:
/// a change made where the entry could not be revoked — another user namespace, a process
/// whose keyring calls are filtered, another program — is seen at once); every change the owner
/// makes removes the profile's entries under every identity and writes the current one before
/// the profile's lock is released.
package final class CredentialCache {
    let keyring: KeyringCache
    /// The identity of the profile's copy in a kind of store; nil when that store is not cached
    /// (no session bus, no data directory).
    let identity: (StoreKind, Profile) -> StoreIdentity?
    /// The version of the profile's copy in that store when a store read of it would pass the
    /// checks made before any decryption (the file store: the file and its key are this user's
    /// regular files that group and others cannot read; its version is the file's
    /// `dev:ino:size:mtime`), empty for a store whose entries are not bound to a version (the
    /// Secret Service), nil when a check refuses: a hit then is a miss, so the store read itself
    /// reports the exact error (exit 5).
    let storeCheck: (StoreKind, Profile) -> [UInt8]?
    /// The identity `identity` last gave for the profile's copy, found without touching the file
    /// system (`RememberedFileIdentities`); nil when there is none. Tried first, and only for a
    /// copy bound to a version, where a stale identity can miss but never answer wrongly.
    let rememberedIdentity: (StoreKind, Profile) -> StoreIdentity?

    package init(keyring: KeyringCache, identity: @escaping (StoreKind, Profile) -> StoreIdentity?,
                 storeCheck: @escaping (StoreKind, Profile) -> [UInt8]? = { _, _ in [] },
                 rememberedIdentity: @escaping (StoreKind, Profile) -> StoreIdentity? = { _, _ in nil }) {
        self.keyring = keyring
        self.identity = identity
        self.storeCheck = storeCheck
        self.rememberedIdentity = rememberedIdentity
    }

    /// False when lookups cannot answer (cache off, refused by the kernel, entries unreadable
    /// here): then a miss need not be filled under the lock.
    package var canServe: Bool { keyring.canServe }

    /// The profile's entry for `kind`, when there is one.
    package func entry(_ kind: StoreKind, _ profile: Profile) -> AccessCacheEntry? {
        guard let version = storeCheck(kind, profile) else { return nil }
        if !version.isEmpty, let remembered = rememberedIdentity(kind, profile),
           let hit = keyring.lookup(remembered, profile, storeVersion: version) {
            return hit
        }
        guard let id = identity(kind, profile) else { return nil }
        return keyring.lookup(id, profile, storeVersion: version)
    }

    /// Mirrors one change of the owner's: the current entry written (or removed, for a document
    /// that must not be served), then the profile's entries under every other identity removed,
    /// so a store named two ways is one store.
    package func apply(_ change: CredentialChange, _ profile: Profile) {
        switch change {
        case .stored(let document, let store):
            let id = identity(store.kind, profile)
            if let id { update(to: document, store.kind, id, profile) }
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
        if let id = identity(store.kind, profile) { update(to: document, store.kind, id, profile) }
    }

    /// The entry for `document`, bound to the version of the store's copy as it stands now (under
    /// the profile's lock, the one just written or read); removed when a check refuses the copy.
    private func update(to document: TokenDocument, _ kind: StoreKind, _ id: StoreIdentity, _ profile: Profile) {
        guard let version = storeCheck(kind, profile) else { return keyring.revoke(id, profile) }
        keyring.update(to: document, id, profile, storeVersion: version)
    }
}
