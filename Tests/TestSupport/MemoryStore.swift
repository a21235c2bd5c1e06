import OAuth
import CredentialCore
import Stores

/// An in-memory store for unit tests and for composing behaviour without I/O.
public final class MemoryStore: CredentialStore {
    public let kind: StoreKind
    private var items: [String: [UInt8]] = [:]
    public var locked = false
    public init(kind: StoreKind = .file) { self.kind = kind }
    public func location(for profile: Profile) -> String { "memory:\(profile.name)" }
    public func read(_ profile: Profile) throws -> [UInt8]? {
        if locked { throw CredentialError.keyringLocked("the test keyring is locked") }
        return items[profile.name]
    }
    public func write(_ profile: Profile, secret: [UInt8]) throws {
        if locked { throw CredentialError.keyringLocked("the test keyring is locked") }
        items[profile.name] = secret
    }
    public func delete(_ profile: Profile) throws -> Bool {
        if locked { throw CredentialError.keyringLocked("the test keyring is locked") }
        return items.removeValue(forKey: profile.name) != nil
    }
    public func profiles() throws -> [String] { items.keys.sorted() }
}
