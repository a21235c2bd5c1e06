import Testing
@testable import Secrets

@Suite struct SodiumTests {
    @Test func constantTimeEqualityOfStringsAndBytes() {
        #expect(Sodium.equal("abc", "abc"))
        #expect(!Sodium.equal("abc", "abd"))
        #expect(!Sodium.equal("abc", "ab"))
        #expect(!Sodium.equal("", "a"))
        #expect(Sodium.equal("", ""))
        #expect(Sodium.equal([1, 2, 3], [1, 2, 3]))
        #expect(!Sodium.equal([1, 2, 3], [1, 2, 4]))
        #expect(!Sodium.equal([1, 2, 3], [1, 2]))
        #expect(Sodium.equal([UInt8](), []))
    }

    @Test func sha256OfKnownInputs() {
        func hex(_ b: [UInt8]) -> String { b.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }
        #expect(hex(Sodium.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(Sodium.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func randomBytesHaveTheRightLengthAndDiffer() {
        #expect(Sodium.random(0) == [])
        let a = Sodium.random(32), b = Sodium.random(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
    }
}
