import CredentialCore
import Secrets

/// application/x-www-form-urlencoded, percent-encoding everything but RFC 3986 unreserved bytes.
public enum FormEncoding {
    public static func encode(_ pairs: [(String, String)]) -> String {
        var out: [UInt8] = []
        write(pairs) { out.append($0) }
        return String(decoding: out, as: UTF8.self)
    }

    /// A value of a body that carries secrets: ordinary text, or a token written from its guarded
    /// bytes (the authorization code, the PKCE verifier).
    public enum Value {
        case text(String)
        case secret(SecretToken)
    }

    /// The same encoding straight into `SecretBytes` of exactly its size (counted first, so no
    /// region is grown and dropped): a token's bytes go from its buffer into the body, never
    /// through a String or an array.
    public static func encodeSecret(_ pairs: [(String, Value)]) -> SecretBytes {
        var size = 0
        write(pairs) { _ in size += 1 }
        var out = SecretBytes(capacity: size)
        write(pairs) { out.append($0) }
        return out
    }

    private static func write(_ pairs: [(String, String)], _ emit: (UInt8) -> Void) {
        write(pairs.map { ($0.0, Value.text($0.1)) }, emit)
    }

    private static func write(_ pairs: [(String, Value)], _ emit: (UInt8) -> Void) {
        let hex: StaticString = "0123456789ABCDEF"
        func escape(_ b: UInt8) {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                emit(b)
            default:
                emit(UInt8(ascii: "%"))
                hex.withUTF8Buffer { h in emit(h[Int(b >> 4)]); emit(h[Int(b & 15)]) }
            }
        }
        for (n, (name, value)) in pairs.enumerated() {
            if n > 0 { emit(UInt8(ascii: "&")) }
            for b in name.utf8 { escape(b) }
            emit(UInt8(ascii: "="))
            switch value {
            case .text(let s): for b in s.utf8 { escape(b) }
            case .secret(let t): t.withUnsafeBytes { for b in $0 { escape(b) } }
            }
        }
    }

    /// The project's one percent-decoder (RFC 3986 section 2.1): each `%XX` (either case) becomes
    /// its byte; with `plusIsSpace` ('application/x-www-form-urlencoded', queries and form bodies)
    /// '+' is a space, else it stays '+'. Each byte goes to `emit`; false on a malformed escape
    /// ('%' not followed by two hex digits). The bytes are the caller's to check (UTF-8, printable).
    static func percentDecode<C: Collection>(_ s: C, plusIsSpace: Bool, _ emit: (UInt8) -> Void) -> Bool where C.Element == UInt8 {
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        var it = s.makeIterator()
        while let b = it.next() {
            if plusIsSpace && b == UInt8(ascii: "+") { emit(0x20); continue }
            guard b == UInt8(ascii: "%") else { emit(b); continue }
            guard let h = it.next().flatMap(hexValue), let l = it.next().flatMap(hexValue) else { return false }
            emit(h << 4 | l)
        }
        return true
    }

    /// `percentDecode` into an array.
    public static func percentDecoded<S: StringProtocol>(_ s: S, plusIsSpace: Bool) -> [UInt8]? {
        var out: [UInt8] = []
        return percentDecode(s.utf8, plusIsSpace: plusIsSpace) { out.append($0) } ? out : nil
    }

    /// Decodes a query held in guarded memory (a sign-in's callback: `code=…&state=…`) into
    /// pairs; the values of `secretNames` are decoded straight into guarded memory (`.secret`),
    /// never through a String or an array, the others are `.text`. Nil on a bad escape or a name
    /// or value that is not UTF-8.
    public static func decode(query: UnsafeRawBufferPointer, secretNames: Set<String>) -> [(String, Value)]? {
        var pairs: [(String, Value)] = []
        for item in query.split(separator: UInt8(ascii: "&")) where !item.isEmpty {
            let eq = item.firstIndex(of: UInt8(ascii: "=")) ?? item.endIndex
            var nameBytes: [UInt8] = []
            guard percentDecode(item[..<eq], plusIsSpace: true, { nameBytes.append($0) }),
                  let name = String(validating: nameBytes, as: UTF8.self) else { return nil }
            let raw = eq < item.endIndex ? item[(eq + 1)...] : item[eq..<eq]
            if secretNames.contains(name) {
                var size = 0
                guard percentDecode(raw, plusIsSpace: true, { _ in size += 1 }) else { return nil }
                var value = SecretBytes(capacity: size)
                _ = percentDecode(raw, plusIsSpace: true) { value.append($0) }
                guard value.withUnsafeBytes({ UTF8Scalars.isValid($0) }) else { return nil }
                pairs.append((name, .secret(SecretToken(value))))
            } else {
                var bytes: [UInt8] = []
                guard percentDecode(raw, plusIsSpace: true, { bytes.append($0) }),
                      let text = String(validating: bytes, as: UTF8.self) else { return nil }
                pairs.append((name, .text(text)))
            }
        }
        return pairs
    }

    /// Decodes a query or form body into pairs ('+' is a space). Nil on a bad escape or a name or
    /// value that is not UTF-8. Split on bytes, as `decode(query:secretNames:)` (which it is): a
    /// '=' or '&' followed by a combining mark is still a separator, though not a Character.
    public static func decode(_ s: String) -> [(String, String)]? {
        let pairs = Array(s.utf8).withUnsafeBytes { decode(query: $0, secretNames: []) }
        return pairs?.map { pair in
            switch pair.1 {
            case .text(let t): return (pair.0, t)
            case .secret: preconditionFailure("no name was asked to be secret")
            }
        }
    }
}
