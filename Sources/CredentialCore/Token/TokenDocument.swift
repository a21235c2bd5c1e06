import Secrets

/// The stored credential: the same JSON document in every store (man page STORES). Its three
/// tokens are `SecretToken`s: bytes in guarded memory that every copy of the document shares
/// (why a shared buffer and not a noncopyable document: see `SecretToken`). The other fields are
/// names and times, ordinary values.
public struct TokenDocument: CredentialTimes, Equatable, Sendable {
    public static let currentVersion = 1
    /// An access token is refreshed when it expires within this many seconds, or `--min-ttl` when
    /// longer (man page REFRESH); a cached one disappears this long before it expires. The one owner
    /// of the 300 s.
    public static let refreshMargin: Int64 = 300
    /// A credential whose last refresh is this old is refreshed whatever its expiry: sign-ins left
    /// idle lapse at the issuer (man page, REFRESH; Codex uses the same 8 days). The one owner of
    /// the 8 days.
    public static let idleRefreshInterval: Int64 = 8 * 86400

    /// What the credential is: signed in (with its access token and expiry), its access token
    /// dropped, or its refresh token rejected (`CredentialState`). The one source of truth for
    /// `accessToken`, `expiresAt` and `refresh_rejected`.
    public var state: CredentialState
    public var refreshToken: SecretToken
    public var idToken: SecretToken
    public var accountId: String
    /// Unix seconds of the last refresh (or sign-in) that produced these tokens; 0 when unknown
    /// (a bare token set given to `store`).
    public var lastRefresh: Int64
    /// Unix seconds when a document without a known last refresh was stored (`store` of a bare
    /// token set); 0 otherwise. The idle rule counts from it, so such a credential is never
    /// refreshed at once (its source may still be using it). Dropped by the next refresh.
    public var storedAt: Int64
    public var email: String
    public var plan: String
    /// A sign-in, or imported from Codex (`imported_from`): Codex may still hold the same
    /// session, so `erase` does not revoke it.
    public var origin: CredentialOrigin
    /// The profile's sinks (man page, SINKS): files this tool keeps fresh for programs that only
    /// read a file, with a digest of what was last written to each. Optional in the document
    /// (`sinks`, absent when none) and read leniently.
    public var sinks: [SinkRecord] = []
    /// SHA-256 digests of the refresh tokens this tool spent on this chain, oldest first, at most
    /// `spentDigestLimit` (man page VERBS, doctor: `doctor` fails when another program still holds one).
    /// Never the tokens. Optional in the stored document (`spent_refresh_tokens_sha256`): a
    /// document without it, or with entries that are not digests, reads as none.
    public var spentRefreshDigests: [[UInt8]] = []
    /// How many spent refresh tokens are remembered.
    public static let spentDigestLimit = 8
    /// The stored document's member for `spentRefreshDigests`.
    public static let spentDigestsKey = "spent_refresh_tokens_sha256"

    /// The access token as stored: empty when there is none (dropped).
    public var accessToken: SecretToken { state.access?.token ?? SecretToken() }
    /// Unix seconds, the expiry every decision uses: time of receipt plus the issuer's
    /// `expires_in` when it sent one, else the access token's `exp` (0 when unknown or dropped).
    /// Receipt time + `expires_in` keeps a local clock that disagrees with the issuer's from
    /// causing a refresh on every call.
    public var expiresAt: Int64 { state.access?.expiresAt ?? 0 }

    public init(state: CredentialState, refreshToken: SecretToken, idToken: SecretToken = SecretToken(), accountId: String = "",
                lastRefresh: Int64 = 0, email: String = "", plan: String = "", origin: CredentialOrigin = .signIn,
                storedAt: Int64 = 0) {
        self.state = state
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.accountId = accountId
        self.lastRefresh = lastRefresh
        self.storedAt = storedAt
        self.email = email
        self.plan = plan
        self.origin = origin
    }

