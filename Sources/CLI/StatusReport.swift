import CredentialCore
import SystemRuntime
import Credentials

/// `status`: who is signed in, without secrets. `unusable` is the one decision both the text and
/// the JSON (and the exit code) follow: nil when `get` would succeed without a new sign-in.
struct StatusReport {
    var profile: String
    var store: StoreKind?
    /// What is reported: the stored document, or an access-cache entry.
    var shown: Shown?
    var now: Int64 = 0
    var problem: CredentialError?
    /// Answered from the access cache (which keeps the times the store holds, so the report is the same).
    var fromCache: Bool {
        if case .cached = shown { return true }
        return false
    }
    /// The Secret Service collection (D-Bus object path) holding the item, when that store holds it.
    var collection: String?
    /// `status --all` only: whether this is the profile verbs use without --profile.
    var isDefault: Bool?
    /// The profile's sinks and their states (man page, SINKS); none: not shown.
    var sinks: [(format: String, path: String, state: String)] = []

    /// What `status` reads of a credential: never a token.
    enum Shown {
        case stored(TokenDocument)
        /// A fresh access-cache entry: only a signed-in credential's is ever cached.
        case cached(ServedCredential)

        var email: String {
            switch self { case .stored(let d): d.email; case .cached(let c): c.email }
        }
        var plan: String {
            switch self { case .stored(let d): d.plan; case .cached(let c): c.plan }
        }
        var accountId: String {
            switch self { case .stored(let d): d.accountId; case .cached(let c): c.accountId }
        }
        var times: any CredentialTimes {
            switch self { case .stored(let d): d; case .cached(let c): c }
        }
        /// The access token's expiry; nil when it was dropped.
        var accessExpiry: Int64? {
            switch self { case .stored(let d): d.state.access?.expiresAt; case .cached(let c): c.expiresAt }
        }
        /// The issuer's code when it rejected the refresh token.
        var rejection: String? {
            if case .stored(let d) = self { return d.state.rejection }
            return nil
        }
    }

    init(profile: String, store: StoreKind, document: TokenDocument, now: Int64) {
        self.profile = profile; self.store = store; self.shown = .stored(document); self.now = now
    }

    init(profile: String, store: StoreKind, cached: ServedCredential, now: Int64) {
        self.profile = profile; self.store = store; self.shown = .cached(cached); self.now = now
    }

    init(profile: String, store: StoreKind?, problem: CredentialError) {
        self.profile = profile; self.store = store; self.problem = problem
    }

    /// Why `get` would need a new sign-in (or could not read the store), nil when it would succeed:
    /// the refresh token was rejected and the access token is no longer usable.
    var unusable: CredentialError? {
        if let problem { return problem }
        guard let shown else { return .notSignedIn(profile: profile) }
        if case .stored(let d) = shown, case .refreshRejected(let code, _) = d.state, !RefreshPolicy.stillUsable(d, Freshness(), now: now) {
            return .refreshRejected(profile: profile, code: code)
        }
        return nil
    }

    /// A new sign-in is needed: now, or once this access token expires.
    var needsLogin: Bool { unusable?.exitCode == 3 || shown?.rejection != nil }

    /// When `get` will next refresh (the earlier of the expiry less the margin and the idle
    /// rule's day; now when there is no access token); nil when no refresh will happen before
    /// a new sign-in (the issuer rejected the refresh token).
    var nextRefresh: Int64? {
        switch shown {
        case nil: return nil
        case .cached(let c): return RefreshPolicy.nextRefresh(c)
        case .stored(let d):
            switch d.state {
            case .refreshRejected: return nil
            case .accessDropped: return now
            case .signedIn: return RefreshPolicy.nextRefresh(d)
            }
        }
    }

    /// The text lines for the two times (man page, `status`).
    var lastRefreshText: String {
        guard let d = shown?.times else { return "" }
        if d.lastRefresh > 0 { return "\(Clock.rfc3339(d.lastRefresh)) (\(TimeSpan.span(max(0, now - d.lastRefresh))) ago)" }
        if d.storedAt > 0 { return "unknown (stored \(Clock.rfc3339(d.storedAt)), counted from then)" }
        return "unknown"
    }

    var nextRefreshText: String {
        guard let next = nextRefresh else { return "none before a new sign-in" }
        return next <= now ? "\(Clock.rfc3339(next)) (due: at the next get)" : "\(Clock.rfc3339(next)) (in \(TimeSpan.span(next - now)))"
    }

    func json() -> JSONValue {
        var m: [(String, JSONValue)] = [("profile", .string(profile))]
        if let store { m.append(("store", .string(store.rawValue))) }
        if let collection { m.append(("collection", .string(collection))) }
        m += [("signed_in", .bool(unusable == nil)), ("needs_login", .bool(needsLogin))]
        if let shown {
            let d = shown.times
            m += [("email", .string(shown.email)), ("plan", .string(shown.plan)), ("account_id", .string(shown.accountId)),
                  ("expires_at", .string(Clock.rfc3339(d.expiresAt))), ("expires_in", .number(Double(d.expiresAt - now))),
                  ("last_refresh", d.lastRefresh > 0 ? .string(Clock.rfc3339(d.lastRefresh)) : .null),
                  ("next_refresh", nextRefresh.map { .string(Clock.rfc3339($0)) } ?? .null)]
            if d.lastRefresh <= 0, d.storedAt > 0 { m.append(("stored_at", .string(Clock.rfc3339(d.storedAt)))) }
            if let r = shown.rejection { m.append(("refresh_rejected", .string(r))) }
        }
        if let problem { m.append(("error", .string(problem.message))) }
        if fromCache { m.append(("cached", .bool(true))) }
        if let isDefault { m.append(("default", .bool(isDefault))) }
        if !sinks.isEmpty {
            m.append(("sinks", .array(sinks.map { .object([("format", .string($0.format)), ("path", .string($0.path)), ("state", .string($0.state))]) })))
        }
        return .object(m)
    }

