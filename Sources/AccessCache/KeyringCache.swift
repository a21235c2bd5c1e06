import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The access cache (man page ACCESS CACHE): one `user` key per store identity and profile in
/// the kernel's user keyring (`@u`, one per user), readable only by processes of the same user,
/// holding what `get` prints and never the refresh token, with a kernel timeout of
/// `min(TTL, expiry − 300 s)`.
///
/// It never fails its caller: a refused, full or damaged keyring is a miss, and the store answers.
/// The kernel refusing the calls outright (EPERM/ENOSYS from a seccomp filter or a container)
/// turns the cache off for the rest of the process, said once through `diagnostic`.
///
/// Who can read (`KernelKeyring.entryPermissions`): a process of the same user that finds the key
/// by searching the user keyring — whether its session keyring links `@u` (a login session) or
/// not (`keyctl session`, systemd's `KeyringMode=private`) — since every right is the owner's.
/// Possession grants nothing: a process of ANOTHER user that kept this user's session keyring
/// (a setuid program, `setpriv` without a new session) can neither find nor read an entry.
///
/// One instance per process (it remembers refusals); not for use from several threads at once.
public final class KeyringCache {
    public let settings: AccessCacheSettings
    private let now: () -> Int64
    private let diagnostic: (String) -> Void
    /// The kernel refused a call: nothing more is asked of it.
    private var refused = false
    /// Entries cannot be read from this process (found but refused): no more lookups.
    private var unreadable = false
    private var said: Set<String> = []
    /// The description `lookup` made last, and of what: the broker's loop looks one entry up
    /// again and again with the same instance.
    private var lastDescription: (identity: StoreIdentity, profile: String, description: String?)?

    public init(settings: AccessCacheSettings, now: @escaping () -> Int64 = Clock.now,
                diagnostic: @escaping (String) -> Void = { _ in }) {
        self.settings = settings
        self.now = now
        self.diagnostic = diagnostic
    }

    private func description(_ identity: StoreIdentity, _ profile: Profile) -> String? {
        if let last = lastDescription, last.identity == identity, last.profile == profile.name { return last.description }
        let made = identity.keyDescription(for: profile)
        lastDescription = (identity, profile.name, made)
        return made
    }

    // MARK: the three operations

    /// The profile's entry for this store, or nil: no entry, the cache off or refused, an entry
    /// filled from another version of the store's copy than `storeVersion` (a change made where
    /// the entry could not be revoked: it is replaced by the next fill), or one that is damaged
    /// or not exactly as written (another owner, other permissions), which is removed. The caller
    /// still checks `isFresh` against what it needs.
    public func lookup(_ identity: StoreIdentity, _ profile: Profile, storeVersion: [UInt8] = []) -> AccessCacheEntry? {
        guard canServe, let description = description(identity, profile) else { return nil }
        var unreadableKey: Int32?
        // A second round only when the key found could not be read: a concurrent fill may have
        // displaced it between the search and the read. The same key twice means it is not ours to read.
        for _ in 0..<2 {
            guard case .success(let key) = check(KernelKeyring.search(KernelKeyring.userKeyring, description: description),
                                                 "looking up an entry") else { return nil }
            if key == unreadableKey { break }
            switch read(key, description) {
            case .entry(let entry, let version): return version == storeVersion ? entry : nil
            case .absent: return nil
            case .notPossessed: unreadableKey = key
            }
        }
        unreadable = true
        say("access cache: entries are not readable from this process; reading the store instead")
        return nil
    }