    /// A document whose refresh token the issuer has not refused: signed in with `accessToken`
    /// (valid until `expiresAt`), or, for an empty one, with its access token dropped.
    public init(accessToken: SecretToken, refreshToken: SecretToken, idToken: SecretToken = SecretToken(), accountId: String = "",
                expiresAt: Int64 = 0, lastRefresh: Int64 = 0, email: String = "", plan: String = "",
                origin: CredentialOrigin = .signIn, storedAt: Int64 = 0) {
        self.init(state: CredentialState(storedAccessToken: accessToken, expiresAt: expiresAt, refreshRejected: nil),
                  refreshToken: refreshToken, idToken: idToken, accountId: accountId, lastRefresh: lastRefresh,
                  email: email, plan: plan, origin: origin, storedAt: storedAt)
    }

    /// Builds a document from freshly issued tokens, reading the claims of both JWTs
    /// (Codex takes the account from the id token, other clients from the access token).
    /// `expiresIn` is the issuer's `expires_in`, counted from `now` (the time of receipt).
    public static func fromTokens(accessToken: SecretToken, refreshToken: SecretToken, idToken: SecretToken?,
                                  accountId: String? = nil, expiresIn: Int64? = nil, now: Int64 = Clock.now()) -> TokenDocument {
        let access = JWTClaims.decode(accessToken)
        let id = idToken.flatMap { JWTClaims.decode($0) }
        return TokenDocument(
            accessToken: accessToken,
            refreshToken: refreshToken,
            idToken: idToken ?? SecretToken(),
            accountId: accountId ?? access?.accountId ?? id?.accountId ?? "",
            expiresAt: expiresIn.flatMap { Self.plausibleLifetime.contains($0) ? now + $0 : nil } ?? access?.expiresAt ?? 0,
            lastRefresh: now,
            email: id?.email ?? access?.email ?? "",
            plan: access?.plan ?? id?.plan ?? "")
    }

    /// Applies a refresh response: each field is optional, keep what is absent. `expiresIn` is
    /// the response's `expires_in`, received at `now`.
    public func rotated(accessToken newAccess: SecretToken?, refreshToken newRefresh: SecretToken?, idToken newId: SecretToken?,
                        expiresIn: Int64? = nil, now: Int64 = Clock.now()) -> TokenDocument {
        var next = TokenDocument.fromTokens(
            accessToken: newAccess ?? accessToken,
            refreshToken: newRefresh ?? refreshToken,
            idToken: newId ?? (idToken.isEmpty ? nil : idToken),
            expiresIn: newAccess == nil ? nil : expiresIn,
            now: now)
        // Without a new access token, the one there stays as it is (dropped stays dropped); a
        // rotation is never rejected.
        if newAccess == nil { next.state = state.access.map { .signedIn($0) } ?? .accessDropped }
        if next.accountId.isEmpty { next.accountId = accountId }
        if next.email.isEmpty { next.email = email }
        if next.plan.isEmpty { next.plan = plan }
        next.origin = origin
        next.sinks = sinks
        next.spentRefreshDigests = spentRefreshDigests
        return next
    }

    /// The document remembering `token` as spent (its digest, never the token): the one owner
    /// calls it on a rotation, so the digest is written in the same save as the new tokens.
    /// Only the last `spentDigestLimit` are kept.
    public func spending(_ token: SecretToken) -> TokenDocument {
        guard !token.isEmpty, !hasSpent(token) else { return self }
        var d = self
        d.spentRefreshDigests = Array((spentRefreshDigests + [Self.digest(token)]).suffix(Self.spentDigestLimit))
        return d
    }

    /// Whether `token` is one this tool already spent on this chain. Every remembered digest is
    /// compared in constant time, with no early exit.
    public func hasSpent(_ token: SecretToken) -> Bool {
        guard !token.isEmpty else { return false }
        let digest = Self.digest(token)
        var found = false
        for spent in spentRefreshDigests { found = Sodium.equal(spent, digest) || found }
        return found
    }

    /// SHA-256 of a token's bytes.
    static func digest(_ token: SecretToken) -> [UInt8] {
        token.withUnsafeBytes { Sodium.sha256($0) }
    }

    /// `expires_in` values taken at face value: a second to a year. Anything else is ignored in
    /// favour of the token's own `exp`.
    public static let plausibleLifetime: ClosedRange<Int64> = 1...(366 * 86400)

