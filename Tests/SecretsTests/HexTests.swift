import Testing
import Secrets

@Suite struct HexTests {
    @Test func encodesLowerCaseAndDecodesEitherCase() {
        #expect(Hex.encode([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.decode("000FA5ff") == [0x00, 0x0f, 0xa5, 0xff])
        let bytes = (0...255).map { UInt8($0) }
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
    }

    @Test(arguments: ["0", "abc", "0g", "zz", " 00", "00 "])
    func refusesWhatIsNotAnEvenRunOfHexDigits(_ text: String) {
        #expect(Hex.decode(text) == nil)
    }
}
