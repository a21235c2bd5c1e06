import Secrets

/// What a sink file holds (man page, SINKS): Codex's or ChatMock's `auth.json` shape with an
/// empty refresh token, the bare access token, `KEY=value` lines, or what `get --json` prints.
public enum SinkFormat: String, CaseIterable, Sendable {
    case codex, chatmock, token, env, json

    /// Codex's `auth.json` shape, which ChatMock reads too.
    public var isAuthJSON: Bool { self == .codex || self == .chatmock }
}

/// One sink of a profile, kept in the profile's stored document (`sinks`), so every process that
/// changes the credential finds it whatever its variables (man page, SINKS). `digest` is the
/// SHA-256 (hex) of what was last written there; `previousDigest` the one before, so a file a
/// crash left between the document's save and the file's rewrite is still known as ours.
public struct SinkRecord: Equatable, Sendable {
    public var format: SinkFormat
    /// Absolute.
    public var path: String
    public var digest: String
    public var previousDigest: String
    /// `--on-change CMD`: the program and its arguments, run without a shell after each rewrite.
    public var onChange: [String]

    public init(format: SinkFormat, path: String, digest: String = "", previousDigest: String = "", onChange: [String] = []) {
        self.format = format; self.path = path; self.digest = digest
        self.previousDigest = previousDigest; self.onChange = onChange
    }

    /// The file holds what this tool wrote there (the last write, or the one before it).
    public func isOurs(_ fileDigest: String) -> Bool {
        (!digest.isEmpty && Sodium.equal(fileDigest, digest)) || (!previousDigest.isEmpty && Sodium.equal(fileDigest, previousDigest))
    }

    public func json() -> JSONValue {
        var m: [(String, JSONValue)] = [("format", .string(format.rawValue)), ("path", .string(path)), ("digest", .string(digest))]
        if !previousDigest.isEmpty { m.append(("previous_digest", .string(previousDigest))) }
        if !onChange.isEmpty { m.append(("on_change", .array(onChange.map { .string($0) }))) }
        return .object(m)
    }

    /// Leniently: an entry that is not one is skipped (a newer version's field is ignored).
    public static func parse(_ v: JSONValue?) -> [SinkRecord] {
        guard case .array(let items)? = v else { return [] }
        return items.compactMap { item in
            guard let f = item["format"]?.stringValue, let format = SinkFormat(rawValue: f),
                  let path = item["path"]?.stringValue, path.hasPrefix("/") else { return nil }
            var args: [String] = []
            if case .array(let a)? = item["on_change"] { args = a.compactMap(\.stringValue) }
            return SinkRecord(format: format, path: path, digest: item["digest"]?.stringValue ?? "",
                              previousDigest: item["previous_digest"]?.stringValue ?? "", onChange: args)
        }
    }
}

/// Renders a sink from what is served (never a refresh token: the `auth.json` shapes carry
/// `"refresh_token":""`).
public enum SinkRendering {
    /// The file's bytes for `document`, or nil when it has no access token to serve.
    public static func render(_ format: SinkFormat, _ document: TokenDocument) -> SecretBytes? {
        guard let served = document.served else { return nil }
        switch format {
        case .codex, .chatmock:
            // `last_refresh` is the time the token was issued (the document's last refresh, or
            // when it was stored): Codex refreshes 8 days after it (ARCHITECTURE.md, "Codex's
            // refresh rules").
            let issued = served.lastRefresh > 0 ? served.lastRefresh : served.storedAt
            let v: JSONValue = .object([
                ("OPENAI_API_KEY", .null),
                ("tokens", .object([
                    ("id_token", .secret(served.idToken)),
                    ("access_token", .secret(served.accessToken)),
                    ("refresh_token", .string("")),
                    ("account_id", .string(served.accountId)),
                ])),
                ("last_refresh", .string(Clock.rfc3339(issued))),
            ])
            return JSON.serializeSecret(v, suffix: "\n")
        case .token:
            var out = SecretBytes(capacity: served.accessToken.count + 1)
            served.accessToken.withUnsafeBytes { out.append($0) }
            out.append(utf8: "\n")
            return out
        case .env:
            var out = SecretBytes(capacity: served.accessToken.count + served.accountId.utf8.count + 48)
            out.append(utf8: "CHATGPT_ACCESS_TOKEN=")
            served.accessToken.withUnsafeBytes { out.append($0) }
            out.append(utf8: "\nCHATGPT_ACCOUNT_ID=" + served.accountId + "\n")
            return out
        case .json:
            let v: JSONValue = .object([
                ("access_token", .secret(served.accessToken)),
                ("account_id", .string(served.accountId)),
                ("expires_at", .string(Clock.rfc3339(served.expiresAt))),
                ("email", .string(served.email)),
                ("plan", .string(served.plan)),
            ])
            return JSON.serializeSecret(v, suffix: "\n")
        }
    }

    /// SHA-256 of `bytes`, lower-case hex: what a sink's digest is made of.
    public static func digest(_ bytes: UnsafeRawBufferPointer) -> String {
        Hex.encode(Sodium.sha256(bytes))
    }

    public static func digest(_ bytes: borrowing SecretBytes) -> String { bytes.withUnsafeBytes { digest($0) } }
}

/// When `sink run` refreshes (man page, SINKS), as a pure function of the credential's times, so
/// a test can compute every moment of a month without waiting for one.
public enum SinkSchedule {
    /// A sink's token is refreshed this long before it expires, or a tenth of its lifetime when
    /// that is longer.
    public static let minimumMargin: Int64 = 600
    /// A `codex` sink's credential is refreshed before its last refresh is this old (Codex
    /// refreshes at 8 days: ARCHITECTURE.md, "Codex's refresh rules").
    public static let codexIdle: Int64 = 7 * 86400
    /// `sink run` wakes this often, and no more: to look for sinks and profiles added meanwhile.
    public static let minimumSleep: Int64 = 60
    /// A profile whose file is unchanged is read again at the latest after this long.
    public static let longestSleep: Int64 = 3600

    /// How long before expiry a token of `lifetime` seconds is refreshed.
    public static func margin(lifetime: Int64) -> Int64 { max(minimumMargin, lifetime / 10) }

    /// The moment the credential is due for a refresh: `margin` before `expiresAt` (issued at
    /// `issuedAt`), and, with a `codex` sink, 7 days after `issuedAt`, whichever is first.
    public static func due(expiresAt: Int64, issuedAt: Int64, codex: Bool) -> Int64 {
        let lifetime = max(0, expiresAt - issuedAt)
        var due = expiresAt - margin(lifetime: lifetime)
        if codex { due = min(due, issuedAt + codexIdle) }
        return due
    }

    /// When `sink run` next wakes: at the due moment, but not sooner than a minute from `now`, not
    /// before `backoffUntil` (the issuer's shared back-off), and not later than an hour from `now`
    /// unless the back-off says so.
    public static func nextWake(due: Int64, now: Int64, backoffUntil: Int64 = 0) -> Int64 {
        max(min(due, now + longestSleep), now + minimumSleep, backoffUntil)
    }
}
