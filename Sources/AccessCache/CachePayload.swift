import Secrets
import CredentialCore

/// What an entry holds: a served credential — the answer to every `get` format, never the
/// refresh token — with the two times the idle rule reads, so an entry never hides it.
public typealias AccessCacheEntry = ServedCredential

extension ServedCredential {
    /// The entry for a stored document, or nil when the document must not be answered from a
    /// cache: only a signed-in one may be — not one whose access token was dropped (git `erase`),
    /// nor one whose refresh the issuer rejected (`get` then prints the token with a warning,
    /// which only the store's path knows to give).
    public init?(cacheable document: TokenDocument) {
        guard case .signedIn = document.state, let served = document.served else { return nil }
        self = served
    }

    /// True when the access token is valid for at least `minTTL` more seconds — what `get` asks
    /// of a token before printing it without a refresh (`max(300, --min-ttl)`) — and the idle
    /// rule does not ask for a refresh (man page, REFRESH): an entry never hides either.
    public func isFresh(minTTL: Int64, now: Int64) -> Bool {
        let (remaining, overflow) = expiresAt.subtractingReportingOverflow(now)
        return !overflow && remaining >= minTTL && !isIdle(now: now)
    }
}

/// The payload format of an entry, version 3 — the one place that turns an entry into bytes and
/// back. Big-endian, no padding:
///
///     "CCA" 0x03        magic and version (4 bytes)
///     expires_at        Int64, Unix seconds (8 bytes)
///     last_refresh      Int64, Unix seconds, 0 when unknown (8 bytes)
///     stored_at         Int64, Unix seconds, 0 unless stored without a known last refresh (8 bytes)
///     6 × (UInt16 length, UTF-8 bytes)   access_token, account_id, id_token, email, plan,
///                                        store_version
///
/// `store_version` is the version of the store's copy the entry was filled from (the encrypted
/// file's `dev:ino:size:mtime`; empty for the Secret Service), which a lookup must name again.
/// Versions 1 and 2 (without the two times; without the store's version) are not read: such an
/// entry is a miss and is replaced by the next fill, so an older binary's entry can hide neither
/// the idle rule nor a change made where its entry could not be revoked.
/// Nothing may follow the last field. The kernel holds at most 32767 bytes in a `user` key.
enum CachePayload {
    static let version: UInt8 = 3
    /// The three times: expires_at, last_refresh, stored_at.
    static let timesCount = 3
    static let magic: [UInt8] = [UInt8(ascii: "C"), UInt8(ascii: "C"), UInt8(ascii: "A"), version]
    /// The `user` key type's limit (security/keys/user_defined.c).
    static let maxBytes = 32767

    /// The payload (in guarded memory, wiped when dropped; the tokens appended from theirs), or
    /// nil when it would not fit in a key.
    static func build(_ entry: AccessCacheEntry, storeVersion: [UInt8] = []) -> SecretBytes? {
        let names = [entry.accountId, entry.email, entry.plan]
        let total = magic.count + 8 * timesCount + 2 + entry.accessToken.count + 2 + entry.idToken.count + names.reduce(0) { $0 + 2 + $1.utf8.count } + 2 + storeVersion.count
        guard total <= maxBytes, storeVersion.count <= Int(UInt16.max) else { return nil }
        var out = SecretBytes(capacity: total)
        for b in magic { out.append(b) }
        for time in [entry.expiresAt, entry.lastRefresh, entry.storedAt] {
            let t = UInt64(bitPattern: time)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: t >> UInt64(shift))) }
        }
        entry.accessToken.withUnsafeBytes { appendField($0, to: &out) }
        appendField(entry.accountId, to: &out)
        entry.idToken.withUnsafeBytes { appendField($0, to: &out) }
        appendField(entry.email, to: &out)
        appendField(entry.plan, to: &out)
        storeVersion.withUnsafeBytes { appendField($0, to: &out) }
        return out
    }

    /// One field: its length (UInt16) and its bytes.
    private static func appendField(_ bytes: UnsafeRawBufferPointer, to out: inout SecretBytes) {
        out.append(UInt8(bytes.count >> 8))
        out.append(UInt8(bytes.count & 0xFF))
        out.append(bytes)
    }

    private static func appendField(_ text: String, to out: inout SecretBytes) {
        var text = text
        text.withUTF8 { appendField(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// The entry in `payload` and the store version it was filled from, or nil for anything that
    /// is not exactly a version-3 payload with an access token. The payload becomes the tokens'
    /// buffer: they are ranges of it (no copy).
    static func parse(_ payload: consuming SecretBytes) -> (entry: AccessCacheEntry, storeVersion: [UInt8])? {
        let buffer = SecretToken.Buffer(payload)
        return buffer.bytes.withUnsafeBytes { raw -> (entry: AccessCacheEntry, storeVersion: [UInt8])? in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard bytes.count >= magic.count + 8 * timesCount, bytes.count <= maxBytes, bytes[0..<magic.count].elementsEqual(magic) else { return nil }
            // Read in place, into locals: the broker parses an entry for every cached answer.
            var at = magic.count
            func time() -> Int64 {
                var t: UInt64 = 0
                for _ in 0..<8 { t = t << 8 | UInt64(bytes[at]); at += 1 }
                return Int64(bitPattern: t)
            }
            func field() -> Range<Int>? {
                guard at + 2 <= bytes.count else { return nil }
                let n = Int(bytes[at]) << 8 | Int(bytes[at + 1])
                at += 2
                guard at + n <= bytes.count, UTF8Scalars.isValid(UnsafeRawBufferPointer(rebasing: raw[at..<(at + n)])) else { return nil }
                defer { at += n }
                return at..<(at + n)
            }
            let expiresAt = time(), lastRefresh = time(), storedAt = time() // timesCount of them, in this order
            guard let token = field(), let account = field(), let id = field(), let email = field(), let plan = field(),
                  let version = field(), at == bytes.count, !token.isEmpty else { return nil }
            func text(_ r: Range<Int>) -> String { String(decoding: bytes[r], as: UTF8.self) }
            let entry = AccessCacheEntry(accessToken: SecretToken(range: token, of: buffer), accountId: text(account),
                                         idToken: SecretToken(range: id, of: buffer),
                                         expiresAt: expiresAt, lastRefresh: lastRefresh, storedAt: storedAt,
                                         email: text(email), plan: text(plan))
            return (entry, Array(bytes[version]))
        }
    }
}
