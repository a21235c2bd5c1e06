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

    /// Text written whole when no byte needs an escape, scalar by scalar otherwise: the same
    /// escapes either way, into a String, `SecretBytes` or an array.
    @Test func stringsAreQuotedWithTheSameEscapesWhicheverWayTheyAreWritten() {
        let cases: [(String, String)] = [
            ("acct-test-0001", #""acct-test-0001""#),
            ("", #""""#),
            ("a\"b\\c", #""a\"b\\c""#),
            ("line\nbreak\ttab\r", #""line\nbreak\ttab\r""#),
            ("bell\u{7}del\u{7F}", #""bell\u0007del\u007f""#),
            ("é\u{202E}x", "\"é\\u202ex\""),
            ("~ !#$%&'()*+,-./:;<=>?@[]^_`{|}", #""~ !#$%&'()*+,-./:;<=>?@[]^_`{|}""#),
        ]
        for (s, quoted) in cases {
            #expect(JSON.serialize(.string(s)) == quoted, "\(s.debugDescription)")
            #expect(JSON.serialize(.object([(s, .null)])) == "{" + quoted + ":null}", "\(s.debugDescription)")
            var bytes: [UInt8] = []
            JSON.writeMembers([(s, .string(s))], into: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == quoted + ":" + quoted, "\(s.debugDescription)")
            let secret = JSON.serializeSecret(.string(s))
            #expect(secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == quoted, "\(s.debugDescription)")
        }
    }

    @Test func rfc3339() {
        #expect(Clock.rfc3339(0) == "1970-01-01T00:00:00Z")
        #expect(Clock.rfc3339(1_795_000_000) == "2026-11-18T11:06:40Z")
        #expect(Clock.rfc3339(-1) == "1969-12-31T23:59:59Z")
        #expect(Clock.rfc3339(-30_610_224_000) == "1000-01-01T00:00:00Z")
        #expect(Clock.rfc3339(-30_610_224_001) == "999-12-31T23:59:59Z")
        #expect(Clock.rfc3339(253_402_300_799) == "9999-12-31T23:59:59Z")
        #expect(Clock.rfc3339(253_402_300_800) == "10000-01-01T00:00:00Z")
        #expect(Clock.rfc3339(951_868_800) == "2000-03-01T00:00:00Z")
        #expect(Clock.parseRFC3339("2026-11-18T11:06:40Z") == 1_795_000_000)
        #expect(Clock.parseRFC3339("2026-11-18T12:06:40.123+01:00") == 1_795_000_000)
        #expect(Clock.parseRFC3339("2026-13-18T09:46:40Z") == nil)
    }
}
