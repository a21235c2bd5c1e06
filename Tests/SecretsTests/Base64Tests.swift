import Testing
@testable import Secrets

@Suite struct Base64Tests {
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test func rfc4648VectorsInEveryVariant() {
        for (plain, padded) in Self.rfc4648 {
            let bytes = Array(plain.utf8)
            let unpadded = String(padded.prefix { $0 != "=" })
            #expect(Base64.encode(bytes, alphabet: .standard, padded: true) == padded)
            #expect(Base64.encode(bytes, alphabet: .standard, padded: false) == unpadded)
            #expect(Base64.decode(padded, alphabet: .standard, padding: .required) == bytes)
            #expect(Base64.decode(unpadded, alphabet: .standard, padding: .none) == bytes)
            #expect(Base64.decode(padded, alphabet: .standard, padding: .optional) == bytes)
            #expect(Base64.decode(unpadded, alphabet: .standard, padding: .optional) == bytes)
        }
    }

    /// Found by fuzz/base64 and fuzz/age: libsodium 1.0.18 alone decoded text with bytes above
    /// 0x7F (the age header parser then accepted a stanza body that does not re-encode).
    @Test func bytesAboveASCIIAreRefused() {
        let crash = String(decoding: [UInt8](repeating: 0xA2, count: 24) + Array("---m".utf8), as: UTF8.self)
        for alphabet in [Base64.Alphabet.standard, .urlSafe] {
            for padding in [Base64.Padding.none, .required, .optional] {
                #expect(Base64.decode(crash, alphabet: alphabet, padding: padding) == nil)
                #expect(Base64.decode("Zm9v\u{B8}Zm9v", alphabet: alphabet, padding: padding) == nil)
                #expect(Base64.decode("Zm9v Zm9v", alphabet: alphabet, padding: padding) == nil)
            }
        }
    }

    @Test func alphabetsDifferOnlyInTwoCharacters() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes, alphabet: .standard, padded: false) == "+/+/")
        #expect(Base64.encode(bytes, alphabet: .urlSafe, padded: false) == "-_-_")
        #expect(Base64.encode([0xFB, 0xFF], alphabet: .urlSafe, padded: true) == "-_8=")
        #expect(Base64.decode("-_-_", alphabet: .urlSafe, padding: .none) == bytes)
        #expect(Base64.decode("-_-_", alphabet: .standard, padding: .none) == nil)
        #expect(Base64.decode("+/+/", alphabet: .urlSafe, padding: .none) == nil)
        #expect(Base64.decode("-_8=", alphabet: .urlSafe, padding: .required) == [0xFB, 0xFF])
    }

    @Test func roundTripsOfEveryLengthInEveryVariant() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            for alphabet in [Base64.Alphabet.standard, .urlSafe] {
                let padded = Base64.encode(bytes, alphabet: alphabet, padded: true)
                let bare = Base64.encode(bytes, alphabet: alphabet, padded: false)
                #expect(padded.utf8.count == (n + 2) / 3 * 4)
                #expect(bare.utf8.count == (n * 4 + 2) / 3)
                #expect(Base64.decode(padded, alphabet: alphabet, padding: .required) == bytes)
                #expect(Base64.decode(bare, alphabet: alphabet, padding: .none) == bytes)
                #expect(Base64.decode(padded, alphabet: alphabet, padding: .optional) == bytes)
                #expect(Base64.decode(bare, alphabet: alphabet, padding: .optional) == bytes)
            }
        }
    }

    @Test func paddingIsExactWhereItIsRequiredAndRefusedWhereItIsNot() {
        #expect(Base64.decode("Zg==", alphabet: .standard, padding: .none) == nil)
        #expect(Base64.decode("Zm8=", alphabet: .standard, padding: .none) == nil)
        #expect(Base64.decode("Zg", alphabet: .standard, padding: .required) == nil)
        #expect(Base64.decode("Zg=", alphabet: .standard, padding: .required) == nil)
        #expect(Base64.decode("Zg=", alphabet: .standard, padding: .optional) == nil)
        #expect(Base64.decode("Zg===", alphabet: .standard, padding: .required) == nil)
        #expect(Base64.decode("Zm9v=", alphabet: .standard, padding: .optional) == nil)
        #expect(Base64.decode("Zm8==", alphabet: .standard, padding: .required) == nil)
    }

    @Test func nonCanonicalTrailingBitsAreRefusedInEveryVariant() {
        // "Zh" and "Zm9" carry bits beyond the last byte ("Zg" and "Zm8" are canonical).
        for (text, padding) in [("Zh", Base64.Padding.none), ("Zh==", .required), ("Zh", .optional), ("Zh==", .optional),
                                ("Zm9", .none), ("Zm9=", .required), ("YR", .none)] {
            #expect(Base64.decode(text, alphabet: .standard, padding: padding) == nil, "\(text)")
            #expect(Base64.decode(text, alphabet: .urlSafe, padding: padding) == nil, "\(text)")
        }
        #expect(Base64.decode("YQ", alphabet: .standard, padding: .none) == [0x61])
    }

    @Test func bytesOutsideTheAlphabetAreRefused() {
        for text in ["Zm9v\n", "Zm 9v", " Zm9v", "Zm9v\u{0}", "Zm9v\r\n", "Z", "Zm9vY", "Zm9v*", "Zm9vé"] {
            #expect(Base64.decode(text, alphabet: .standard, padding: .none) == nil, "\(text.debugDescription)")
            #expect(Base64.decode(text, alphabet: .standard, padding: .optional) == nil, "\(text.debugDescription)")
        }
        #expect(Base64.decode("", alphabet: .standard, padding: .none) == [])
        #expect(Base64.decode("", alphabet: .urlSafe, padding: .required) == [])
    }
}
