import CredentialCore
import SystemRuntime
import Credentials
import Glibc

/// Local time with its zone, `2026-12-06 14:03 CET`, for what people read (`status`); JSON stays
/// RFC 3339 UTC (man page, `status`).
enum LocalClock {
    static func dateTime(_ seconds: Int64) -> String {
        tzset()
        var t = time_t(seconds)
        var broken = tm()
        localtime_r(&t, &broken)
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M %Z", &broken)
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An account id as the human lines show it: `unknown` when the credential did not say (a token
/// set stored without one), as `login`'s line has it.
func shownAccount(_ id: String) -> String { id.isEmpty ? "unknown" : Sanitize.line(id) }

/// `  label:   value` lines with the values in one column, as `gh auth status` aligns them; a
/// row without a label continues the one above it (no colon).
enum LabeledLines {
    static func render(_ rows: [(String, String)]) -> String {
        let width = (rows.map(\.0.count).max() ?? 0) + 1
        return rows.map { "  " + ($0.0.isEmpty ? "" : $0.0 + ":").padded(to: width + 2) + $0.1 + "\n" }.joined()
    }
}

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
    /// Where the store keeps it, for the file store: the encrypted file's path.
    var location: String?
    /// How times are shown to people: local time with the zone (tests pass a fixed one).
    var localTime: (Int64) -> String = LocalClock.dateTime
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

    /// The text lines for the two times (man page, `status`): local time, and how long ago or until.
    var lastRefreshText: String {
        guard let d = shown?.times else { return "" }
        if d.lastRefresh > 0 { return "\(localTime(d.lastRefresh)) (\(TimeSpan.span(max(0, now - d.lastRefresh))) ago)" }
        if d.storedAt > 0 { return "unknown (stored \(localTime(d.storedAt)), counted from then)" }
        return "unknown"
    }

    var nextRefreshText: String {
        guard let next = nextRefresh else { return "none before a new sign-in" }
        return next <= now ? "at the next get" : "\(localTime(next)) (in \(TimeSpan.span(next - now)))"
    }

    /// The access token's line: until when it is valid, or that the next `get` refreshes; never
    /// a dropped token's zero expiry read as a date in 1970.
    var accessTokenText: String {
        guard let expiresAt = shown?.accessExpiry, expiresAt > 0 else { return "none (dropped after a rejection); the next get refreshes" }
        if expiresAt > now { return "valid until \(localTime(expiresAt)) (in \(TimeSpan.span(expiresAt - now)))" }
        let ago = "expired \(localTime(expiresAt)) (\(TimeSpan.span(now - expiresAt)) ago)"
        return shown?.rejection == nil ? ago + "; the next get refreshes" : ago
    }

    /// The store in words a newcomer knows: the keyring's name and whether it is kept on disk
    /// (never a D-Bus object path), or the encrypted file's path.
    var storeText: String? {
        guard let store else { return nil }
        switch store {
        case .file:
            return "encrypted file" + (location.map { " " + Sanitize.line($0) } ?? "")
        case .secretService:
            guard let collection else { return "Secret Service keyring" }
            let name = Sanitize.line(String(collection.split(separator: "/").last ?? Substring(collection)))
            return "keyring \"\(name)\" (Secret Service), " + (StoreCollection.isDurable(collection)
                ? "kept on disk" : "in memory only: lost when the keyring daemon restarts")
        }
    }

    func json() -> JSONValue {
        var m: [(String, JSONValue)] = [("profile", .string(profile))]
        if let store { m.append(("store", .string(store.rawValue))) }
        if let collection { m.append(("collection", .string(collection))) }
        m += [("signed_in", .bool(unusable == nil)), ("needs_login", .bool(needsLogin))]
        if let shown {
            let d = shown.times
            m += [("email", .string(shown.email)), ("plan", .string(shown.plan)), ("account_id", .string(shown.accountId)),
                  // A dropped access token has no expiry: null, as the text says "the next get refreshes".
                  ("expires_at", (shown.accessExpiry ?? 0) > 0 ? .string(Clock.rfc3339(d.expiresAt)) : .null),
                  ("expires_in", (shown.accessExpiry ?? 0) > 0 ? .number(Double(d.expiresAt - now)) : .null),
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
        let who = Sanitize.line(shown.email.isEmpty ? "unknown email" : shown.email)
        let plan = Sanitize.line(shown.plan.isEmpty ? "unknown plan" : shown.plan)
        let login = ((try? Profile(profile)) ?? .default).loginCommand
        let s = unusable == nil
            ? "Signed in as \(who) (\(plan)), account \(shownAccount(shown.accountId))\n"
            : "Sign-in needed for \(who) (\(plan)), account \(shownAccount(shown.accountId))\n"
        var rows: [(String, String)] = [("profile", profile)]
        if let storeText { rows.append(("store", storeText)) }
        rows.append(("access token", accessTokenText))
        rows.append(("refreshed", lastRefreshText))
        // A dropped token's line already says the next get refreshes: not said twice.
        if (shown.accessExpiry ?? 0) > 0 || nextRefresh == nil { rows.append(("next refresh", nextRefreshText)) }
        if let r = shown.rejection {
            let when = unusable == nil ? "before this token expires" : "now"
            rows.append(("sign-in", "needed \(when): the issuer rejected the refresh token (\(Sanitize.line(r, limit: 60))); run: \(login)"))
        }
        for sink in sinks {
            rows.append(("sink", "\(sink.format) \(Sanitize.line(sink.path, limit: 200)) (\(sink.state))"))
        }
        if sinks.contains(where: { $0.state == SinkState.changed.rawValue }) {
            rows.append(("", "a sink was changed by another program and is no longer rewritten; see: \(((try? Profile(profile)) ?? .default).command("sink list"))"))
        }
        return s + LabeledLines.render(rows)
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

    /// `status --all`: a table with a header, one row per profile and store, sorted by profile,
    /// `*` before the profile verbs use without --profile. A profile name or an email is never cut:
    /// when the table is wider than `width`, PLAN, then STORE, then EXPIRES are left out (man
    /// page, `status --all`). With nothing found, "No profiles signed in." — unless a store could
    /// not be read, when nothing can be said (the reason is on stderr).
    static func textList(_ entries: [StatusReport], storesUnreadable: Bool, defaultProfile: String, width: Int = 80) -> String {
        if entries.isEmpty { return storesUnreadable ? "" : "No profiles signed in.\n" }
        let entries = entries.enumerated().sorted { a, b in
            a.element.profile != b.element.profile ? a.element.profile < b.element.profile : a.offset < b.offset
        }.map(\.element)
        let rows: [[String]] = [tableHeader] + entries.map { e in
            [e.profile, Sanitize.line(e.shown.map { $0.email.isEmpty ? "-" : $0.email } ?? "-"),
             Sanitize.line(e.shown.map { $0.plan.isEmpty ? "-" : $0.plan } ?? "-"),
             e.store?.rawValue ?? "-", e.expiresWord, e.statusWord]
        }
        var columns = Array(tableHeader.indices)
        func total(_ columns: [Int]) -> Int {
            // marker (2) + columns + two spaces between them.
            2 + columns.map { c in rows.map { $0[c].count }.max() ?? 0 }.reduce(0, +) + 2 * (columns.count - 1)
        }
        for drop in ["PLAN", "STORE", "EXPIRES"] where total(columns) > width {
            columns.removeAll { tableHeader[$0] == drop }
        }
        let widths = tableHeader.indices.map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.enumerated().map { i, row -> String in
            let mark = i > 0 && entries[i - 1].profile == defaultProfile ? "* " : "  "
            var line = mark
            for c in columns.dropLast() { line += row[c].padded(to: widths[c] + 2) }
            return line + row[columns.last!]
        }.joined(separator: "\n") + "\n"
    }
}
