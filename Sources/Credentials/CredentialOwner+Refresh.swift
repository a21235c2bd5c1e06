import CredentialCore
import SystemRuntime
import Stores
import OAuth

/// The answer to `get`: what is served to the caller (never a refresh token), where it came
/// from, and notices for stderr.
public struct FreshCredential {
    public var credential: ServedCredential
    public var notices: [String]
    public var source: Source
    /// The store it was read from (for an access-cache entry: the store the entry stands for),
    /// for `-v` (man page, DIAGNOSTICS); nil when not told.
    public var store: StoreKind? = nil

    public enum Source: Equatable, Sendable {
        /// A fresh access-cache entry, without touching the store.
        case accessCache
        /// The stored credential, in this state (a rejected refresh token's token is served
        /// with its warning until it expires), not refreshed by this process.
        case store(CredentialState)
        /// This process performed the refresh.
        case refreshed
    }

    /// True when this process performed the refresh.
    public var refreshed: Bool { source == .refreshed }
    /// True when it came from the access cache, without touching the store.
    public var fromCache: Bool { source == .accessCache }

    /// The stored `document`, served as it is (`RefreshPolicy` or a fallback found its access
    /// token usable) or just refreshed by this process.
    init(_ document: TokenDocument, notices: [String], refreshed: Bool = false, profile: Profile) throws {
        // Only a refresh answer without an access token, for a credential whose own was dropped,
        // leaves none; as `get` always said then: sign in again.
        guard let served = document.served else {
            throw CredentialError.failure("the stored credential has no access token; sign in again: \(profile.loginCommand)")
        }
        self.init(credential: served, notices: notices, source: refreshed ? .refreshed : .store(document.state))
    }

    init(credential: ServedCredential, notices: [String], source: Source) {
        self.credential = credential; self.notices = notices; self.source = source
    }
}

/// Refreshing (man page REFRESH): decide without the lock; when a refresh is due, take the lock,
/// re-read (another process may have refreshed already), make sure the rotated document can be
/// saved, refresh, persist, release, and only then hand out the new token. Refresh tokens are
/// single-use: persisting before printing is what keeps a crash from logging the person out.
extension CredentialOwner {
    /// The profile's credential, fresh enough for `need`: from the access cache when it holds a
    /// fresh entry (no store, no lock, no network), else from the store, refreshed when due.
    package func fresh(_ need: Freshness) throws -> FreshCredential {
        if let hit = fromCache(need) { return hit }
        if let cache, !need.forceRefresh, cache.canServe {
            let kind = selector.readKind(of: profile)
            switch try fillFromStore(cache, kind, need) {
            case .answer(let filled): return from(kind, filled)
            // read and decided once, not again
            case .refreshDue(let located): return from(located.store.kind, try fresh(located, need, .refresh))
            }
        }
        guard let located = try locate() else { throw CredentialError.notSignedIn(profile: profile.name) }
        return from(located.store.kind, try fresh(located, need))
    }

    /// What `fresh` answers from a fresh access-cache entry, or nil: no store read, no lock, no
    /// network, only the entry and the store's metadata checks (the broker answers such a
    /// request on its loop thread: ARCHITECTURE.md, "A broker request").
    package func fromCache(_ need: Freshness) -> FreshCredential? {
        guard let cache, !need.forceRefresh else { return nil }
        let kind = selector.readKind(of: profile)
        return cachedAnswer(cache, kind, need).map { from(kind, $0) }
    }

    /// `answer`, saying which kind of store it stands for.
    private func from(_ kind: StoreKind, _ answer: FreshCredential) -> FreshCredential {
        var answer = answer
        answer.store = kind
        return answer
    }

    private enum Fill {
        case answer(FreshCredential)
        /// The stored credential needs a refresh, which fills the entry itself (through `record`).
        case refreshDue(LocatedCredential)
    }

