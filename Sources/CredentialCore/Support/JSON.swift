import Secrets

/// A small, strict, bounded JSON reader and writer (RFC 8259). Ours rather than Foundation's so the
/// hot path links no Foundation, and so every outside body goes through one parser that can be fuzzed.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    /// Members in document order; duplicate keys are rejected by the parser.
    case object([(String, JSONValue)])
    /// A string that is a token: its bytes in guarded memory, never in a String. The parser
    /// makes these for the members named in `JSON.secretKeys`, always; writing one into a String
    /// is refused (`JSON.serializeSecret` writes it into `SecretBytes`).
    case secret(SecretToken)

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.secret(x), .secret(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self {
            for (k, v) in members where k == key { return v }
        }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var secretValue: SecretToken? { if case .secret(let t) = self { return t }; return nil }
    public var doubleValue: Double? { if case .number(let d) = self { return d }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var isObject: Bool { if case .object = self { return true }; return false }
    /// An integer from a number or from a string of digits (the issuer sends `interval` both ways).
    public var intValue: Int? {
        switch self {
        case .number(let d) where d.rounded() == d && abs(d) < 1e15: return Int(d)
        case .string(let s): return Int(s.trimmingSpaces())
        default: return nil
        }
    }
}

public struct JSONError: Error, Equatable, Sendable {
    public let reason: String
    public let offset: Int
}

extension String {
    package func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\n" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\n" || l == "\r" { s.removeLast() }
        return String(s)
    }
}

public enum JSON {
    public static let maxDepth = 64

    /// The members whose string values are secrets, at any depth, in EVERY parse: the issuer's
    /// and Codex's tokens, the device sign-in's code and verifier, docker's `Secret`, Codex's API
    /// key. Not a parameter: secrecy is the parser's default, so no caller can forget it. Such a
    /// value becomes `.secret` (guarded memory), never a String.
    public static let secretKeys: Set<String> = [
        "access_token", "refresh_token", "id_token", "authorization_code", "code_verifier", "Secret", "OPENAI_API_KEY",
        "device_auth_id",
    ]

    public static func parse(_ text: String, maxBytes: Int = 1 << 20) throws -> JSONValue {
        try parse(Array(text.utf8), maxBytes: maxBytes)
    }

    public static func parse<C: Collection>(_ bytes: C, maxBytes: Int = 1 << 20) throws -> JSONValue where C.Element == UInt8 {
        if let v = try bytes.withContiguousStorageIfAvailable({ try parse(UnsafeRawBufferPointer($0), maxBytes: maxBytes) }) { return v }
        return try Array(bytes).withUnsafeBytes { try parse($0, maxBytes: maxBytes) }
    }

    /// Parses a body or input that may carry tokens, read in place. The string values of the
    /// `secretKeys` members become `.secret`, each decoded into a guarded buffer of its own; every
    /// other string is an ordinary String.
    public static func parse(_ secret: borrowing SecretBytes, maxBytes: Int = 1 << 20) throws -> JSONValue {
        try secret.withUnsafeBytes { try parse($0, maxBytes: maxBytes) }
    }

    /// As `parse(_:maxBytes:)`, but a secret string without escapes becomes a range of `buffer`
    /// itself (no copy, no new mapping): for a stored document or an issuer's answer, whose bytes
    /// then live as long as a token cut from them.
    package static func parse(sharing buffer: SecretToken.Buffer, maxBytes: Int = 1 << 20) throws -> JSONValue {
        try buffer.bytes.withUnsafeBytes { try parse($0, maxBytes: maxBytes, sharing: buffer) }
    }

    public static func parse(_ bytes: UnsafeRawBufferPointer, maxBytes: Int = 1 << 20) throws -> JSONValue {
        try parse(bytes, maxBytes: maxBytes, sharing: nil)
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer, maxBytes: Int, sharing shared: SecretToken.Buffer?) throws -> JSONValue {
        if bytes.count > maxBytes { throw JSONError(reason: "document larger than \(maxBytes) bytes", offset: 0) }
        var p = Parser(bytes: bytes, shared: shared)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        if p.i != p.bytes.count { throw JSONError(reason: "trailing data", offset: p.i) }
        return v
    }

    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        /// The buffer `bytes` lies in, when secret strings may be ranges of it.
        let shared: SecretToken.Buffer?
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        func fail(_ r: String) -> JSONError { JSONError(reason: r, offset: i) }

