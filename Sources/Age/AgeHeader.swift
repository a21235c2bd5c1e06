import Secrets

/// One recipient stanza: `-> TYPE ARG…` and a base64 body.
public struct AgeStanza: Equatable, Sendable {
    public var type: String
    public var args: [String]
    public var body: [UInt8]

    public init(type: String, args: [String], body: [UInt8]) {
        self.type = type
        self.args = args
        self.body = body
    }

    /// `-> type args…\n` then the body wrapped at 64 columns, always ending with a short
    /// (possibly empty) line.
    func encoded() -> [UInt8] {
        var out = Array("-> ".utf8) + Array(([type] + args).joined(separator: " ").utf8) + [10]
        let b64 = Array(Base64.encode(body, alphabet: .standard, padded: false).utf8)
        var i = 0
        while b64.count - i >= 64 {
            out += b64[i..<(i + 64)] + [10]
            i += 64
        }
        out += b64[i...] + [10]
        return out
    }
}

/// A parsed age v1 header. `macInput` is the exact original bytes the MAC covers (up to and
/// including `---`), so verification never depends on re-encoding.
public struct AgeHeader: Equatable, Sendable {
    public static let versionLine = "age-encryption.org/v1"
    public var stanzas: [AgeStanza]
    public var mac: [UInt8]
    /// Original bytes from the start of the file through `---` (no space, no MAC).
    var macInput: [UInt8]
    /// Length of the whole header including the MAC line's newline: the payload starts here.
    var length: Int

    init(stanzas: [AgeStanza], mac: [UInt8], macInput: [UInt8], length: Int) {
        self.stanzas = stanzas
        self.mac = mac
        self.macInput = macInput
        self.length = length
    }

    /// The bytes the MAC covers, re-encoded from the stanzas.
    static func encodeMACInput(_ stanzas: [AgeStanza]) -> [UInt8] {
        var out = Array(versionLine.utf8) + [10]
        for s in stanzas { out += s.encoded() }
        out += Array("---".utf8)
        return out
    }

    /// The full header, re-encoded from stanzas and MAC.
    public func encoded() -> [UInt8] {
        AgeHeader.encodeMACInput(stanzas) + Array(" ".utf8) + Array(Base64.encode(mac, alphabet: .standard, padded: false).utf8) + [10]
    }

    /// True when the header holds an scrypt (passphrase) stanza.
    public var isPassphraseProtected: Bool { stanzas.contains { $0.type == "scrypt" } }

    private static func isArgument(_ a: ArraySlice<UInt8>) -> Bool {
        !a.isEmpty && a.allSatisfy { $0 >= 33 && $0 <= 126 }
    }

    /// Parses the header at the start of `file`. Throws `AgeError.headerFailure`.
    public static func parse(_ file: [UInt8]) throws -> AgeHeader {
        var pos = 0
        // Next line without its LF; a line with no LF (end of file) is a header failure.
        func nextLine() throws -> ArraySlice<UInt8> {
            guard pos < file.count, let nl = file[pos...].firstIndex(of: 10) else {
                throw AgeError.headerFailure("unexpected end of header")
            }
            let line = file[pos..<nl]
            pos = nl + 1
            return line
        }
        guard try nextLine().elementsEqual(versionLine.utf8) else {
            throw AgeError.headerFailure("unsupported version or not an age file")
        }
        var stanzas: [AgeStanza] = []
        while true {
            let lineStart = pos
            let line = try nextLine()
            if line.starts(with: "---".utf8) {
                let macInput = Array(file[..<(lineStart + 3)])
                let rest = line.dropFirst(3)
                guard rest.first == 32, case let text = rest.dropFirst(), text.count == 43,
                      let mac = Base64.decode(String(decoding: text, as: UTF8.self), alphabet: .standard, padding: .none),
                      mac.count == 32 else {
                    throw AgeError.headerFailure("malformed MAC line")
                }
                return AgeHeader(stanzas: stanzas, mac: mac, macInput: macInput, length: pos)
            }
            guard line.starts(with: "-> ".utf8) else { throw AgeError.headerFailure("malformed stanza line") }
            let parts = line.dropFirst(3).split(separator: 32, omittingEmptySubsequences: false)
            guard !parts.isEmpty, parts.allSatisfy(isArgument) else {
                throw AgeError.headerFailure("malformed stanza arguments")
            }
            var body: [UInt8] = []
            while true {
                let b = try nextLine()
                guard b.count <= 64, !b.contains(13),
                      let bytes = Base64.decode(String(decoding: b, as: UTF8.self), alphabet: .standard, padding: .none) else {
                    throw AgeError.headerFailure("malformed stanza body")
                }
                body += bytes
                if b.count < 64 { break }
            }
            stanzas.append(AgeStanza(type: String(decoding: parts[0], as: UTF8.self),
                                     args: parts.dropFirst().map { String(decoding: $0, as: UTF8.self) },
                                     body: body))
        }
    }
}