    /// Makes `entry`, filled from `storeVersion` of the store's copy, the profile's entry for this
    /// store, replacing any older one in one step. When it cannot be written — cache off, timeout
    /// ≤ 0, too large for a key, the keyring full — the older entry is removed instead, so nothing
    /// stale is left to be served.
    public func fill(_ entry: AccessCacheEntry, _ identity: StoreIdentity, _ profile: Profile, storeVersion: [UInt8] = []) {
        guard settings.enabled else { return revoke(identity, profile) }
        guard !refused, let description = identity.keyDescription(for: profile) else { return }
        let timeout = settings.kernelTimeout(expiresAt: entry.expiresAt, now: now())
        guard timeout > 0 else { return revoke(identity, profile) }
        guard let payload = CachePayload.build(entry, storeVersion: storeVersion) else {
            say("access cache: the credential is too large for a kernel key (\(CachePayload.maxBytes) bytes); not cached")
            return revoke(identity, profile)
        }
        // The key is completed (payload, permissions, timeout) in this thread's own keyring, which
        // no other process reaches, and only then linked into @u, where it displaces the older
        // entry atomically: no reader ever sees a key without its timeout or its permissions.
        guard case .success(let key) = check(KernelKeyring.add(description: description, payload: payload, to: KernelKeyring.threadKeyring),
                                             "writing an entry") else {
            if !refused { revoke(identity, profile) }
            return
        }
        defer { _ = KernelKeyring.unlink(key, from: KernelKeyring.threadKeyring) }
        // The timeout first: the final permissions leave no one the right to change it.
        let done = KernelKeyring.setTimeout(key, seconds: UInt32(timeout))
            .flatMap { KernelKeyring.setPermissions(key, KernelKeyring.entryPermissions) }
            .flatMap { KernelKeyring.link(key, into: KernelKeyring.userKeyring) }
        if case .failure = check(done, "writing an entry") {
            _ = KernelKeyring.invalidate(key)
            if !refused { revoke(identity, profile) }
        }
    }

    /// What the one owner of changes calls after every change to a stored credential, holding
    /// the profile's lock: the document as it now stands in that store (nil when it was erased).
    /// A document that may be served from the cache replaces the entry; anything else — erased,
    /// no access token (git `erase`), a rejected refresh — removes it.
    public func update(to document: TokenDocument?, _ identity: StoreIdentity, _ profile: Profile, storeVersion: [UInt8] = []) {
        if let document, let entry = AccessCacheEntry(cacheable: document) {
            fill(entry, identity, profile, storeVersion: storeVersion)
        } else {
            revoke(identity, profile)
        }
    }

    /// True while lookups can answer: the cache is on, the kernel has not refused it and entries
    /// are readable from this process. When false a miss need not wait for another process's fill.
    public var canServe: Bool { settings.enabled && !refused && !unreadable }

    /// Removes the profile's entry for this store (other stores' entries are left alone). Done
    /// even with the cache off: a change this process made must not be hidden from the others.
    public func revoke(_ identity: StoreIdentity, _ profile: Profile) {
        guard !refused, let description = identity.keyDescription(for: profile) else { return }
        guard case .success(let key) = check(KernelKeyring.search(KernelKeyring.userKeyring, description: description), "removing an entry") else { return }
        // Invalidating needs the key's search permission, which only its possessor has; unlinking
        // it from @u needs nothing of the key, so a process that cannot read entries removes them too.
        if case .failure(let f) = KernelKeyring.invalidate(key), f.errno == EACCES {
            _ = check(KernelKeyring.unlink(key, from: KernelKeyring.userKeyring), "removing an entry")
        }
    }

    /// Removes the profile's entries under EVERY store identity (man page ACCESS CACHE), except
    /// the one `keeping` names: what the one owner does after every change, so that a store
    /// reached under two names (two spellings of a path or a bus, a bind mount) never keeps
    /// serving what was changed through the other. The user keyring is listed (KEYCTL_READ) and
    /// each key described; ours are those whose description starts with the prefix and
    /// `PROFILE:`. Done even with the cache off, like `revoke`.
    public func revokeEverywhere(_ profile: Profile, keeping: StoreIdentity? = nil) {
        guard !refused else { return }
        let prefix = Self.profilePrefix(profile)
        let kept = keeping?.keyDescription(for: profile)
        guard case .success(let keys) = check(KernelKeyring.list(KernelKeyring.userKeyring), "removing entries") else { return }
        var linked = false
        defer { if linked { _ = KernelKeyring.unlink(KernelKeyring.userKeyring, from: KernelKeyring.threadKeyring) } }
        for key in keys {
            var described = KernelKeyring.describe(key)
            if case .failure(let f) = described, f.errno == EACCES, !linked {
                // Not described (an entry of an older version was possessor-only, and a process
                // whose session keyring does not link @u does not possess it): it is possessed
                // once @u is linked into this thread's own keyring, for this scan only, so that
                // every entry of the profile is still removed.
                linked = (try? KernelKeyring.link(KernelKeyring.userKeyring, into: KernelKeyring.threadKeyring).get()) != nil
                if linked { described = KernelKeyring.describe(key) }
            }
            guard case .success(let d) = described, d.type == "user", d.description.hasPrefix(prefix),
                  d.description != kept else { continue }
            if case .failure(let f) = KernelKeyring.invalidate(key), f.errno == EACCES {
                _ = check(KernelKeyring.unlink(key, from: KernelKeyring.userKeyring), "removing an entry")
            }
        }
    }

