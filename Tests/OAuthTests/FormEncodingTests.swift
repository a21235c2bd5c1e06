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
}
