import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// A token — access, refresh or id token — as bytes in guarded memory (`SecretBytes`), shared by
/// every copy of the document that holds it.
///
/// Why not a noncopyable `TokenDocument`: documents are values that the stores, the one owner,
/// the access cache and the answers pass around, keep in `Optional`s, enums (`CredentialChange`,
/// `RefreshResult`), tuples and closures, and that tests compare with `==`; Swift 6.3 has no
/// noncopyable `Equatable`, tuples or `Optional.map`, so a `~Copyable` document would ripple
/// through every signature of the owner and the CLI (45 errors in `Stores` alone, the first of
/// five modules) for no gain in copies: a document copy already copies only references.
/// So the bytes live once, in a `Buffer` (a final class owning ONE `SecretBytes`), and a token
/// is a reference to it plus a range: copying a document copies the reference, never the
/// bytes, and the buffer is wiped and unmapped when the last token that refers to it goes.
///
/// A range, not a whole buffer, because each `SecretBytes` costs about 25 µs (mmap, mprotect,
/// mlock, and the same again to release): the tokens of a parsed document are ranges of the
/// decrypted document itself (`JSON.parse(sharing:)`), and the access cache's tokens ranges of
/// the key's payload, so a `get` maps no buffer per token.
///
/// `==` compares in constant time (`sodium_memcmp`; only the lengths may differ in time).
/// Getting the bytes out as a String is an edge, named and few: `unsafeString()` (grep for it).
/// There is no way in from a String in shipped code (no string literal, no `init(copying:)` of
/// text): a token comes from parsed bytes, a payload or guarded memory. Tests and fuzz targets
/// get those conveniences from `TestSupport` and `FuzzSupport`.
public struct SecretToken: Equatable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The one guarded buffer a token's bytes live in, shared by reference: wiped (`SecretBytes`'
    /// deinit) when the last token referring to it goes. Immutable once made.
    package final class Buffer: @unchecked Sendable {
        // @unchecked Sendable: the bytes are never written after init.
        package let bytes: SecretBytes
        package init(_ bytes: consuming SecretBytes) { self.bytes = bytes }
    }

    /// nil for the empty token: it maps nothing.
    let buffer: Buffer?
    private let start: Int
    public let count: Int

    /// The empty token (no token): no buffer at all.
    public init() {
        buffer = nil
        start = 0
        count = 0
    }

    /// A token that owns all of `bytes`.
    public init(_ bytes: consuming SecretBytes) {
        if bytes.isEmpty {
            self.init()
        } else {
            let count = bytes.count
            self.init(range: 0..<count, of: Buffer(bytes))
        }
    }

    /// The token at `range` of a shared buffer (a document's or a payload's bytes).
    package init(range: Range<Int>, of buffer: Buffer) {
        precondition(range.lowerBound >= 0 && range.upperBound <= buffer.bytes.count, "token range outside its buffer")
        if range.isEmpty {
            self.buffer = nil
            start = 0
            count = 0
        } else {
            self.buffer = buffer
            start = range.lowerBound
            count = range.count
        }
    }

    /// A copy of `bytes` in a guarded buffer of its own. The source stays as it was.
    public init(copying bytes: UnsafeRawBufferPointer) {
        self.init(SecretBytes(copying: bytes))
    }

    public var isEmpty: Bool { count == 0 }

    /// Calls `body` with the token's bytes; the pointer must not outlive the call.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard let buffer else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try buffer.bytes.withUnsafeBytes { all in
            try body(UnsafeRawBufferPointer(rebasing: all[start..<(start + count)]))
        }
    }

    /// Constant-time comparison of the bytes (`sodium_memcmp`).
    public static func == (a: SecretToken, b: SecretToken) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in Sodium.equal(x, y) } }
    }

    /// Whether the UTF-8 of `text` is exactly this token, compared in constant time (git's
    /// `erase` names the rejected token as text).
    public func equals(utf8 text: String) -> Bool {
        var text = text
        return text.withUTF8 { t in withUnsafeBytes { Sodium.equal($0, UnsafeRawBufferPointer(t)) } }
    }

    /// `text` with every occurrence of the token replaced by `replacement` (an issuer or backend
    /// that echoes a request back must not get the token into a message). A plain search: the
    /// text comes from the peer that was sent the token, so its timing tells nothing new.
    package func cut(from text: String, replacement: String) -> String {
        withUnsafeBytes { token in
            let source = Array(text.utf8)
            guard let first = token.first, source.count >= token.count else { return text }
            var out: [UInt8] = []
            out.reserveCapacity(source.count)
            var at = 0
            while at < source.count {
                if source[at] == first, at + token.count <= source.count,
                   source.withUnsafeBytes({ memcmp($0.baseAddress! + at, token.baseAddress!, token.count) == 0 }) {
                    out.append(contentsOf: replacement.utf8)
                    at += token.count
                } else {
                    out.append(source[at])
                    at += 1
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// Never the bytes: a token interpolated into a message or a test's failure says only its size.
    public var description: String { "SecretToken(\(count) bytes)" }
    public var debugDescription: String { description }

    // MARK: edge (named, few; what it returns is not wiped)

    /// EDGE: the token as a String (invalid UTF-8 repaired as `String(decoding:)` does), for the
    /// place that cannot take bytes: `exec`'s environment (Runner). Grep for `unsafeString()` to
    /// find every one.
    public func unsafeString() -> String {
        withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}

/// The Unicode scalars of UTF-8 bytes, decoded where they lie (no String made): for writing a
/// token into JSON and checking its characters. Invalid sequences read as U+FFFD, as
/// `String(decoding:)` reads them.
package struct UTF8Scalars: Sequence {
    let bytes: UnsafeRawBufferPointer
    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    package struct Iterator: IteratorProtocol {
        var bytes: UnsafeRawBufferPointer.Iterator
        var decoder = UTF8()
        package mutating func next() -> Unicode.Scalar? {
            switch decoder.decode(&bytes) {
            case .scalarValue(let s): return s
            case .emptyInput: return nil
            case .error: return "\u{FFFD}"
            }
        }
    }

    package func makeIterator() -> Iterator { Iterator(bytes: bytes.makeIterator()) }

    /// True when the bytes are well-formed UTF-8.
    package static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // ASCII (every token: base64url and dots) is valid UTF-8: no decoding needed.
        if ByteScan.isASCII(bytes) { return true }
        var it = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&it) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}

/// A text that holds one token: the plain bytes before it, the token where it lies, the plain
/// bytes after it. Written out as the three pieces, the token is never copied (the broker's
/// cached answer, `GetFormatter.jsonAroundToken`).
public typealias TextAroundToken = (before: [UInt8], token: SecretToken, after: [UInt8])
