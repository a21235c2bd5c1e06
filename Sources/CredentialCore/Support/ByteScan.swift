/// Tests of every byte of a buffer, made eight bytes at a time: the broker runs them over each
/// token it answers with (kilobytes, ARCHITECTURE.md "A broker request"). Each says exactly what
/// the plain byte-by-byte test says (ByteScanTests compares them).
package enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// True when every byte is in `range` (0 < low ≤ high < 0x80) and is neither of `excluded`.
    package static func all(_ bytes: UnsafeRawBufferPointer, in range: ClosedRange<UInt8>, excluding excluded: (UInt8, UInt8)? = nil) -> Bool {
        precondition(range.lowerBound > 0 && range.upperBound < 0x80)
        let below = ones &* UInt64(range.lowerBound), above = ones &* UInt64(0x7F - range.upperBound)
        // No exclusion: 0, a byte the range refuses already.
        let first = ones &* UInt64(excluded?.0 ?? 0), second = ones &* UInt64(excluded?.1 ?? 0)
        var i = 0
        while i + 8 <= bytes.count {
            let x = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A byte ≥ 0x80, or above `high` (adding 0x7F − high sets its top bit), or below `low`
            // (subtracting `low` borrows into its top bit when the byte's own top bit is clear),
            // or an excluded one (a zero byte of x XOR that byte, found the same way).
            let v = x ^ first, w = x ^ second
            let flagged = (x | (x &+ above)) | ((x &- below) & ~x) | ((v &- ones) & ~v) | ((w &- ones) & ~w)
            if flagged & highs != 0 { return false }
            i += 8
        }
        while i < bytes.count {
            let b = bytes[i]
            if !range.contains(b) || b == excluded?.0 || b == excluded?.1 { return false }
            i += 1
        }
        return true
    }

    /// True when every byte is below 0x80.
    package static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i + 8 <= bytes.count {
            if bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & highs != 0 { return false }
            i += 8
        }
        while i < bytes.count {
            if bytes[i] >= 0x80 { return false }
            i += 1
        }
        return true
    }
}