    /// What `status` can report without reading the store: a fresh entry of the access cache and
    /// the kind of store it stands for.
    package func cached() -> (kind: StoreKind, credential: ServedCredential)? {
        guard let cache else { return nil }
        let kind = selector.readKind(of: profile)
        return cachedAnswer(cache, kind, Freshness()).map { (kind, $0.credential) }
    }

    private func cachedAnswer(_ cache: CredentialCache, _ kind: StoreKind, _ need: Freshness) -> FreshCredential? {
        guard let entry = cache.entry(kind, profile),
              entry.isFresh(minTTL: max(RefreshPolicy.margin, need.minTTL), now: now()) else { return nil }
        return FreshCredential(credential: entry, notices: [], source: .accessCache)
    }

    /// A miss: read the store and fill the entry under the profile's lock, so that no change
    /// (erase, store, refresh) can come between the read and the fill and leave a stale entry.
    /// Shared, so cold readers do not queue behind each other — except where a read costs a
    /// scrypt: then one process fills while the others wait and answer from its entry. When a
    /// refresh is due, what was read is handed on so the store is not read twice.
    private func fillFromStore(_ cache: CredentialCache, _ kind: StoreKind, _ need: Freshness) throws -> Fill {
        let costly = selector.store(of: kind).isExpensiveToRead(profile)
        do {
            return try fill(cache, kind, need, costly ? .exclusive : .shared)
        } catch CredentialError.storeReadOnly where costly {
            return try fill(cache, kind, need, .shared) // nothing is changed by a fill: read as others do
        }
    }

    private func fill(_ cache: CredentialCache, _ kind: StoreKind, _ need: Freshness, _ mode: FileLock.Mode) throws -> Fill {
        try lock.holding(mode) {
            if let hit = cachedAnswer(cache, kind, need) { return .answer(hit) } // filled while we waited
            guard let located = try locate() else { throw CredentialError.notSignedIn(profile: profile.name) }
            guard case .use(let notice) = RefreshPolicy.decide(located.document, need, now: now()) else { return .refreshDue(located) }
            cache.fill(located.document, from: located.store, profile) // a fill, not a change
            return .answer(try FreshCredential(located.document, notices: notice.map { [$0] } ?? [], profile: profile))
        }
    }

    /// `located`, refreshed first when `need` says so.
    package func fresh(_ located: LocatedCredential, _ need: Freshness) throws -> FreshCredential {
        try fresh(located, need, RefreshPolicy.decide(located.document, need, now: now()))
    }

    /// `located`, given what `RefreshPolicy` decided for it (decided once per read of the store).
    private func fresh(_ located: LocatedCredential, _ need: Freshness, _ decision: RefreshPolicy.Decision) throws -> FreshCredential {
        let initial = located.document
        switch decision {
        case .use(let notice):
            return try FreshCredential(initial, notices: notice.map { [$0] } ?? [], profile: profile)
        case .refresh:
            break
        }
        if case .refreshRejected(let code, _) = initial.state { return try rejectedFallback(located, need, code: code) }
        do {
            return try refreshTransaction(
                waiter: { try answeredByOthers(initial, need) },
                owner: { try refreshHoldingLock(initial, need, &$0) })
        } catch let e as CredentialError {
            // A store directory whose lock cannot be taken is never changed (man page, THE ONE
            // OWNER): as when the rotation could not be saved, nothing is spent.
            guard case .storeReadOnly = e else { throw e }
            return try storedIfUsable(initial, need, otherwise: e) {
                "notice: not refreshing, \(e.message); printing the stored token, which \($0)"
            }
        }
    }

    /// usage after the backend refused `token` (401): one refresh through the owner, unless the
    /// stored token is no longer that one (another process refreshed it meanwhile).
    package func freshAfterRejection(of token: SecretToken, _ need: Freshness) throws -> FreshCredential {
        guard let located = try locate() else { throw CredentialError.notSignedIn(profile: profile.name) }
        var forced = need
        forced.forceRefresh = located.document.accessToken == token // constant time
        return try fresh(located, forced)
    }

