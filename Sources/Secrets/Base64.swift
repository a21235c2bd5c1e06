import CSodium

/// Base64 (RFC 4648) by libsodium (`sodium_bin2base64`, `sodium_base642bin`), in its four
/// variants. Decoding is exact: a byte outside the alphabet (whitespace and NUL included) or
/// non-canonical trailing bits (`YR` for `YQ`) are refused in every variant; the padded variants
/// require exactly the right `=` padding and the unpadded ones refuse any.
public enum Base64 {
    public enum Alphabet: Sendable { case standard, urlSafe }

    public enum Padding: Sendable {
        /// `=` padding exactly as RFC 4648 writes it.
        case required
        /// No `=` at all (age, PKCE, JWT as RFC 7515 writes it).
        case none
        /// Either of the two, whichever the text is (a JWT segment from an encoder that pads):
        /// text ending in `=` must be padded correctly, anything else must need no padding.
        case optional
    }

    private static func variant(_ alphabet: Alphabet, padded: Bool) -> Int32 {
        switch (alphabet, padded) {
        case (.standard, true): return sodium_base64_VARIANT_ORIGINAL
        case (.standard, false): return sodium_base64_VARIANT_ORIGINAL_NO_PADDING
        case (.urlSafe, true): return sodium_base64_VARIANT_URLSAFE
        case (.urlSafe, false): return sodium_base64_VARIANT_URLSAFE_NO_PADDING
        }
    }

    public static func encode(_ bytes: [UInt8], alphabet: Alphabet, padded: Bool) -> String {
        let v = variant(alphabet, padded: padded)
        let length = sodium_base64_encoded_len(bytes.count, v) // includes the terminating NUL
        let text = [CChar](unsafeUninitializedCapacity: length) { out, initialized in
            bytes.withUnsafeBufferPointer { b in
                _ = sodium_bin2base64(out.baseAddress!, length, b.baseAddress, b.count, v)
            }
            initialized = length
        }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// The decoded bytes, or nil when `text` is not exactly base64 of `alphabet` with `padding`.
    public static func decode(_ text: some StringProtocol, alphabet: Alphabet, padding: Padding) -> [UInt8]? {
        // libsodium 1.0.18 takes some bytes above 0x7F for base64 digits (found by fuzz/base64 and
        // fuzz/age: "\u{A2}…---m" decoded): only the alphabet's own characters reach it.
        let (c62, c63) = alphabet == .standard ? (UInt8(ascii: "+"), UInt8(ascii: "/")) : (UInt8(ascii: "-"), UInt8(ascii: "_"))
        guard text.utf8.allSatisfy({ b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == c62 || b == c63 || b == 0x3D
        }) else { return nil }
        let chars = text.utf8.map { CChar(bitPattern: $0) }
        let padded: Bool
        switch padding {
        case .required: padded = true
        case .none: padded = false
        case .optional: padded = chars.last == CChar(UInt8(ascii: "="))
        }
        let v = variant(alphabet, padded: padded)
        let capacity = chars.count / 4 * 3 + 3
        var ok = false
        let out = [UInt8](unsafeUninitializedCapacity: capacity) { bin, initialized in
            var length = 0
            // ignore = nil: no byte is skipped (with a set, strchr would also match the NUL byte).
            ok = chars.withUnsafeBufferPointer { c in
                sodium_base642bin(bin.baseAddress!, capacity, c.baseAddress, c.count, nil, &length, nil, v) == 0
            }
            initialized = ok ? length : 0
        }
        return ok ? out : nil
    }
}
