import Synchronization

/// The file store's identities as last resolved (`StoreIdentity.file(normalising:)`: the real
/// path of the file's directory, four or five `readlink`s), so that a long-lived process — the
/// broker, answering thousands of lookups a second — resolves a path again only when a lookup
/// through the remembered identity misses. That is safe because a file-store entry answers only
/// while the spelled path's `lstat` names the very file it was filled from (its
/// `dev:ino:size:mtime`, ARCHITECTURE.md "The access cache"): a stale real path can make a miss,
/// never a wrong answer. A Secret Service entry is bound to no version and never goes through here.
public final class RememberedFileIdentities: Sendable {
    /// Paths remembered at most; then the memory starts again (a broker's clients name profiles).
    static let capacity = 64
    private let resolve: @Sendable (String) -> StoreIdentity?
    private let known = Mutex<[String: StoreIdentity]>([:])

    public init(resolve: @escaping @Sendable (String) -> StoreIdentity? = { StoreIdentity.file(normalising: $0) }) {
        self.resolve = resolve
    }

    /// The identity of the encrypted file at `path` as it resolves now, remembered for `remembered`.
    public func current(_ path: String) -> StoreIdentity? {
        let identity = resolve(path)
        known.withLock { known in
            guard let identity else { known[path] = nil; return }
            if known.count >= Self.capacity, known[path] == nil { known.removeAll(keepingCapacity: true) }
            known[path] = identity
        }
        return identity
    }

    /// The identity `current` last gave for `path`, touching nothing; nil when none was.
    public func remembered(_ path: String) -> StoreIdentity? {
        known.withLock { $0[path] }
    }
}
