/// Base64 (RFC 4648) in both alphabets, written here so the hot path needs no Foundation.
public enum Base64 {
    private static let std = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let url = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode<C: Collection>(_ data: C, urlSafe: Bool = false, padded: Bool = true) -> String where C.Element == UInt8 {
        let table = urlSafe ? url : std
        let bytes = Array(data)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)], table[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)]]
            if padded { out += [61, 61] }
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)]]
            if padded { out += [61] }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes either alphabet, padding optional. With `strict`, rejects padding and
    /// non-canonical trailing bits (what age requires). Returns nil on any bad character.
    public static func decode(_ text: String, urlSafe: Bool? = nil, strict: Bool = false) -> [UInt8]? {
        var chars = Array(text.utf8)
        if strict, chars.contains(61) { return nil }
        while chars.last == 61 { chars.removeLast() }
        if chars.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        for c in chars {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - 97 + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - 48 + 52)
            case UInt8(ascii: "+") where urlSafe != true: v = 62
            case UInt8(ascii: "/") where urlSafe != true: v = 63
            case UInt8(ascii: "-") where urlSafe != false: v = 62
            case UInt8(ascii: "_") where urlSafe != false: v = 63
            default: return nil
            }
            acc = acc << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        if strict && acc != 0 { return nil }
        return out
    }
}
