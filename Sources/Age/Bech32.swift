import Secrets

/// Bech32 (BIP 173) as age uses it: no 90-character limit, case-insensitive but never mixed case.
public enum Bech32 {
    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let generator: [UInt32] = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        var chk: UInt32 = 1
        for v in values {
            let top = chk >> 25
            chk = (chk & 0x1ffffff) << 5 ^ UInt32(v)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 { chk ^= generator[i] }
        }
        return chk
    }

    private static func hrpExpand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    private static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var acc = 0, bits = 0
        var out: [UInt8] = []
        let maxv = (1 << to) - 1
        for v in data {
            guard Int(v) >> from == 0 else { return nil }
            acc = acc << from | Int(v)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((acc >> bits) & maxv))
            }
        }
        if pad {
            if bits > 0 { out.append(UInt8((acc << (to - bits)) & maxv)) }
        } else if bits >= from || (acc << (to - bits)) & maxv != 0 {
            return nil
        }
        return out
    }

    /// Encodes `data` under `hrp`; the result is upper-case when `uppercase`.
    public static func encode(hrp: String, data: [UInt8], uppercase: Bool = false) -> String {
        let h = Array(hrp.lowercased().utf8)
        let five = convertBits(data, from: 8, to: 5, pad: true)!
        let values = hrpExpand(h) + five + [0, 0, 0, 0, 0, 0]
        let mod = polymod(values) ^ 1
        let checksum = (0..<6).map { UInt8((mod >> UInt32(5 * (5 - $0))) & 31) }
        let text = String(decoding: h + [UInt8(ascii: "1")] + (five + checksum).map { charset[Int($0)] }, as: UTF8.self)
        return uppercase ? text.uppercased() : text
    }

    /// Decodes to (lower-case hrp, 8-bit data), or nil for any malformed input.
    public static func decode(_ text: String) -> (hrp: String, data: [UInt8])? {
        let raw = Array(text.utf8)
        guard raw.allSatisfy({ $0 >= 33 && $0 <= 126 }) else { return nil }
        let hasLower = raw.contains { $0 >= 97 && $0 <= 122 }
        let hasUpper = raw.contains { $0 >= 65 && $0 <= 90 }
        if hasLower && hasUpper { return nil }
        let s = raw.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }
        guard let sep = s.lastIndex(of: UInt8(ascii: "1")), sep >= 1, s.count - sep - 1 >= 6 else { return nil }
        let hrp = Array(s[..<sep])
        var values: [UInt8] = []
        for c in s[(sep + 1)...] {
            guard let i = charset.firstIndex(of: c) else { return nil }
            values.append(UInt8(i))
        }
        guard polymod(hrpExpand(hrp) + values) == 1 else { return nil }
        guard let data = convertBits(Array(values.dropLast(6)), from: 5, to: 8, pad: false) else { return nil }
        return (String(decoding: hrp, as: UTF8.self), data)
    }
}