    /// Re-reads what is stored now: what another process left there may answer the request.
    /// nil when the refresh is still ours to do.
    private func reread(_ initial: TokenDocument, _ need: Freshness) throws -> (located: LocatedCredential, answer: FreshCredential?) {
        // Erased meanwhile (under the lock, by `erase`): erased stays erased.
        guard let current = try selector.locate(profile) else { throw CredentialError.notSignedIn(profile: profile.name) }
        // Unchanged since it was decided that a refresh is due: still due (time only makes a
        // token staler), so the policy is not asked again.
        if current.document == initial { return (current, nil) }
        if case .refreshRejected(let code, _) = current.document.state { return (current, try rejectedFallback(current, need, code: code)) }
        var need = need
        if current.document.refreshToken != initial.refreshToken { // constant time
            // Another process rotated the tokens (or signed in anew): a forced refresh is done.
            need.forceRefresh = false
        }
        if case .use(let notice) = RefreshPolicy.decide(current.document, need, now: now()) {
            return (current, try FreshCredential(current.document, notices: notice.map { [$0] } ?? [], profile: profile))
        }
        return (current, nil)
    }

    /// Re-reads, then the shared back-off: what another process stored, or the transient outcome
    /// it recorded moments ago, may answer the request. `answer` nil: the refresh is still ours.
    private func settledByOthers(_ initial: TokenDocument, _ need: Freshness) throws -> (located: LocatedCredential, answer: FreshCredential?) {
        let (current, answer) = try reread(initial, need)
        if let answer { return (current, answer) }
        guard let record = backoff.current(now: now()) else { return (current, nil) }
        let wait = TimeSpan.describe(record.until - now())
        return (current, try transientFallback(current.document, need, reason: "\(record.reason), so \(backoff.issuer.isEmpty ? "the issuer" : backoff.issuer) is not asked again for \(wait)"))
    }

    /// Waiting behind another process's refresh (shared lock): nil when it left nothing usable.
    private func answeredByOthers(_ initial: TokenDocument, _ need: Freshness) throws -> FreshCredential? {
        try settledByOthers(initial, need).answer
    }

