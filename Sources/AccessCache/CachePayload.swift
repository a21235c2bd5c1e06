import Secrets
import CredentialCore

/// What an entry holds: the answer to every `get` format, and never the refresh token.
public struct AccessCacheEntry: Sendable, Equatable {
    public var accessToken: String
    public var accountId: String
    public var idToken: String
    /// Unix seconds, as in `TokenDocument.expiresAt`.
    public var expiresAt: Int64
    public var email: String
    public var plan: String

    public init(accessToken: String, accountId: String, idToken: String, expiresAt: Int64, email: String, plan: String) {
        self.accessToken = accessToken; self.accountId = accountId; self.idToken = idToken
        self.expiresAt = expiresAt; self.email = email; self.plan = plan
    }

    /// The entry for a stored document, or nil when the document must not be answered from a
    /// cache: no access token (git `erase` dropped it) or a refresh the issuer rejected (`get`
    /// then prints the token with a warning, which only the store's path knows to give).
    public init?(cacheable document: TokenDocument) {
        guard document.hasAccessToken, document.refreshRejected == nil else { return nil }
        self.init(accessToken: document.accessToken, accountId: document.accountId, idToken: document.idToken,
                  expiresAt: document.expiresAt, email: document.email, plan: document.plan)
    }

    /// True when the access token is valid for at least `minTTL` more seconds: what `get` asks
    /// of a token before printing it without a refresh (`max(300, --min-ttl)`).
    public func isFresh(minTTL: Int64, now: Int64) -> Bool {
        let (remaining, overflow) = expiresAt.subtractingReportingOverflow(now)
        return !overflow && remaining >= minTTL
    }
}

/// The payload format of an entry, version 1 — the one place that turns an entry into bytes and
/// back (so that it can move to `SecretBytes` in one step). Big-endian, no padding:
///
///     "CCA" 0x01        magic and version (4 bytes)
///     expires_at        Int64, Unix seconds (8 bytes)
///     5 × (UInt16 length, UTF-8 bytes)   access_token, account_id, id_token, email, plan
///
/// Nothing may follow the last field. The kernel holds at most 32767 bytes in a `user` key.
enum CachePayload {
    static let version: UInt8 = 1
    static let magic: [UInt8] = [UInt8(ascii: "C"), UInt8(ascii: "C"), UInt8(ascii: "A"), version]
    /// The `user` key type's limit (security/keys/user_defined.c).
    static let maxBytes = 32767

    /// The payload (in guarded memory, wiped when dropped), or nil when it would not fit in a key.
    static func build(_ entry: AccessCacheEntry) -> SecretBytes? {
        let fields = [entry.accessToken, entry.accountId, entry.idToken, entry.email, entry.plan]
        let total = magic.count + 8 + fields.reduce(0) { $0 + 2 + $1.utf8.count }
        guard total <= maxBytes else { return nil }
        var out = SecretBytes(capacity: total)
        for b in magic { out.append(b) }
        let e = UInt64(bitPattern: entry.expiresAt)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: e >> UInt64(shift))) }
        for field in fields {
            let n = field.utf8.count
            out.append(UInt8(n >> 8))
            out.append(UInt8(n & 0xFF))
            out.append(utf8: field)
        }
        return out
    }

    /// The entry in `bytes`, or nil for anything that is not exactly a version-1 payload with an
    /// access token.
    static func parse(_ raw: UnsafeRawBufferPointer) -> AccessCacheEntry? {
        let bytes = raw.bindMemory(to: UInt8.self)
        guard bytes.count >= magic.count + 8, bytes.count <= maxBytes, Array(bytes[0..<magic.count]) == magic else { return nil }
        var at = magic.count
        var e: UInt64 = 0
        for _ in 0..<8 { e = e << 8 | UInt64(bytes[at]); at += 1 }
        var fields: [String] = []
        for _ in 0..<5 {
            guard at + 2 <= bytes.count else { return nil }
            let n = Int(bytes[at]) << 8 | Int(bytes[at + 1])
            at += 2
            guard at + n <= bytes.count, let text = String(validating: bytes[at..<(at + n)], as: UTF8.self) else { return nil }
            fields.append(text)
            at += n
        }
        guard at == bytes.count, !fields[0].isEmpty else { return nil }
        return AccessCacheEntry(accessToken: fields[0], accountId: fields[1], idToken: fields[2],
                                expiresAt: Int64(bitPattern: e), email: fields[3], plan: fields[4])
    }
}