        mutating func value(depth: Int) throws -> JSONValue {
            guard depth < JSON.maxDepth else { throw fail("nesting too deep") }
            guard i < bytes.count else { throw fail("unexpected end") }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws {
            let w = word.withUTF8Buffer { Array($0) }
            guard i + w.count <= bytes.count, bytes[i..<i + w.count].elementsEqual(w) else { throw fail("bad literal") }
            i += w.count
        }

        mutating func object(depth: Int) throws -> JSONValue {
            i += 1
            var members: [(String, JSONValue)] = []
            var seen = Set<String>()
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try string()
                guard seen.insert(key).inserted else { throw fail("duplicate key") }
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "\""), JSON.secretKeys.contains(key) {
                    members.append((key, .secret(try secretString())))
                } else {
                    members.append((key, try value(depth: depth + 1)))
                }
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws -> JSONValue {
            i += 1
            var items: [JSONValue] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func hex4() throws -> UInt32 {
            guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[i]
                let d: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail("bad \\u escape")
                }
                v = v << 4 | d
                i += 1
            }
            return v
        }

        mutating func string() throws -> String {
            var out: [UInt8] = []
            try decodeString(into: &out)
            guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
            return s
        }

        /// A string that is a token: a range of the shared buffer when it needs no decoding, else
        /// decoded into a guarded buffer of its own (never into an array or a String).
        mutating func secretString() throws -> SecretToken {
            let open = i
            var end = open + 1
            var plain = true
            while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                if bytes[end] == UInt8(ascii: "\\") { plain = false; end += 2; continue }
                if bytes[end] < 0x20 { plain = false }
                end += 1
            }
            if plain, let shared, end < bytes.count {
                let span = UnsafeRawBufferPointer(rebasing: bytes[(open + 1)..<end])
                i = end + 1
                guard UTF8Scalars.isValid(span) else { throw fail("invalid UTF-8") }
                // `bytes` lies at the start of the shared buffer, so offsets are the buffer's.
                return SecretToken(range: (open + 1)..<end, of: shared)
            }
            // Escapes only shorten: the decoded value fits in the raw span.
            var out = SecretBytes(capacity: max(0, min(end, bytes.count) - open - 1))
            try decodeString(into: &out)
            guard out.withUnsafeBytes({ UTF8Scalars.isValid($0) }) else { throw fail("invalid UTF-8") }
            return SecretToken(out)
        }

        mutating func decodeString<Out: DecodedString & ~Copyable>(into out: inout Out) throws {
            i += 1
            while true {
                guard i < bytes.count else { throw fail("unterminated string") }
                let c = bytes[i]
                if c == UInt8(ascii: "\"") { i += 1; break }
                if c < 0x20 { throw fail("control character in string") }
                if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
                i += 1
                guard i < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                            throw fail("lone surrogate")
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("lone surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("bad scalar") }
                    for b in UTF8.encode(u)! { out.append(b) }
                default: throw fail("bad escape")
                }
            }
        }

        mutating func number() throws -> Double {
            let start = i
            if bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count else { throw fail("bad number") }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[i]) {
                while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
            } else { throw fail("bad number") }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                let d = i
                while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
                guard i > d else { throw fail("bad number") }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                let d = i
                while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
                guard i > d else { throw fail("bad number") }
            }
            guard i - start <= 64, let v = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else { throw fail("bad number") }
            // 1e999 reads as infinity, which JSON cannot express: serialize would write `inf`.
            guard v.isFinite else { throw fail("number out of range") }
            return v
        }
    }

    // MARK: writing

    /// The text of `v`. A value holding a `.secret` is refused (a programming error): tokens are
    /// written into `SecretBytes` only, by `serializeSecret`.
    public static func serialize(_ v: JSONValue) -> String {
        var out = ""
        write(v, into: &out)
        return out
    }

    /// The same text, written straight into `SecretBytes` (followed by `suffix`): for documents,
    /// bodies and answers that carry tokens, so that no String or array copy is made. The size
    /// is counted first, so the text is written into one buffer of exactly its size (each
    /// `SecretBytes` region costs a mapping: none is made and dropped while it grows).
    public static func serializeSecret(_ v: JSONValue, suffix: String = "") -> SecretBytes {
        var out = SecretBytes(capacity: serializedCount(v) + suffix.utf8.count)
        write(v, into: &out)
        out.append(utf8: suffix)
        return out
    }

    /// How many bytes `serializeSecret(v)` writes.
    public static func serializedCount(_ v: JSONValue) -> Int {
        var counter = JSONByteCount()
        write(v, into: &counter)
        return counter.count
    }

    /// An object's members as `serialize` writes them between its braces, appended to `out`:
    /// for text put around a token that is written elsewhere (the broker's cached answer).
    package static func writeMembers(_ members: [(String, JSONValue)], into out: inout [UInt8]) {
        writeMemberList(members, into: &out)
    }

    private static func writeMemberList<Output: JSONOutput & ~Copyable>(_ members: [(String, JSONValue)], into out: inout Output) {
        for (n, (k, item)) in members.enumerated() {
            if n > 0 { out.write(",") }
            quote(k, into: &out); out.write(":"); write(item, into: &out)
        }
    }

    static func write<Output: JSONOutput & ~Copyable>(_ v: JSONValue, into out: inout Output) {
        switch v {
        case .null: out.write("null")
        case .bool(let b): out.write(b ? "true" : "false")
        case .number(let d):
            if d.rounded() == d && abs(d) < 1e15 { out.write(String(Int64(d))) } else { out.write("\(d)") }
        case .string(let s): quote(s, into: &out)
        case .secret(let t): out.write(secret: t)
        case .array(let items):
            out.write("[")
            for (n, item) in items.enumerated() { if n > 0 { out.write(",") }; write(item, into: &out) }
            out.write("]")
        case .object(let members):
            out.write("{")
            writeMemberList(members, into: &out)
            out.write("}")
        }
    }

    /// `s` quoted: written whole when no byte of it needs an escape (keys, ids, dates and most
    /// text), else scalar by scalar.
    static func quote<Output: JSONOutput & ~Copyable>(_ s: String, into out: inout Output) {
        let plain = s.utf8.withContiguousStorageIfAvailable { needsNoEscape(UnsafeRawBufferPointer($0)) } ?? false
        if plain {
            out.write("\""); out.write(s); out.write("\"")
        } else {
            quote(s.unicodeScalars, into: &out)
        }
    }

    static func quote<Scalars: Sequence, Output: JSONOutput & ~Copyable>(_ scalars: Scalars, into out: inout Output)
    where Scalars.Element == Unicode.Scalar {
        out.write("\"")
        for scalar in scalars {
            switch scalar {
            case "\"": out.write("\\\"")
            case "\\": out.write("\\\\")
            case "\n": out.write("\\n")
            case "\r": out.write("\\r")
            case "\t": out.write("\\t")
            default:
                // C0, DEL and C1 controls, and the bidi overrides/isolates, are written as \u
                // escapes: JSON printed to a terminal can then neither drive it nor reorder it.
                let v = scalar.value
                if v < 0x20 || (0x7F...0x9F).contains(v) || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) {
                    let hex = String(scalar.value, radix: 16)
                    out.write("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
                } else {
                    out.write(scalar)
                }
            }
        }
        out.write("\"")
    }
}

