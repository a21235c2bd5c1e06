import CredentialCore
import SystemRuntime
// The one file of the package, tests aside, that sees the stores' write half (ARCHITECTURE.md).
@_spi(CredentialOwner) import Stores

/// The one way to change a stored credential (ARCHITECTURE.md, "Rules of thumb"). Only this file
/// can make one, and only while holding the profile's lock exclusively (`transaction`,
/// `refreshTransaction` below); it cannot be copied or kept past the lock. It remembers the
/// version of each store's copy it has read, and every write, reservation and delete first checks
/// that the copy is still at that version — an error asking is an error, never "unchanged" — so
/// nothing a program that ignores the lock wrote meanwhile is overwritten. Every change it makes
/// is mirrored (the access cache, `CredentialOwner.observe`) before the lock is released.
package struct CredentialTransaction: ~Copyable {
    let profile: Profile
    private let mirror: (CredentialChange) -> Void
    /// Told of every sink rewrite this transaction made or refused (`SinkKeeping.rewrite`).
    private let sinkEvent: (SinkRecord, SinkKeeping.Outcome) -> Void
    /// The version of each store's copy as last read here (an inner nil: no copy). A store
    /// without an entry has not been read since the transaction began or last wrote to it.
    private var seen: [ObjectIdentifier: [UInt8]?] = [:]

    fileprivate init(profile: Profile, mirror: @escaping (CredentialChange) -> Void,
                     sinkEvent: @escaping (SinkRecord, SinkKeeping.Outcome) -> Void) {
        self.profile = profile
        self.mirror = mirror
        self.sinkEvent = sinkEvent
    }

    /// Reads the version of `store`'s copy (nil: none): what the next write or delete there is
    /// checked against.
    @discardableResult
    mutating func observe(_ store: CredentialStore) throws -> [UInt8]? {
        let version = try store.version(profile)
        seen[ObjectIdentifier(store)] = .some(version)
        return version
    }

    /// Takes the version of `located`'s bytes, read under the lock, as what the next write or
    /// delete of its store is checked against: the bytes the decision is made on, not a second
    /// look (man page, THE ONE OWNER). A located copy without a version is read again.
    mutating func observe(_ located: LocatedCredential) throws {
        guard let version = located.version else { try observe(located.store); return }
        seen[ObjectIdentifier(located.store)] = .some(version)
    }

    /// Locates the credential under the lock; its version is that of the bytes read.
    mutating func locate(_ selector: StoreSelector) throws -> LocatedCredential? {
        guard let located = try selector.locate(profile) else { return nil }
        try observe(located)
        return located
    }

    /// Whether `store`'s copy is still at the version read. Throws what asking throws.
    private func unchanged(_ store: CredentialStore) throws -> Bool {
        guard let expected = seen[ObjectIdentifier(store)] else {
            preconditionFailure("a change to a copy this transaction has not read")
        }
        return try store.version(profile) == expected
    }

    /// Makes sure `store` can take a document of about `size` bytes before anything irreversible
    /// happens (man page, REFRESH: reserve before spend).
    func prepareWrite(to store: CredentialStore, size: Int) throws -> Reservation {
        Reservation(prepared: try Self.writable(store).prepareWrite(profile, size: size))
    }

    /// The write half of `store`. Every store of this package has one; a store without it can
    /// only be read, and a change to it is refused.
    private static func writable(_ store: CredentialStore) throws -> CredentialStoreWriting {
        guard let writable = store as? CredentialStoreWriting else {
            throw CredentialError.storeFailure("\(store.kind.rawValue): this store cannot be written")
        }
        return writable
    }

    /// Writes `document` to `store` (through `prepared` when given) unless its copy changed
    /// since it was read. True when written; the copy must then be read again before another change.
    /// The profile's sinks whose file no longer shows what `document` serves are rewritten right
    /// after the save, before the lock is released (man page, SINKS: fresh by construction); the
    /// document saved records what they are rewritten with.
    mutating func write(_ document: TokenDocument, to store: CredentialStore, through reservation: Reservation? = nil) throws -> Bool {
        let writable = try Self.writable(store)
        guard try unchanged(store) else { return false }
        let (document, rewrites) = SinkKeeping.plan(document)
        // A write that fails leaves the version read as the check for the next change (the
        // fallback's removal of the spent copy): if the failure changed anything, that is refused.
        if let reservation { try writable.save(document, through: reservation.prepared) } else { try writable.save(document, for: profile) }
        seen[ObjectIdentifier(store)] = nil // read again before another change here
        mirror(.stored(document, in: store))
        SinkKeeping.rewrite(rewrites, report: sinkEvent)
        return true
    }

    /// Removes `store`'s copy unless it changed since it was read. True when a copy was removed.
    mutating func delete(from store: CredentialStore) throws -> Bool {
        let writable = try Self.writable(store)
        guard try unchanged(store) else { return false }
        let removed = try writable.delete(profile)
        seen[ObjectIdentifier(store)] = nil
        guard removed else { return false }
        mirror(.removed(from: store))
        return true
    }

    /// The access token the cache may hold must not be served again; no store changes.
    func withdrawCachedAccess() {
        mirror(.withdrawn)
    }
}

/// Room for a write, made sure of before a refresh token is spent (`prepareWrite(to:size:)`).
/// Dropped unused, it releases whatever it held.
struct Reservation {
    fileprivate let prepared: PreparedWrite
}

extension CredentialOwner {
    /// Runs `body` holding the profile's lock exclusively, with the transaction through which
    /// alone it can change what is stored.
    func transaction<T>(_ body: (inout CredentialTransaction) throws -> T) throws -> T {
        defer { runOnChangeCommands() } // after the lock is released
        return try lock.exclusive {
            var transaction = CredentialTransaction(profile: profile, mirror: record, sinkEvent: sinkRewritten)
            return try body(&transaction)
        }
    }

    /// `ProfileLock.exclusiveUnlessAnswered`, with a transaction for the owner's side.
    func refreshTransaction<T>(waiter: () throws -> T?, owner: (inout CredentialTransaction) throws -> T) throws -> T {
        defer { runOnChangeCommands() } // after the lock is released
        return try lock.exclusiveUnlessAnswered(waiter: waiter, owner: {
            var transaction = CredentialTransaction(profile: profile, mirror: record, sinkEvent: sinkRewritten)
            return try owner(&transaction)
        })
    }
}
