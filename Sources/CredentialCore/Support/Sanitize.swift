import Secrets

/// Vendor text and names from tokens reach terminals and headers only through here:
/// C0/C1 control bytes and DEL are removed so that nothing can drive a terminal (ESC, OSC 52, …)
/// or split a header line.
public enum Sanitize {
    /// Replace every control character (C0, DEL, C1) with nothing; tabs become spaces.
    public static func line(_ s: String, limit: Int = 400) -> String {
        var out = String.UnicodeScalarView()
        var count = 0
        for scalar in s.unicodeScalars {
            if count >= limit { out.append(contentsOf: "…".unicodeScalars); break }
            let v = scalar.value
            if v == 0x09 { out.append(" "); count += 1; continue }
            if v < 0x20 || v == 0x7F || (v >= 0x80 && v < 0xA0) { continue }
            // Unicode bidi overrides and isolates can reorder what a terminal shows.
            if (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) { continue }
            out.append(scalar)
            count += 1
        }
        return String(out)
    }

    /// True when the string has no control bytes, spaces or non-ASCII: what a bearer token,
    /// an account id or a header value may contain.
    public static func isTokenSafe(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isTokenSafe(UnsafeRawBufferPointer($0)) }
    }

    /// The same, for a token's bytes where they lie.
    public static func isTokenSafe(_ token: SecretToken) -> Bool {
        token.withUnsafeBytes { isTokenSafe($0) }
    }

    public static func isTokenSafe(_ bytes: UnsafeRawBufferPointer) -> Bool {
        !bytes.isEmpty && ByteScan.all(bytes, in: 0x21...0x7E)
    }
}
