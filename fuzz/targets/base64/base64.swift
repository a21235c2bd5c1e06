// Base64.decode in every mode on any text; encode/decode round trips; strict = canonical.
import FuzzSupport
@testable import Secrets

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    for urlSafe in [false, true] {
        for padded in [false, true] {
            let e = Base64.encode(input, urlSafe: urlSafe, padded: padded)
            require(Base64.decode(e, urlSafe: urlSafe) == input, "round trip failed (urlSafe \(urlSafe), padded \(padded))")
            require(Base64.decode(e) == input, "round trip without an alphabet failed")
            if !padded { require(Base64.decode(e, urlSafe: urlSafe, strict: true) == input, "strict refused canonical text") }
        }
    }
    let text = String(decoding: input, as: UTF8.self)
    for urlSafe in [nil, false, true] as [Bool?] {
        let loose = Base64.decode(text, urlSafe: urlSafe)
        if let strict = Base64.decode(text, urlSafe: urlSafe, strict: true) {
            require(loose == strict, "strict and loose decode differ")
            // Strict accepts only the canonical unpadded encoding.
            let isURL = text.utf8.contains(45) || text.utf8.contains(95)
            let isStd = text.utf8.contains(43) || text.utf8.contains(47)
            if urlSafe == nil && isURL && isStd { continue } // either alphabet, mixed: lenient by design
            require(Base64.encode(strict, urlSafe: urlSafe ?? isURL, padded: false) == text,
                    "strict accepted non-canonical text \(text.debugDescription)")
        }
        if let loose { require(loose.count <= input.count * 3 / 4 + 1, "decoded more than the text holds") }
    }
    return 0
}
