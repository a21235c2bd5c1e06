import Testing
@testable import CredentialCore

/// `ByteScan` reads eight bytes at a time; each of its answers must be the plain byte-by-byte one,
/// wherever in a buffer (and in which of its words or its tail) the deciding byte lies.
struct ByteScanTests {
    static func tokenSafe(_ b: [UInt8]) -> Bool { !b.isEmpty && b.allSatisfy { $0 > 0x20 && $0 < 0x7F } }
    static func noEscape(_ b: [UInt8]) -> Bool { b.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C } }
    static func ascii(_ b: [UInt8]) -> Bool { b.allSatisfy { $0 < 0x80 } }

    func agree(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            #expect(Sanitize.isTokenSafe(raw) == Self.tokenSafe(bytes), "isTokenSafe \(bytes)")
            #expect(JSON.needsNoEscape(raw) == Self.noEscape(bytes), "needsNoEscape \(bytes)")
            #expect(ByteScan.isASCII(raw) == Self.ascii(bytes), "isASCII \(bytes)")
        }
    }

    @Test func everyByteValueAtEveryPlaceOfAWordAndTheTail() {
        // 19 bytes: two whole words and a tail of three; a plain base64url letter everywhere else.
        for value in 0...255 {
            for at in 0..<19 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 19)
                bytes[at] = UInt8(value)
                agree(bytes)
            }
        }
    }

    @Test func theEdgesOfEachRangeSideBySide() {
        // Bytes that straddle the limits next to each other: a borrow or a carry between two
        // bytes of a word must not hide or invent one.
        let edges: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF]
        for a in edges {
            for b in edges {
                for at in 0..<15 {
                    var bytes = [UInt8](repeating: 0x41, count: 16)
                    bytes[at] = a
                    bytes[at + 1] = b
                    agree(bytes)
                }
            }
        }
    }

    @Test func randomBuffersOfEveryLengthUpTo64() {
        var rng = SystemRandomNumberGenerator()
        for length in 0...64 {
            for _ in 0..<200 {
                // Mostly plain bytes, so that a buffer passes often enough to be tested both ways.
                let bytes = (0..<length).map { _ -> UInt8 in
                    Int.random(in: 0..<40, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng) : UInt8.random(in: 0x23...0x5B, using: &rng)
                }
                agree(bytes)
            }
        }
    }
}
