import CredentialCore
// The stores' read half (selector, kinds, locations, profile listing) is part of this module's
// interface: the CLI reaches it through here and has no dependency on `Stores` of its own, so it
// can never import the write half (`@_spi(CredentialOwner)`; ARCHITECTURE.md).
@_exported import Stores
import OAuth
import Synchronization

/// The issuer's refresh call (`IssuerClient` in production; scripted in tests).
public protocol TokenRefreshing {
    func refresh(refreshToken: SecretToken) -> RefreshResult
}

extension IssuerClient: TokenRefreshing {}

/// A change the owner made, reported (still under the lock) to whoever mirrors the stored
/// state, such as the access cache.
package enum CredentialChange {
    case stored(TokenDocument, in: CredentialStore)
    case removed(from: CredentialStore)
    /// An access token the cache may hold was rejected or erased: it is not served again.
    /// The stores are unchanged by this alone.
    case withdrawn
}

/// The one owner of every change to a stored credential (ARCHITECTURE.md, "Rules of thumb"):
/// `login`, `store`, `erase`, a refresh, marking a refresh token rejected, git's and
/// docker's `erase`. Each takes the profile's lock, re-reads what is stored, decides, writes and
/// releases. Every change goes through a `CredentialTransaction`, which only the profile's
/// exclusive lock makes: a write never replaces a document that changed since it was read under
/// the lock (the transaction compares the store's `version` first and the owner decides again).
/// Reading (`locate`, and `fresh` when no refresh is due) takes no lock.
package final class CredentialOwner {
    package let profile: Profile
    let selector: StoreSelector
    let lock: ProfileLock
    /// The shared back-off, beside the lock file (so made when first needed, as the lock's
    /// path is); `issuer` is the issuer's base URL, from whoever knows which issuer refreshes.
    package lazy var backoff = IssuerBackoff(lockPath: lock.path, issuer: issuer)
    let issuer: String
    let now: () -> Int64
    let refresher: () throws -> TokenRefreshing
    /// The access cache, mirrored under the lock after every change; nil: none.
    let cache: CredentialCache?
    /// After `refresh_token_reused`, how long to watch the store for the rotation of whoever
    /// spent the token (a program that ignores the lock) before marking the credential rejected.
    package var reuseGrace: Double = 2.5
    /// Told of every change, under the lock, before it is released.
    package var observe: (CredentialChange) -> Void = { _ in }
    /// Where what happened to a sink is said (a file changed by another program, an `--on-change`
    /// command that failed): stderr in the CLI, the journal under `sink run`.
    package var sinkNotice: (String) -> Void = { _ in }
    /// The environment an `--on-change` command gets (the process's own, from the edge).
    package var childEnvironment: [String: String] = [:]
    /// `--on-change` commands of sinks rewritten under the lock, run once it is released.
    let pendingOnChange = Mutex<[[String]]>([])

    package init(profile: Profile, selector: StoreSelector, lock: ProfileLock, now: @escaping () -> Int64 = Clock.now,
                 cache: CredentialCache? = nil, issuer: String = "", refresher: @escaping () throws -> TokenRefreshing) {
        self.profile = profile
        self.selector = selector
        self.lock = lock
        self.issuer = issuer
        self.now = now
        self.cache = cache
        self.refresher = refresher
    }

    /// Every change a `CredentialTransaction` makes comes through here, still under the lock: the
    /// access cache and `observe` see it.
    func record(_ change: CredentialChange) {
        cache?.apply(change, profile)
        observe(change)
    }

    /// The stored credential, read without the lock.
    package func locate() throws -> LocatedCredential? {
        try selector.locate(profile)
    }

    // MARK: login, store

    /// Stores a new credential (login, store) where the selector says and removes the profile's
    /// copy from the other store (explicit `--store` too), so no stale single-use refresh token
    /// is left to be served. Returns the store written and notices for stderr.
    package func replace(with document: TokenDocument, notice: (String) -> Void) throws -> CredentialStore {
        var document = document
        // Without a known last refresh the idle rule counts from now (man page, REFRESH): its
        // source may still be using it, so it must not be refreshed at once.
        if document.lastRefresh <= 0, document.storedAt <= 0 { document.storedAt = now() }
        return try transaction { tx in
            let store = try selector.destination(for: profile, notice: notice)
            // The profile's sinks stay registered across a new sign-in (man page, SINKS), and are
            // rewritten with it (as far as their files are still ours). A copy that cannot be read
            // has none to keep.
            if document.sinks.isEmpty, let previous = (try? selector.locate(profile)) ?? nil {
                document.sinks = previous.document.sinks
            }
            try tx.observe(store)
            // A sign-in replaces whatever is stored; only a program that ignores the lock can
            // change the copy between that read and this write, and it is then not overwritten.
            guard try tx.write(document, to: store) else {
                throw CredentialError.storeFailure("the credential in \(store.location(for: profile)) was changed by another program during the sign-in; nothing was stored, try again")
            }
            backoff.clear()
            let other = selector.counterpart(of: store)
            do {
                if try tx.observe(other) != nil, try !tx.delete(from: other) {
                    notice("notice: an older copy in \(other.location(for: profile)) was changed by another program and was not removed; run: \(profile.command("--store \(other.kind.rawValue) erase --no-revoke"))")
                }
            } catch CredentialError.storeUnavailable {
                // not there at all, so it holds no copy
            } catch let e as CredentialError {
                // Not `erase`: that removes every copy, the new one too (man page, erase).
                notice("notice: the older copy in \(other.location(for: profile)) could not be removed because \(StoreSelector.firstClause(e.message)); once it answers, run: \(CopyRemoval.command(other, profile))")
            }
            return store
        }
    }

    // MARK: erase

    /// What `erase` did.
    package struct Erasure {
        /// Where a copy was removed.
        package var removed: [CredentialStore] = []
        /// Notices for stderr (revocation problems, a Codex import left unrevoked).
        package var notices: [String] = []
        /// The profile's sinks and what became of their files.
        package var sinks: [(path: String, removal: SinkRemoval)] = []
    }

    /// Removes the profile's credential from every store that holds it, damaged copies included,
    /// revoking each copy's refresh token first (best effort) unless `revoke` is nil or the copy
    /// came from Codex (which may still hold the same session). Throws (exit 5) naming the copy
    /// that could not be removed; erasing what is already gone is no error.
    package func erase(revoke: ((SecretToken) -> String?)?) throws -> Erasure {
        try transaction { tx in
            var erasure = Erasure()
            var revoked: [SecretToken] = [] // compared in constant time
            var blocked: (store: CredentialStore, error: CredentialError)?
            var sinks: [SinkRecord] = []
            for store in selector.allStores {
                // Is there a copy at all? Asked without decrypting (the file's lstat; the keyring's
                // search), so a copy this process cannot read is still found and removed.
                do {
                    guard try tx.observe(store) != nil else { continue }
                } catch CredentialError.storeUnavailable where store !== selector.chosen {
                    continue // this kind of store is not there at all: it holds nothing
                } catch let e as CredentialError {
                    blocked = blocked ?? (store, e) // locked, not answering: it may hold a copy
                    continue
                }
                let document: TokenDocument?
                do {
                    // The copy whose token is revoked is the one whose version the delete checks.
                    let located = try LocatedCredential.read(profile, from: store)
                    if let located { try tx.observe(located) }
                    document = located?.document
                } catch let e as CredentialError where Self.isDamage(e) || Self.isUnreadableHere(e) {
                    // Ours, but damaged, undecryptable or (a passphrase file with no passphrase at
                    // hand) unreadable now: removed all the same, its refresh token unrevoked.
                    document = nil
                    if revoke != nil {
                        erasure.notices.append("notice: the copy in \(store.location(for: profile)) could not be read (\(e.message)), so its refresh token was not revoked; removing it anyway")
                    }
                } catch let e as CredentialError {
                    blocked = blocked ?? (store, e) // a symlink, a directory, another user's file
                    continue
                }
                // Not revoked (man page, erase): a refresh token the issuer already rejected, or
                // one imported from Codex, which may still use the same session.
                for sink in document?.sinks ?? [] where !sinks.contains(where: { $0.path == sink.path }) { sinks.append(sink) }
                if let d = document, let revoke, d.state.rejection == nil, !revoked.contains(d.refreshToken) {
                    revoked.append(d.refreshToken)
                    if d.origin == .codex {
                        erasure.notices.append("notice: the refresh token was not revoked: it came from Codex, which may still use the same session (sign out there with: codex logout)")
                    } else if let problem = revoke(d.refreshToken) {
                        erasure.notices.append("notice: could not revoke the refresh token (\(Sanitize.line(problem, limit: 160))); erasing it here anyway")
                    }
                }
                do {
                    if try tx.delete(from: store) {
                        erasure.removed.append(store)
                    } else if try tx.observe(store) != nil {
                        // Replaced by a program that ignores the lock since it was read: not ours to remove unread.
                        blocked = blocked ?? (store, .storeFailure("it was changed by another program during the erase"))
                    }
                } catch let e as CredentialError {
                    blocked = blocked ?? (store, e)
                }
            }
            // The sinks' files go with the credential; one another program changed is left.
            for sink in sinks {
                let removal = (try? Self.removeFile(sink)) ?? .leftChanged
                erasure.sinks.append((sink.path, removal))
                if removal == .leftChanged {
                    erasure.notices.append("notice: the sink \(sink.path) was changed by another program; it is left as it is and no longer kept")
                }
            }
            backoff.clear()
            // Whatever was found: an entry left for any store would serve the erased credential.
            tx.withdrawCachedAccess()
            if let blocked { throw Self.remains(blocked.error, in: blocked.store, profile: profile, after: erasure.removed) }
            return erasure
        }
    }

    /// The file store without a passphrase to decrypt with (non-interactive, no passphrase file).
    static func isUnreadableHere(_ e: CredentialError) -> Bool {
        if case .storeUnavailable = e { return true }
        return false
    }

    /// A read error that says our copy is there but unusable — damaged, undecryptable, too open
    /// (erase removes it anyway) — as opposed to one that says it cannot be reached (locked, not
    /// answering) or that something else stands there (a symlink, a directory, another user's
    /// file: refused, never removed).
    static func isDamage(_ e: CredentialError) -> Bool {
        switch e {
        case .storeCorrupt, .wrongKey, .permissionsTooOpen: return true
        default: return false
        }
    }

    /// The error for a copy `erase` could not remove, naming it (and what was removed).
    static func remains(_ e: CredentialError, in store: CredentialStore, profile: Profile, after removed: [CredentialStore]) -> CredentialError {
        // The chosen store cannot even be located: there is no copy to name, only the reason.
        if case .storeUnavailable = e, removed.isEmpty { return e }
        let done = removed.isEmpty ? "" : "erased the copy in \(removed.map { $0.location(for: profile) }.joined(separator: " and ")), but "
        let text = "\(done)the copy in \(store.location(for: profile)) remains: \(e.message)"
        switch e {
        case .keyringLocked: return .keyringLocked(text)
        case .storeNotAnswering: return .storeNotAnswering(text)
        default: return .storeFailure(text)
        }
    }

    // MARK: git erase

    /// git `erase`: the caller says an access token was rejected. Drops the stored access token
    /// only if `matches` says it is still that one (a late rejection of an older token changes
    /// nothing); keeps the refresh token, so the next `get` refreshes. True when dropped.
    package func dropAccessToken(if matches: (SecretToken) -> Bool) throws -> Bool {
        try transaction { tx in
            // A cached copy of the rejected token must not be served again, whatever the store holds now.
            let kind = selector.readKind(of: profile)
            if let entry = cache?.entry(kind, profile), matches(entry.accessToken) { tx.withdrawCachedAccess() }
            guard let current = try tx.locate(selector), let access = current.document.state.access, matches(access.token) else { return false }
            return try tx.write(current.document.accessDropped(), to: current.store)
        }
    }
}
