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

    /// The same text, written into guarded memory of exactly its size (no String, no array): for
    /// an encoding that is itself a secret (the PKCE verifier).
    public static func encodeSecret(_ bytes: UnsafeRawBufferPointer, alphabet: Alphabet, padded: Bool) -> SecretBytes {
        let v = variant(alphabet, padded: padded)
        let length = sodium_base64_encoded_len(bytes.count, v) // includes the terminating NUL
        var text = SecretBytes(capacity: length)
        text.append(upTo: length) { out in
            _ = sodium_bin2base64(out.baseAddress!.assumingMemoryBound(to: CChar.self), length,
                                  bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, v)
            return length
        }
        text.truncate(to: length - 1) // the NUL, wiped
        return text
    }

    /// The decoded bytes, or nil when `text` is not exactly base64 of `alphabet` with `padding`.
    public static func decode(_ text: some StringProtocol, alphabet: Alphabet, padding: Padding) -> [UInt8]? {
        let chars = Array(text.utf8)
        return chars.withUnsafeBytes { raw in
            let capacity = capacity(raw.count)
            var ok = false
            let out = [UInt8](unsafeUninitializedCapacity: capacity) { bin, initialized in
                let length = decode(raw, alphabet: alphabet, padding: padding, into: UnsafeMutableRawBufferPointer(bin))
                ok = length != nil
                initialized = length ?? 0
            }
            return ok ? out : nil
        }
    }

    /// The same, from bytes where they lie (part of a token) into guarded memory.
    public static func decodeSecret(_ text: UnsafeRawBufferPointer, alphabet: Alphabet, padding: Padding) -> SecretBytes? {
        var ok = false
        let room = capacity(text.count)
        var out = SecretBytes(capacity: room)
        out.append(upTo: room) { room in
            let length = decode(text, alphabet: alphabet, padding: padding, into: room)
            ok = length != nil
            return length ?? 0
        }
        guard ok else { return nil }
        return .some(out)
    }

    private static func capacity(_ textCount: Int) -> Int { textCount / 4 * 3 + 3 }

    /// Decodes `text` into `out` (room for `capacity(text.count)` bytes); the decoded length, or
    /// nil when `text` is not exactly base64 of `alphabet` with `padding`.
    private static func decode(_ text: UnsafeRawBufferPointer, alphabet: Alphabet, padding: Padding,
                               into out: UnsafeMutableRawBufferPointer) -> Int? {
        // libsodium 1.0.18 takes some bytes above 0x7F for base64 digits (found by fuzz/base64 and
        // fuzz/age: "\u{A2}…---m" decoded): only the alphabet's own characters reach it.
        let (c62, c63) = alphabet == .standard ? (UInt8(ascii: "+"), UInt8(ascii: "/")) : (UInt8(ascii: "-"), UInt8(ascii: "_"))
        guard text.allSatisfy({ b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == c62 || b == c63 || b == 0x3D
        }) else { return nil }
        let padded: Bool
        switch padding {
        case .required: padded = true
        case .none: padded = false
        case .optional: padded = text.last == UInt8(ascii: "=")
        }
        let v = variant(alphabet, padded: padded)
        var length = 0
        // ignore = nil: no byte is skipped (with a set, strchr would also match the NUL byte).
        // An empty text has no base address; libsodium reads none of it then.
        let empty: CChar = 0
        let ok = withUnsafePointer(to: empty) { fallback in
            let chars = text.baseAddress.map { $0.assumingMemoryBound(to: CChar.self) } ?? fallback
            return sodium_base642bin(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, chars, text.count,
                                     nil, &length, nil, v) == 0
        }
        return ok ? length : nil
    }
}
