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
    /// The issuer's base URL the record is about: a record written for another issuer (the
    /// address changed since) is ignored, so no notice quotes an issuer that is no longer asked.
    package var issuer: String

    package init(lockPath: String?, issuer: String = "") {
        path = lockPath.map { String($0.dropLast(".lock".count)) + ".backoff" }
        self.issuer = issuer
    }

    /// The record in force at `now` for this issuer, if any. A damaged or foreign record (another
    /// issuer, or the older two-line format without one) counts as none. Format, three lines:
    /// until (Unix seconds), the issuer's base URL, the reason.
    package func current(now: Int64) -> Record? {
        guard let path, let bytes = try? AtomicFile.read(path, maxBytes: 4096) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        guard lines.count == 3, let until = Int64(lines[0]), until > now, until - now <= Self.maxSeconds,
              lines[1] == Substring(issuer) else { return nil }
        return Record(until: until, reason: Self.words(String(lines[2]), limit: 200))
    }

    /// Records a transient failure at `now`; `retryAfter` is the issuer's own, when it sent one.
    package func record(reason: String, retryAfter: Double?, now: Int64) {
        guard let path else { return }
        let wait = retryAfter.map { $0.isFinite ? Int64(min(max($0.rounded(.up), 1), Double(Self.maxSeconds))) : Self.defaultSeconds }
            ?? Self.defaultSeconds
        try? Array("\(now + wait)\n\(Sanitize.line(issuer, limit: 300))\n\(Self.words(reason, limit: 200))".utf8).withUnsafeBytes { try AtomicFile.replace(path, with: $0) }
    }

    /// After a successful refresh or a new sign-in.
    package func clear() {
        guard let path else { return }
        unlink(path)
    }

    /// `text` on one line, cut at a space to at most `limit` characters (then ending in "…"):
    /// notices never end mid-word.
    package static func words(_ text: String, limit: Int) -> String {
        let line = Array(Sanitize.line(text, limit: Int.max))
        guard line.count > limit else { return String(line) }
        var end = limit
        while end > 0, line[end] != " " { end -= 1 }
        if end == 0 { end = limit }
        return String(line[..<end]).trimmingSuffixSpaces + "…"
    }
}

private extension String {
    var trimmingSuffixSpaces: String {
        var s = self
        while s.last == " " || s.last == ";" || s.last == "," { s.removeLast() }
        return s
    }
}
