import CredentialCore
import Age
import Secrets

/// Where tokens live. Each store keeps one opaque secret (the serialized `TokenDocument`) per
/// profile; parsing and policy live above it. Stores report typed `CredentialError`s:
/// `keyringLocked`, `storeUnavailable` (not there at all), `storeNotAnswering` (there, but past its
/// deadline), `storeCorrupt`, `wrongKey`, `permissionsTooOpen`, `storeFailure`.
/// This is the read half, public. The write half (`CredentialStoreWriting`) is SPI: only a file
/// that says `@_spi(CredentialOwner) import Stores` sees it, and only the owner's transaction
/// (`Credentials/CredentialTransaction.swift`) does, so nothing else can change what a store holds.
public protocol CredentialStore: AnyObject {
    var kind: StoreKind { get }
    /// Human-readable location for messages, e.g. "the Secret Service" or a file path.
    func location(for profile: Profile) -> String
    /// The stored secret (in guarded memory), or nil when this store holds nothing for the
    /// profile. A locked keyring throws `keyringLocked`; it is never reported as nil.
    func read(_ profile: Profile) throws -> SecretBytes?
    /// `read`, and in `version` the version of exactly the bytes returned (what `version` would
    /// have said at that moment; nil with nil): one read, so a writer that slips in after it is
    /// seen by the next check instead of being taken for what was read (man page, THE ONE OWNER).
    func read(_ profile: Profile, version: inout [UInt8]?) throws -> SecretBytes?
    /// Every profile this store holds something for.
    func profiles() throws -> [String]
    /// An opaque value that changes whenever the profile's stored secret changes, or nil when
    /// nothing is stored; cheap (no decryption), so a writer can tell that what it read under the
    /// lock is still what is there.
    func version(_ profile: Profile) throws -> [UInt8]?
    /// True when reading the profile costs far more than a cache lookup (see the extension).
    func isExpensiveToRead(_ profile: Profile) -> Bool
    /// The file that holds (or would hold) the profile's secret, or nil for a store that keeps
    /// none (see the extension): what `--store file` advice checks for (man page, STORES).
    func path(for profile: Profile) -> String?
    /// The D-Bus object path of the Secret Service collection holding the profile's item, or nil
    /// for a store without collections (see the extension); `StoreCollection.isDurable` says
    /// whether it outlives the keyring daemon. For `status`.
    func collection(of profile: Profile) throws -> String?
}

extension CredentialStore {
    /// Default: false. True when reading the profile costs far more than a lookup (a passphrase: one scrypt,
    /// ~0.7 s and 268 MB): then a crowd of cold `get`s waits for one process to fill the access
    /// cache instead of each reading the store.
    public func isExpensiveToRead(_ profile: Profile) -> Bool { false }
    /// Default: nil, no file (the Secret Service, a test double).
    public func path(for profile: Profile) -> String? { nil }
    /// Default: nil, no collections (the file store, a test double).
    public func collection(of profile: Profile) throws -> String? { nil }
}

/// A Secret Service collection, by its D-Bus object path (`CredentialStore.collection(of:)`).
public enum StoreCollection {
    /// gnome-keyring's collection that lives only in the daemon's memory; a headless daemon
    /// without a login keyring may make it the default.
    public static let inMemory = "/org/freedesktop/secrets/collection/session"

    /// False for a collection whose items are lost when the keyring daemon restarts (man page,
    /// STORES): under `auto` nothing new is stored there, and `status` says so.
    public static func isDurable(_ path: String) -> Bool { path != inMemory }
}

/// The write half of a store, seen only by the owner's transaction (see `CredentialStore`).
@_spi(CredentialOwner)
public protocol CredentialStoreWriting: CredentialStore {
    /// Replaces (never adds to) the profile's secret, atomically.
    func write(_ profile: Profile, secret: borrowing SecretBytes) throws
    /// Removes the profile's secret; returns false when there was none.
    @discardableResult func delete(_ profile: Profile) throws -> Bool
    /// Makes sure a secret of about `size` bytes can be written for the profile right now, before
    /// anything irreversible happens (man page, REFRESH): the file store reserves the
    /// room, the Secret Service must answer and be unlocked. Throws what a write would throw.
    func prepareWrite(_ profile: Profile, size: Int) throws -> PreparedWrite
}

/// A write a store has made sure of (`CredentialStoreWriting.prepareWrite`). Dropped unused, it
/// releases whatever it held.
@_spi(CredentialOwner)
public protocol PreparedWrite: AnyObject {
    func commit(_ secret: borrowing SecretBytes) throws
}

public enum StoreKind: String, Sendable, CaseIterable {
    case secretService = "secret-service"
    case file = "file"
}

public enum StoreChoice: String, Sendable, CaseIterable {
    case auto
    case secretService = "secret-service"
    case file
}

extension CredentialStore {
    /// Reads and parses the profile's document. What the store read becomes the buffer its
    /// tokens live in (no copy).
    public func load(_ profile: Profile) throws -> TokenDocument? {
        guard let bytes = try read(profile) else { return nil }
        return try TokenDocument.parse(bytes, origin: location(for: profile), profile: profile)
    }

    /// `load`, with the version of the bytes the document was parsed from.
    public func loadVersioned(_ profile: Profile) throws -> (document: TokenDocument, version: [UInt8])? {
        var version: [UInt8]?
        guard let bytes = try read(profile, version: &version), let version else { return nil }
        return (try TokenDocument.parse(bytes, origin: location(for: profile), profile: profile), version)
    }
}

@_spi(CredentialOwner)
extension CredentialStoreWriting {
    public func save(_ document: TokenDocument, for profile: Profile) throws {
        try write(profile, secret: document.serialized())
    }

    /// Saves through a `prepareWrite` reservation.
    public func save(_ document: TokenDocument, through prepared: PreparedWrite) throws {
        try prepared.commit(document.serialized())
    }
}