    /// Holding the exclusive lock: re-read, check the shared back-off, reserve, refresh, persist.
    private func refreshHoldingLock(_ initial: TokenDocument, _ need: Freshness,
                                    _ tx: inout CredentialTransaction) throws -> FreshCredential {
        let (current, answer) = try settledByOthers(initial, need)
        if let answer { return answer }
        let store = current.store
        try tx.observe(current) // the bytes just decided on, not a second look

        // Reserve before spend: no refresh token is spent unless the rotated document can be saved.
        let prepared: Reservation
        do {
            prepared = try tx.prepareWrite(to: store, size: current.document.serializedCount)
        } catch let e as CredentialError {
            return try storedIfUsable(current.document, need, otherwise: e) {
                "notice: not refreshing, the refreshed tokens could not be saved (\(e.message)); printing the stored token, which \($0)"
            }
        }

        // The spend-to-save window: from the moment the refresh token leaves until the rotated
        // document is saved, SIGINT, SIGTERM, SIGHUP and SIGQUIT wait (SignalDeferral); the
        // exchange and the save are bounded by their own deadlines.
        let client = try refresher()
        let spent = current.document.refreshToken
        let outcome: Spend = try SignalDeferral.during {
            let answer = client.refresh(refreshToken: spent)
            guard case .rotated(let t) = answer else { return .answered(answer) }
            let received = now()
            var next = current.document.rotated(accessToken: t.accessToken, refreshToken: t.refreshToken, idToken: t.idToken,
                                                expiresIn: t.expiresIn, now: received)
            // The spent token's digest goes into the same save as its successor (man page
            // VERBS, doctor): another program still holding it is on this chain.
            if let rotatedTo = t.refreshToken, rotatedTo != spent { next = next.spending(spent) }
            backoff.clear()
            return .saved(next, try persistRotated(next, in: store, prepared: prepared, spent: spent, &tx), received)
        }

        switch outcome {
        case .saved(let next, var notices, let received):
            if let short = RefreshPolicy.afterRefresh(next, need, now: received) { notices.append(short) }
            return try FreshCredential(next, notices: notices, refreshed: true, profile: profile)
        case .answered(.rotated):
            preconditionFailure("a rotation is always saved inside the window")
        case .answered(.rejected(let code)):
            // A reused token may mean a program that ignores the lock spent it a moment ago and is
            // saving its rotation now: wait for that save (bounded) before marking anything.
            if code == OAuthConstants.refreshTokenReused, let answer = try awaitSaveInFlight(current.document, need) { return answer }
            let marked = current.document.rejected(code: code)
            // Marked, so later gets stop asking the issuer; unless the document changed meanwhile,
            // in which case what is stored now is the answer.
            if (try? tx.write(marked, to: store)) == false, let answer = try reread(current.document, need).answer {
                return answer
            }
            return try rejectedFallback(LocatedCredential(store: store, document: marked), need, code: code)
        case .answered(.failed(let reason)):
            // Local (libcurl missing): not shared as a back-off, and exit 1 rather than 4.
            return try storedIfUsable(current.document, need, otherwise: .failure("could not refresh the token: \(reason)")) {
                "notice: could not refresh the token: \(IssuerBackoff.words(reason, limit: 160)); printing the stored one, which \($0)"
            }
        case .answered(.unavailable(let reason, let retryAfter)):
            backoff.record(reason: reason, retryAfter: retryAfter, now: now())
            return try transientFallback(current.document, need, reason: reason)
        }
    }

    /// Saves the rotated document: through the reservation; under `auto`, to the other store when
    /// that fails. The new access token is printed either way; the notices say what was lost.
    private func persistRotated(_ next: TokenDocument, in store: CredentialStore, prepared: Reservation,
                                spent: SecretToken, _ tx: inout CredentialTransaction) throws -> [String] {
        let failure: CredentialError
        do {
            if try tx.write(next, to: store, through: prepared) { return [] }
            // What changed may only be the spent token's own document (a program that ignores the
            // lock marked it rejected, or dropped its access token): the rotation replaces it, as
            // it holds the only live refresh token.
            if try replaceSpent(with: next, in: store, spent: spent, through: prepared, &tx) { return [] }
            // Changed behind the lock's back (another program replaced or deleted it): not overwritten.
            return ["notice: the stored credential was changed by another program during the refresh; the refreshed tokens were not saved over it"]
        } catch let e as CredentialError {
            failure = e
        }
        func lost(_ whereAndWhy: String) -> [String] {
            ["notice: could not save the refreshed tokens to \(whereAndWhy): the new refresh token is lost; this access token \(TimeSpan.expiry(next.expiresAt - now())), then sign in again: \(profile.loginCommand)"]
        }
        if let other = selector.fallback(for: store) {
            do {
                // The other store's copy is read now, not before the spend: that costs nothing on a
                // refresh that saves where it read, and still keeps a lock-ignoring writer's copy.
                try tx.observe(other)
                guard try tx.write(next, to: other) else {
                    return lost("\(store.location(for: profile)) (\(failure.message)) nor to \(other.location(for: profile)) (changed by another program meanwhile)")
                }
                var notices = ["notice: could not save the refreshed tokens to \(store.location(for: profile)) (\(failure.message)); saved them to \(other.location(for: profile)) instead"]
                // The failed store still holds the spent token: remove it so it is never served
                // (unless it changed since it was read: then it holds something else).
                if (try? tx.delete(from: store)) != true {
                    notices.append("notice: the copy in \(store.location(for: profile)) still holds the spent refresh token; once it answers again, run: \(CopyRemoval.command(store, profile))")
                }
                return notices
            } catch let e as CredentialError {
                return lost("\(store.location(for: profile)) (\(failure.message)) nor to \(other.location(for: profile)) (\(e.message))")
            }
        }
        return lost("\(store.location(for: profile)) (\(failure.message))")
    }

