import Testing
@testable import Transport

/// The one percent-decoder (`FormEncoding.percentDecoded`) and the form decoder built on it.
@Suite struct FormEncodingTests {
    @Test func escapesInEitherCaseAndPlusOnlyInForms() {
        #expect(FormEncoding.percentDecoded("a%2Fb%2fc", plusIsSpace: false) == Array("a/b/c".utf8))
        #expect(FormEncoding.percentDecoded("a+b%2B", plusIsSpace: true) == Array("a b+".utf8))
        #expect(FormEncoding.percentDecoded("a+b%2B", plusIsSpace: false) == Array("a+b+".utf8))
        #expect(FormEncoding.percentDecoded("%00%FF", plusIsSpace: false) == [0x00, 0xFF])
        #expect(FormEncoding.percentDecoded("", plusIsSpace: true) == [])
    }

    @Test(arguments: ["%", "%4", "%G0", "%0G", "a%2", "%%41"])
    func aMalformedEscapeIsNil(_ text: String) {
        #expect(FormEncoding.percentDecoded(text, plusIsSpace: false) == nil)
        #expect(FormEncoding.decode("k=" + text) == nil)
    }

    @Test func formPairs() throws {
        let pairs = try #require(FormEncoding.decode("code=ac_1&state=st%2D2&empty=&x+y=a+b&=v"))
        #expect(pairs.map(\.0) == ["code", "state", "empty", "x y", ""])
        #expect(pairs.map(\.1) == ["ac_1", "st-2", "", "a b", "v"])
        #expect(FormEncoding.decode("k=%C3%28") == nil, "not UTF-8")
    }

    /// '=' and '&' separate on bytes: followed by a combining mark they are no Character of their
    /// own, and the text decoder once split by Characters (the fuzz seed combining-mark-after-equals).
    @Test func separatorsBeforeACombiningMarkStillSeparate() throws {
        let pairs = try #require(FormEncoding.decode("a=\u{65A}x&\u{301}b=c"))
        #expect(pairs.map(\.0) == ["a", "\u{301}b"])
        #expect(pairs.map(\.1) == ["\u{65A}x", "c"])
    }

    /// The guarded-memory decoder puts the secret names' values in tokens and agrees with the text one.
    @Test func secretValuesAreDecodedIntoTokens() throws {
        let query = Array("state=s%2D1&code=ac%2B1+x".utf8)
        let pairs = try #require(query.withUnsafeBytes { FormEncoding.decode(query: $0, secretNames: ["code"]) })
        guard case .text("s-1") = pairs[0].1, case .secret(let code) = pairs[1].1 else {
            Issue.record("state should be text and code a token: \(pairs.map(\.0))")
            return
        }
        #expect(code.equals(utf8: "ac+1 x"))
        #expect(Array("code=%ZZ".utf8).withUnsafeBytes { FormEncoding.decode(query: $0, secretNames: ["code"]) } == nil)
    }
}