    func text() -> String {
        guard let shown else { return "\(profile): \(problem?.message ?? "not signed in")\n" }
        let d = shown.times
        let who = Sanitize.line(shown.email.isEmpty ? "unknown email" : shown.email)
        let plan = Sanitize.line(shown.plan.isEmpty ? "unknown plan" : shown.plan)
        let login = ((try? Profile(profile)) ?? .default).loginCommand
        var s = unusable == nil
            ? "Signed in as \(who) (\(plan)), account \(Sanitize.line(shown.accountId))\n"
            : "Sign-in needed for \(who) (\(plan)), account \(Sanitize.line(shown.accountId))\n"
        s += "  profile:  \(profile)\n"
        if let store { s += "  store:    \(store.rawValue)\n" }
        if let collection {
            let memoryOnly = StoreCollection.isDurable(collection) ? "" : " (in memory only: lost when the keyring daemon restarts)"
            s += "  collection: \(Sanitize.line(collection))\(memoryOnly)\n"
        }
        s += "  expires:  \(Clock.rfc3339(d.expiresAt)) (\(TimeSpan.expiry(d.expiresAt - now)))\n"
        s += "  refreshed: \(lastRefreshText)\n"
        s += "  next refresh: \(nextRefreshText)\n"
        if let r = shown.rejection {
            let when = unusable == nil ? "before this token expires" : "now"
            s += "  sign-in needed \(when): the issuer rejected the refresh token (\(Sanitize.line(r, limit: 60))); run: \(login)\n"
        }
        for sink in sinks {
            s += "  sink:     \(sink.format) \(Sanitize.line(sink.path, limit: 200)) (\(sink.state))\n"
        }
        if sinks.contains(where: { $0.state == SinkState.changed.rawValue }) {
            s += "  a sink was changed by another program and is no longer rewritten; see: \(((try? Profile(profile)) ?? .default).command("sink list"))\n"
        }
        return s
    }

    static func jsonList(_ entries: [StatusReport]) -> String {
        JSON.serialize(.array(entries.map { $0.json() })) + "\n"
    }

    /// The short word `status --all` shows in its STATUS column: `ok`, `sign in again` (a new
    /// sign-in is needed now, or once this access token expires: the refresh token was rejected),
    /// `not signed in`, `locked` or `unreadable` (the reason is on standard error).
    var statusWord: String {
        if let problem = unusable {
            switch problem {
            case .refreshRejected: return "sign in again"
            case .notSignedIn: return "not signed in"
            case .keyringLocked: return "locked"
            default: return problem.exitCode == 3 ? "sign in again" : "unreadable"
            }
        }
        return needsLogin ? "sign in again" : "ok"
    }

    /// The EXPIRES column: how long the access token has left, `expired`, or `-` without one.
    var expiresWord: String {
        guard let expiresAt = shown?.accessExpiry else { return "-" }
        return expiresAt > now ? "in " + TimeSpan.span(expiresAt - now) : "expired"
    }

    static let tableHeader = ["PROFILE", "EMAIL", "PLAN", "STORE", "EXPIRES", "STATUS"]

    /// `status --all`: a table with a header, one row per profile and store, `*` before the
    /// profile verbs use without --profile. Fits `width` columns by shortening the EMAIL column
    /// (ending it in `…`) down to 12 characters; always a table, on a terminal or not. With
    /// nothing found, "No profiles signed in." — unless a store could not be read, when nothing
    /// can be said (the reason is on stderr).
    static func textList(_ entries: [StatusReport], storesUnreadable: Bool, defaultProfile: String, width: Int = 80) -> String {
        if entries.isEmpty { return storesUnreadable ? "" : "No profiles signed in.\n" }
        let rows: [[String]] = [tableHeader] + entries.map { e in
            [e.profile, Sanitize.line(e.shown.map { $0.email.isEmpty ? "-" : $0.email } ?? "-"),
             Sanitize.line(e.shown.map { $0.plan.isEmpty ? "-" : $0.plan } ?? "-"),
             e.store?.rawValue ?? "-", e.expiresWord, e.statusWord]
        }
        var widths = (0..<tableHeader.count).map { c in rows.map { $0[c].count }.max() ?? 0 }
        // marker (2) + columns + two spaces between them; STATUS is last and not padded.
        let total = 2 + widths.reduce(0, +) + 2 * (widths.count - 1)
        if total > width { widths[1] = max(12, widths[1] - (total - width)) }
        func cell(_ text: String, _ w: Int) -> String {
            text.count <= w ? text : String(text.prefix(w - 1)) + "…"
        }
        return rows.enumerated().map { i, row -> String in
            let mark = i > 0 && entries[i - 1].profile == defaultProfile ? "* " : "  "
            var line = mark
            for c in 0..<(row.count - 1) { line += cell(row[c], c == 0 ? row[c].count : widths[c]).padded(to: widths[c] + 2) }
            return line + row[row.count - 1]
        }.joined(separator: "\n") + "\n"
    }
}