    /// What happened inside the spend-to-save window.
    private enum Spend {
        /// Rotated and saved (or the loss reported in the notices).
        case saved(TokenDocument, [String], Int64)
        /// Anything but a rotation: nothing to save.
        case answered(RefreshResult)
    }

    /// Writes the rotation over what is stored when that still holds the refresh token just
    /// spent (rejected or not); a document with another refresh token (a new sign-in, another
    /// rotation) or none (erased) is left alone. True when written.
    private func replaceSpent(with next: TokenDocument, in store: CredentialStore, spent: SecretToken,
                              through prepared: Reservation, _ tx: inout CredentialTransaction) throws -> Bool {
        for _ in 0..<3 { // a writer that keeps changing it gets the last word, reported
            // One read: what is compared with the spent token is what the write is checked against.
            guard let stored = try? LocatedCredential.read(profile, from: store), stored.document.refreshToken == spent else { return false } // constant time
            try tx.observe(stored)
            if try tx.write(next, to: store, through: prepared) { return true }
        }
        return false
    }

    /// After `refresh_token_reused`: re-reads the store for up to `reuseGrace` seconds, in case
    /// whoever spent the token is saving its rotation right now. The answer from what it saved
    /// (an erasure or a rejection mark included) once the stored refresh token is no longer the
    /// spent one; nil when it still is at the deadline (or the store cannot be read).
    private func awaitSaveInFlight(_ spent: TokenDocument, _ need: Freshness) throws -> FreshCredential? {
        let deadline = Clock.monotonicMillis() + Int64(reuseGrace * 1000)
        while true {
            let stored: LocatedCredential?
            do { stored = try selector.locate(profile) } catch { return nil }
            if stored?.document.refreshToken != spent.refreshToken { // constant time; nil: erased
                let (current, answer) = try reread(spent, need)
                if let answer { return answer }
                return try storedIfUsable(current.document, need, otherwise: .temporary("another program refreshed the token at the same time and its token is not fresh enough; try again")) {
                    "notice: another program refreshed the token at the same time; printing what it saved, which \($0)"
                }
            }
            let left = deadline - Clock.monotonicMillis()
            if left <= 0 { return nil }
            _ = Waiter.sleep(Double(min(left, 100)) / 1000, interrupt: nil)
        }
    }

    // MARK: fallbacks

    /// A refresh that did not happen: the stored token, with `notice` (given its expiry), when it
    /// is still usable for `need`; else `error`.
    private func storedIfUsable(_ d: TokenDocument, _ need: Freshness, otherwise error: CredentialError,
                                notice: (String) -> String) throws -> FreshCredential {
        guard RefreshPolicy.stillUsable(d, need, now: now()) else { throw error }
        return try FreshCredential(d, notices: [notice(TimeSpan.expiry(d.expiresAt - now()))], profile: profile)
    }

    private func rejectedFallback(_ located: LocatedCredential, _ need: Freshness, code: String) throws -> FreshCredential {
        try storedIfUsable(located.document, need, otherwise: .refreshRejected(profile: profile.name, code: code)) {
            "warning: the issuer rejected the refresh token (\(Sanitize.line(code, limit: 60))); this token \($0); sign in again soon: \(profile.loginCommand)"
        }
    }

    private func transientFallback(_ d: TokenDocument, _ need: Freshness, reason: String) throws -> FreshCredential {
        try storedIfUsable(d, need, otherwise: .temporary("could not refresh the token: \(reason)")) {
            "notice: could not refresh the token: \(IssuerBackoff.words(reason, limit: 160)); printing the stored one, which \($0)"
        }
    }
}
