import CredentialCore
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// The shared transient outcome (man page REFRESH). The process that met a transient failure
/// records until when the issuer may be asked again (its Retry-After, else a short back-off) and
/// why, in `NAME.backoff` beside the profile's lock; until then other processes do not call the
/// issuer, they use that outcome at once. So a crowd of `get`s against a failing issuer costs one
/// process's bounded retries, not one series each. Read and written only under the profile lock.
package struct IssuerBackoff {
    /// When no Retry-After came: long enough to spare a crowd, short enough for a blip.
    package static let defaultSeconds: Int64 = 15
    /// A Retry-After is honoured up to this.
    package static let maxSeconds: Int64 = 300

    package struct Record: Equatable {
        package var until: Int64
        package var reason: String
    }

    /// nil when there is no lock directory (no sharing possible).
    package let path: String?

    package init(lockPath: String?) {
        path = lockPath.map { String($0.dropLast(".lock".count)) + ".backoff" }
    }

    /// The record in force at `now`, if any. A damaged or foreign record counts as none.
    package func current(now: Int64) -> Record? {
        guard let path, let bytes = try? AtomicFile.read(path, maxBytes: 4096) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let newline = text.firstIndex(of: "\n"), let until = Int64(text[..<newline]), until > now,
              until - now <= Self.maxSeconds else { return nil }
        let reason = Sanitize.line(String(text[text.index(after: newline)...]), limit: 200)
        return Record(until: until, reason: reason)
    }

    /// Records a transient failure at `now`; `retryAfter` is the issuer's own, when it sent one.
    package func record(reason: String, retryAfter: Double?, now: Int64) {
        guard let path else { return }
        let wait = retryAfter.map { $0.isFinite ? Int64(min(max($0.rounded(.up), 1), Double(Self.maxSeconds))) : Self.defaultSeconds }
            ?? Self.defaultSeconds
        try? Array("\(now + wait)\n\(Sanitize.line(reason, limit: 200))".utf8).withUnsafeBytes { try AtomicFile.replace(path, with: $0) }
    }

    /// After a successful refresh or a new sign-in.
    package func clear() {
        guard let path else { return }
        unlink(path)
    }
}
