import Secrets

/// Bech32 (BIP 173) as age uses it: no 90-character limit, case-insensitive but never mixed case.
/// Encoding and decoding stream the 5-bit groups (no intermediate arrays), so a secret key's text
/// can be decoded from and encoded into `SecretBytes` without a copy outside them.
public enum Bech32 {
    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let generator: [UInt32] = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]
    /// The 5-bit value of each lower-case charset byte, 0xFF for the others.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 128)
        for (i, c) in charset.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// The BIP 173 checksum state, fed one 5-bit value at a time.
    private struct Checksum {
        var chk: UInt32 = 1
        mutating func feed(_ v: UInt8) {
            let top = chk >> 25
            chk = (chk & 0x1ffffff) << 5 ^ UInt32(v)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 { chk ^= generator[i] }
        }
        mutating func feed(hrp: [UInt8]) {
            for c in hrp { feed(c >> 5) }
            feed(0)
            for c in hrp { feed(c & 31) }
        }
    }

    /// Calls `group` with the 5-bit groups of `data`, the last one zero-padded.
    private static func groups(of data: UnsafeRawBufferPointer, _ group: (UInt8) -> Void) {
        var acc = 0, bits = 0
        for v in data {
            acc = (acc << 8 | Int(v)) & 0xFFF
            bits += 8
            while bits >= 5 {
                bits -= 5
                group(UInt8((acc >> bits) & 31))
            }
        }
        if bits > 0 { group(UInt8((acc << (5 - bits)) & 31)) }
    }

    /// Writes the text of (`hrp`, `data`) byte by byte to `emit`.
    private static func encode(hrp: String, data: UnsafeRawBufferPointer, uppercase: Bool, _ emit: (UInt8) -> Void) {
        let h = Array(hrp.lowercased().utf8)
        var sum = Checksum()
        sum.feed(hrp: h)
        groups(of: data) { sum.feed($0) }
        for _ in 0..<6 { sum.feed(0) }
        let mod = sum.chk ^ 1
        func out(_ c: UInt8) { emit(uppercase && c >= 97 && c <= 122 ? c - 32 : c) }
        for c in h { out(c) }
        out(UInt8(ascii: "1"))
        groups(of: data) { out(charset[Int($0)]) }
        for i in 0..<6 { out(charset[Int((mod >> UInt32(5 * (5 - i))) & 31)]) }
    }

    /// Decodes `text`, handing each data byte to `emit` as it is found; returns the lower-case hrp,
    /// or nil for any malformed input (the bytes emitted so far must then be discarded).
    private static func decode(_ text: UnsafeRawBufferPointer, _ emit: (UInt8) -> Void) -> String? {
        guard text.allSatisfy({ $0 >= 33 && $0 <= 126 }) else { return nil }
        let hasLower = text.contains { $0 >= 97 && $0 <= 122 }
        let hasUpper = text.contains { $0 >= 65 && $0 <= 90 }
        if hasLower && hasUpper { return nil }
        func lower(_ c: UInt8) -> UInt8 { c >= 65 && c <= 90 ? c + 32 : c }
        guard let sep = text.lastIndex(of: UInt8(ascii: "1")), sep >= 1, text.count - sep - 1 >= 6 else { return nil }
        let hrp = text[..<sep].map(lower)
        var sum = Checksum()
        sum.feed(hrp: hrp)
        let dataEnd = text.count - 6
        var acc = 0, bits = 0
        for i in (sep + 1)..<text.count {
            let v = values[Int(lower(text[i]))]
            guard v != 0xFF else { return nil }
            sum.feed(v)
            guard i < dataEnd else { continue }
            acc = (acc << 5 | Int(v)) & 0xFFF
            bits += 5
            if bits >= 8 {
                bits -= 8
                emit(UInt8((acc >> bits) & 0xFF))
            }
        }
        // The checksum holds, and the padding is fewer than 5 zero bits.
        guard sum.chk == 1, bits < 5, (acc << (8 - bits)) & 0xFF == 0 else { return nil }
        return String(decoding: hrp, as: UTF8.self)
    }

    // MARK: public data (recipients)

    /// Encodes `data` under `hrp`; the result is upper-case when `uppercase`.
    public static func encode(hrp: String, data: [UInt8], uppercase: Bool = false) -> String {
        var text: [UInt8] = []
        data.withUnsafeBytes { encode(hrp: hrp, data: $0, uppercase: uppercase) { text.append($0) } }
        return String(decoding: text, as: UTF8.self)
    }

    /// Decodes to (lower-case hrp, 8-bit data), or nil for any malformed input.
    public static func decode(_ text: String) -> (hrp: String, data: [UInt8])? {
        var data: [UInt8] = []
        let hrp = Array(text.utf8).withUnsafeBytes { decode($0) { data.append($0) } }
        return hrp.map { ($0, data) }
    }

    // MARK: secret data (identities)

    /// The text of (`hrp`, `data`), as secret as the data.
    public static func encode(hrp: String, secret data: borrowing SecretBytes, uppercase: Bool) -> SecretBytes {
        var text = SecretBytes(capacity: hrp.utf8.count + 1 + (data.count * 8 + 4) / 5 + 6)
        data.withUnsafeBytes { encode(hrp: hrp, data: $0, uppercase: uppercase) { text.append($0) } }
        return text
    }

    /// Decodes `text` into `data` (emptied first); returns the lower-case hrp, or nil with `data`
    /// empty for any malformed input.
    public static func decode(_ text: UnsafeRawBufferPointer, into data: inout SecretBytes) -> String? {
        data.truncate(to: 0)
        guard let hrp = decode(text, { data.append($0) }) else {
            data.truncate(to: 0)
            return nil
        }
        return hrp
    }
}
