// Clock.parseRFC3339 on any text, and rfc3339 -> parse for any time the writer can express.
#if canImport(Glibc)
import Glibc
#endif
@testable import CredentialCore
import FuzzSupport

private func daysIn(_ y: Int, _ m: Int) -> Int {
    switch m {
    case 2: return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let text = String(decoding: input, as: UTF8.self)
    if let t = Clock.parseRFC3339(text) {
        let b = Array(text.utf8)
        require(b.count >= 20, "accepted a short time")
        // For a plain UTC time on a real calendar day, writing it back gives the same text.
        let digits = { (r: Range<Int>) in Int(String(decoding: b[r], as: UTF8.self))! }
        let y = digits(0..<4), mo = digits(5..<7), d = digits(8..<10), s = digits(17..<19)
        if b.count == 20, b[10] == 84, b[19] == 90, y >= 1970, d <= daysIn(y, mo), s < 60 {
            require(Clock.rfc3339(t) == text, "\(text) parsed to \(t), written back as \(Clock.rfc3339(t))")
        }
    }
    // Writer -> reader for 0 ... 9999-12-31T23:59:59Z.
    var raw: UInt64 = 0
    for (i, x) in input.prefix(8).enumerated() { raw |= UInt64(x) << UInt64(8 * i) }
    let seconds = Int64(raw % 253_402_300_800)
    let written = Clock.rfc3339(seconds)
    require(Clock.parseRFC3339(written) == seconds, "\(seconds) written as \(written) does not read back")
    return 0
}
