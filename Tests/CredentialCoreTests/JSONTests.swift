import Testing
@testable import CredentialCore
@testable import Secrets

@Suite struct JSONTests {
    @Test func parsesAndSerializesRoundTrip() throws {
        let text = #"{"a":1,"b":[true,false,null],"c":"x\"\u00e9\ud83d\ude00\n","d":-1.5e3}"#
        let v = try JSON.parse(text)
        #expect(v["a"]?.intValue == 1)
        #expect(v["c"]?.stringValue == "x\"é😀\n")
        #expect(v["d"]?.doubleValue == -1500)
        #expect(try JSON.parse(JSON.serialize(v)) == v)
    }

    @Test(arguments: ["", "{", "{\"a\":}", "[1,]", "01", "\"\u{01}\"", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "1 2", "nul"])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONError.self) { try JSON.parse(text) }
    }

    /// Found by fuzz/targets/json (2026-11-29): `1e309` parsed as +infinity, and
    /// serialize wrote it back as `inf`, which is not JSON.
    @Test(arguments: ["1e309", "-1e309", "[1E400]", "{\"exp\":123456789e999}"])
    func rejectsNumbersOutOfDoubleRange(_ text: String) {
        #expect(throws: JSONError.self) { try JSON.parse(text) }
    }

    @Test func largestFiniteNumbersRoundTrip() throws {
        for text in ["1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "1e-400"] {
            let v = try JSON.parse(text)
            #expect(try JSON.parse(JSON.serialize(v)) == v)
        }
    }

    @Test func rejectsDeepNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONError.self) { try JSON.parse(deep) }
    }

    @Test func intervalAsStringOrNumber() throws {
        #expect(try JSON.parse(#"{"i":"5"}"#)["i"]?.intValue == 5)
        #expect(try JSON.parse(#"{"i":5}"#)["i"]?.intValue == 5)
    }

    @Test func rfc3339() {
        #expect(Clock.rfc3339(0) == "1970-01-01T00:00:00Z")
        #expect(Clock.rfc3339(1_795_000_000) == "2026-11-18T11:06:40Z")
        #expect(Clock.parseRFC3339("2026-11-18T11:06:40Z") == 1_795_000_000)
        #expect(Clock.parseRFC3339("2026-11-18T12:06:40.123+01:00") == 1_795_000_000)
        #expect(Clock.parseRFC3339("2026-13-18T09:46:40Z") == nil)
    }
}
