import CredentialCore
@_spi(CredentialOwner) import Stores
import Secrets

/// An in-memory store for unit tests and for composing behaviour without I/O. `locked`,
/// `notAnswering` and `full` make every call fail the way a real store would. (A test double: it
/// keeps its secrets in ordinary arrays.)
public final class MemoryStore: CredentialStore {
    public let kind: StoreKind
    private var items: [String: [UInt8]] = [:]
    private var writes = 0
    public var locked = false
    public var notAnswering = false
    /// Writes fail as on a full disk (reads still work).
    public var full = false
    /// Runs before every read: a scripted writer that acts between two reads of the owner.
    public var beforeRead: () -> Void = {}
    /// Runs before every write: a scripted writer that acts between the owner's check and its write.
    public var beforeWrite: () -> Void = {}
    /// Runs before every `version`: may throw, as a store that stops answering between two calls.
    public var beforeVersion: () throws -> Void = {}
    /// Writes fail (a reservation still succeeds), as a disk that fills up after the reservation.
    public var failWrites = false
    public init(kind: StoreKind = .file) { self.kind = kind }
    public func location(for profile: Profile) -> String { "memory:\(kind.rawValue):\(profile.name)" }

    private func check() throws {
        if locked { throw CredentialError.keyringLocked("the test keyring is locked") }
        if notAnswering { throw CredentialError.storeNotAnswering("the test keyring did not answer") }
    }

    public func read(_ profile: Profile) throws -> SecretBytes? {
        var version: [UInt8]?
        return try read(profile, version: &version)
    }
    public func read(_ profile: Profile, version: inout [UInt8]?) throws -> SecretBytes? {
        version = nil
        beforeRead()
        try check()
        guard let bytes = items[profile.name] else { return nil }
        version = Array("\(profile.name):\(writes)".utf8)
        return SecretBytes(copying: bytes)
    }
    @_spi(CredentialOwner) public func write(_ profile: Profile, secret: borrowing SecretBytes) throws {
        beforeWrite()
        try check()
        if failWrites { throw CredentialError.storeFailure("the test store failed to write") }
        if full { throw CredentialError.storeFailure("the test store is full") }
        items[profile.name] = secret.withUnsafeBytes { Array($0) }
        writes += 1
    }
    @_spi(CredentialOwner) public func delete(_ profile: Profile) throws -> Bool {
        try check()
        return items.removeValue(forKey: profile.name) != nil
    }
    public func profiles() throws -> [String] {
        try check()
        return items.keys.sorted()
    }
    @_spi(CredentialOwner) public func prepareWrite(_ profile: Profile, size: Int) throws -> PreparedWrite {
        try check()
        if full { throw CredentialError.storeFailure("the test store has no room") }
        return Prepared(store: self, profile: profile)
    }
    public func version(_ profile: Profile) throws -> [UInt8]? {
        try beforeVersion()
        try check()
        return items[profile.name].map { _ in Array("\(profile.name):\(writes)".utf8) }
    }

    private final class Prepared: PreparedWrite {
        let store: MemoryStore
        let profile: Profile
        init(store: MemoryStore, profile: Profile) { self.store = store; self.profile = profile }
        func commit(_ secret: borrowing SecretBytes) throws { try store.write(profile, secret: secret) }
    }
}

@_spi(CredentialOwner)
extension MemoryStore: CredentialStoreWriting {}

extension CredentialStore {
    /// Test convenience: the stored secret copied into an array, for comparing bytes.
    public func readBytes(_ profile: Profile) throws -> [UInt8]? {
        guard let secret = try read(profile) else { return nil }
        return secret.withUnsafeBytes { Array($0) }
    }

    /// Test convenience: writes a guarded copy of `bytes` (a test acting as another program that
    /// writes a store directly).
    public func write(_ profile: Profile, bytes: [UInt8]) throws {
        try (self as! CredentialStoreWriting).write(profile, secret: SecretBytes(copying: bytes))
    }
}