/// Where the JSON writer puts its text: a String (what is printed), `SecretBytes` (documents,
/// bodies and answers with tokens), or a counter (the size of the latter, first).
protocol JSONOutput: ~Copyable {
    mutating func write(_ text: String)
    mutating func write(_ scalar: Unicode.Scalar)
    mutating func write(secret: SecretToken)
}

/// Text that holds no secret, as bytes (`writeMembers`).
extension Array: JSONOutput where Element == UInt8 {
    mutating func write(_ text: String) { append(contentsOf: text.utf8) }
    mutating func write(_ scalar: Unicode.Scalar) { append(contentsOf: UTF8.encode(scalar)!) }
    mutating func write(secret: SecretToken) {
        preconditionFailure("a token is written into SecretBytes only (JSON.serializeSecret), never into an array")
    }
}

extension String: JSONOutput {
    mutating func write(_ text: String) { self += text }
    mutating func write(_ scalar: Unicode.Scalar) { unicodeScalars.append(scalar) }
    mutating func write(secret: SecretToken) {
        preconditionFailure("a token is written into SecretBytes only (JSON.serializeSecret), never into a String")
    }
}

extension JSON {
    /// True when `quote` would write these bytes as they are: printable ASCII but `"` and `\`.
    /// Every token is (base64url and dots), so its quoting is one copy instead of a walk through
    /// its scalars (the broker quotes two tokens per answer; issue 31).
    package static func needsNoEscape(_ bytes: UnsafeRawBufferPointer) -> Bool {
        ByteScan.all(bytes, in: 0x20...0x7E, excluding: (0x22, 0x5C))
    }
}

extension SecretBytes: JSONOutput {
    mutating func write(_ text: String) { append(utf8: text) }
    mutating func write(_ scalar: Unicode.Scalar) {
        for b in UTF8.encode(scalar)! { append(b) }
    }
    mutating func write(secret: SecretToken) {
        secret.withUnsafeBytes { bytes in
            if JSON.needsNoEscape(bytes) {
                append(utf8: "\""); append(bytes); append(utf8: "\"")
            } else {
                JSON.quote(UTF8Scalars(bytes), into: &self)
            }
        }
    }
}

struct JSONByteCount: JSONOutput {
    var count = 0
    mutating func write(_ text: String) { count += text.utf8.count }
    mutating func write(_ scalar: Unicode.Scalar) { count += UTF8.width(scalar) }
    mutating func write(secret: SecretToken) {
        secret.withUnsafeBytes { bytes in
            if JSON.needsNoEscape(bytes) { count += bytes.count + 2 } else { JSON.quote(UTF8Scalars(bytes), into: &self) }
        }
    }
}

/// Where the parser decodes a string: an array (ordinary strings) or `SecretBytes` (tokens).
protocol DecodedString: ~Copyable {
    mutating func append(_ byte: UInt8)
}

extension Array: DecodedString where Element == UInt8 {}
extension SecretBytes: DecodedString {}