    /// `chatgpt-credential:vN:PROFILE:`: a profile name has no `:`, so this is one profile's.
    static func profilePrefix(_ profile: Profile) -> String {
        StoreIdentity.descriptionPrefix + profile.name + ":"
    }

    // MARK: reading one key

    private enum ReadOutcome { case entry(AccessCacheEntry, storeVersion: [UInt8]), absent, notPossessed }

    private func read(_ key: Int32, _ description: String) -> ReadOutcome {
        switch KernelKeyring.describe(key) {
        case .success(let d):
            // The file store's rule ("readable by group or others is refused") for keys: an entry
            // someone else made, or whose permissions were changed, is not trusted.
            guard d.type == "user", d.uid == ProcessUser.effectiveID, d.permissions == KernelKeyring.entryPermissions,
                  d.description == description else {
                discard(key, "had other permissions or another owner")
                return .absent
            }
        case .failure(let f) where f.errno == EACCES:
            return .notPossessed
        case .failure(let f):
            _ = check(Result<Void, KernelKeyring.Failure>.failure(f), "reading an entry")
            return .absent
        }
        var buffer = SecretBytes(zeros: 8192)
        var length = 0
        for _ in 0..<2 {
            switch KernelKeyring.read(key, into: &buffer) {
            case .success(let n): length = n
            case .failure(let f) where f.errno == EACCES: return .notPossessed
            case .failure(let f):
                _ = check(Result<Void, KernelKeyring.Failure>.failure(f), "reading an entry")
                return .absent
            }
            if length <= buffer.count { break }
            guard length <= CachePayload.maxBytes else { break }
            // Larger than the first guess: once more with room for all of it.
            buffer = SecretBytes(zeros: length)
        }
        guard length <= buffer.count else {
            discard(key, "was damaged")
            return .absent
        }
        buffer.truncate(to: length) // the tail was never written
        guard let (entry, version) = CachePayload.parse(buffer) else {
            discard(key, "was damaged")
            return .absent
        }
        return .entry(entry, storeVersion: version)
    }

    private func discard(_ key: Int32, _ why: String) {
        say("access cache: removed an entry that \(why)")
        if case .failure(let f) = KernelKeyring.invalidate(key), f.errno == EACCES {
            _ = KernelKeyring.unlink(key, from: KernelKeyring.userKeyring)
        }
    }

    // MARK: failures

    /// Passes success through; turns a failure into a diagnostic (a refusal, once, also turns the
    /// cache off). An absent key is no failure worth a word.
    @discardableResult
    private func check<T>(_ result: Result<T, KernelKeyring.Failure>, _ doing: String) -> Result<T, KernelKeyring.Failure> {
        guard case .failure(let f) = result, !f.isAbsence else { return result }
        if f.isRefusal || f.errno == EACCES {
            refused = true
            say("access cache: not used: the kernel refuses keyring calls (\(FileSystem.errorText(f.errno)))")
        } else if f.errno == EDQUOT {
            say("access cache: the user's kernel key quota is full (see /proc/sys/kernel/keys/maxbytes); not cached")
        } else {
            say("access cache: \(doing) failed: \(FileSystem.errorText(f.errno))")
        }
        return result
    }

    private func say(_ line: String) {
        if said.insert(line).inserted { diagnostic(line) }
    }
}

extension KeyringCache {
    /// Whether the kernel's key retention service takes this process's calls (for `doctor`):
    /// nil when the user keyring can be read, else the errno it refused with (EPERM or ENOSYS
    /// under a seccomp filter: the cache is then skipped silently, man page ACCESS CACHE).
    public static func kernelRefusal() -> Int32? {
        switch KernelKeyring.list(KernelKeyring.userKeyring) {
        case .success: return nil
        case .failure(let f): return f.errno
        }
    }
}
