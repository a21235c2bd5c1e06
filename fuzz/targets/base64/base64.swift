// Base64.decode in every variant on any text; encode/decode round trips; exact = canonical.
import FuzzSupport
@testable import Secrets

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    for alphabet in [Base64.Alphabet.standard, .urlSafe] {
        for padded in [false, true] {
            let e = Base64.encode(input, alphabet: alphabet, padded: padded)
            require(Base64.decode(e, alphabet: alphabet, padding: padded ? .required : .none) == input,
                    "round trip failed (\(alphabet), padded \(padded))")
            require(Base64.decode(e, alphabet: alphabet, padding: .optional) == input,
                    "round trip with optional padding failed (\(alphabet), padded \(padded))")
        }
    }
    let text = String(decoding: input, as: UTF8.self)
    for alphabet in [Base64.Alphabet.standard, .urlSafe] {
        let optional = Base64.decode(text, alphabet: alphabet, padding: .optional)
        // Each exact variant accepts only its own canonical encoding, and optional padding agrees with it.
        if let bare = Base64.decode(text, alphabet: alphabet, padding: .none) {
            require(optional == bare, "optional padding and no padding decode differ")
            require(Base64.encode(bare, alphabet: alphabet, padded: false) == text,
                    "unpadded decoding accepted non-canonical text \(text.debugDescription)")
        }
        if let padded = Base64.decode(text, alphabet: alphabet, padding: .required) {
            require(optional == padded, "optional padding and required padding decode differ")
            require(Base64.encode(padded, alphabet: alphabet, padded: true) == text,
                    "padded decoding accepted non-canonical text \(text.debugDescription)")
        }
        if let optional { require(optional.count <= input.count * 3 / 4 + 1, "decoded more than the text holds") }
    }
    return 0
}