    /// The document after the issuer refused its refresh token (man page, REFRESH).
    public func rejected(code: String) -> TokenDocument {
        var d = self
        d.state = state.rejected(code: code)
        return d
    }

    /// The document without its access token (git's `erase`); the refresh token and any
    /// rejection stay.
    public func accessDropped() -> TokenDocument {
        var d = self
        d.state = state.droppingAccess()
        return d
    }

    // MARK: JSON

    public func json() -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("version", .number(Double(Self.currentVersion))),
            ("access_token", .secret(accessToken)),
            ("refresh_token", .secret(refreshToken)),
            ("id_token", .secret(idToken)),
            ("account_id", .string(accountId)),
            ("expires_at", .string(Clock.rfc3339(expiresAt))),
            ("last_refresh", .string(Clock.rfc3339(lastRefresh))),
            ("email", .string(email)),
            ("plan", .string(plan)),
        ]
        if let r = state.rejection { members.append(("refresh_rejected", .string(r))) }
        if let i = origin.importedFrom { members.append(("imported_from", .string(i))) }
        if storedAt > 0 { members.append(("stored_at", .string(Clock.rfc3339(storedAt)))) }
        if !sinks.isEmpty { members.append(("sinks", .array(sinks.map { $0.json() }))) }
        if !spentRefreshDigests.isEmpty {
            members.append((Self.spentDigestsKey, .array(spentRefreshDigests.map { .string(Hex.encode($0)) })))
        }
        return .object(members)
    }

    /// The stored form, written straight into guarded memory (one buffer of exactly its size).
    public func serialized() -> SecretBytes { JSON.serializeSecret(json()) }

    /// How many bytes `serialized()` holds, without making it.
    public var serializedCount: Int { JSON.serializedCount(json()) }

    /// Parses a stored document. Throws `storeCorrupt` for anything that is not one. The bytes
    /// become the tokens' buffer: each token is a range of them (no copy), so they are wiped
    /// when the last token parsed from them goes (at once, when parsing fails).
    public static func parse(_ bytes: consuming SecretBytes, origin: String, profile: Profile = .default) throws -> TokenDocument {
        guard let v = try? JSON.parse(sharing: SecretToken.Buffer(bytes), maxBytes: 256 * 1024), v.isObject,
              let refresh = v["refresh_token"]?.secretValue,
              let access = v["access_token"]?.secretValue else {
            throw CredentialError.storeCorrupt("the credential in \(origin) is damaged; \(profile.removeDamagedHint)")
        }
        func str(_ k: String) -> String { v[k]?.stringValue ?? "" }
        func time(_ k: String) -> Int64 {
            if let s = v[k]?.stringValue { return Clock.parseRFC3339(s) ?? 0 }
            // Int64(d) traps outside Int64's range, so a damaged number must not get there.
            if let d = v[k]?.doubleValue, d.isFinite, abs(d) < 1e15 { return Int64(d) }
            return 0
        }
        let state = CredentialState(storedAccessToken: access, expiresAt: time("expires_at"),
                                    refreshRejected: v["refresh_rejected"]?.stringValue)
        var document = TokenDocument(state: state, refreshToken: refresh, idToken: v["id_token"]?.secretValue ?? SecretToken(),
                                     accountId: str("account_id"), lastRefresh: time("last_refresh"), email: str("email"), plan: str("plan"),
                                     origin: v["imported_from"]?.stringValue.map { .imported(from: $0) } ?? .signIn,
                                     storedAt: time("stored_at"))
        // Lenient: anything but an array of 64 hex digits each is skipped, never an error.
        if case .array(let items)? = v[spentDigestsKey] {
            document.spentRefreshDigests = Array(items.compactMap { $0.stringValue.flatMap(Self.unhex) }.suffix(spentDigestLimit))
        }
        document.sinks = SinkRecord.parse(v["sinks"])
        return document
    }

    /// 32 bytes from 64 hex digits, else nil.
    static func unhex(_ text: String) -> [UInt8]? {
        text.utf8.count == 64 ? Hex.decode(text) : nil
    }
}
