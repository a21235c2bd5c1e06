import Testing
@testable import CredentialCore
@testable import Secrets
import TestSupport

@Suite struct SecretTokenTests {
    func bytes(_ t: SecretToken) -> [UInt8] { t.withUnsafeBytes { Array($0) } }

    @Test func holdsItsBytesAndComparesThem() {
        let a = SecretToken(copying: "eyJ.a.b"), same: SecretToken = "eyJ.a.b"
        #expect(bytes(a) == Array("eyJ.a.b".utf8) && a.count == 7)
        #expect(a == same)
        #expect(a != "eyJ.a.c" && a != "eyJ.a.b." && a != "eyJ.a")
        #expect(SecretToken() == "" && SecretToken().isEmpty && SecretToken().buffer == nil)
        #expect(a.equals(utf8: "eyJ.a.b") && !a.equals(utf8: "eyJ.a.B") && !a.equals(utf8: ""))
        #expect(a.unsafeString() == "eyJ.a.b")
    }

    @Test func copiesShareTheOneBuffer() {
        let a = SecretToken(copying: "tok")
        let copy = a
        var doc = TokenDocument(accessToken: a, refreshToken: "r")
        let docCopy = doc
        doc.email = "changed"
        #expect(copy.buffer === a.buffer && docCopy.accessToken.buffer === a.buffer)
    }

    /// Never the bytes in a message or a test's failure output.
    @Test func describesItselfWithoutItsBytes() {
        let t = SecretToken(copying: "rt_very-secret")
        #expect("\(t)" == "SecretToken(14 bytes)")
        #expect(String(reflecting: t) == "SecretToken(14 bytes)")
        #expect(!"\(TokenDocument(accessToken: t, refreshToken: t))".contains("very-secret"))
    }

    @Test func cutsEveryOccurrenceOutOfAText() {
        let t = SecretToken(copying: "rt_secret")
        #expect(t.cut(from: "a rt_secret b rt_secretrt_secret c rt_secre", replacement: "[x]") == "a [x] b [x][x] c rt_secre")
        #expect(SecretToken().cut(from: "abc", replacement: "[x]") == "abc")
    }

    /// The tokens of a parsed document are ranges of the document's own bytes (no buffer per
    /// token); one with an escape is decoded into a buffer of its own.
    @Test func aParsedDocumentsTokensAreRangesOfItsBytes() throws {
        let text = #"{"access_token":"at.1","refresh_token":"rt\/2","id_token":"it.3","email":"e@x"}"#
        let d = try TokenDocument.parse(SecretBytes(copying: text.utf8), origin: "test")
        #expect(d.accessToken == "at.1" && d.refreshToken == "rt/2" && d.idToken == "it.3" && d.email == "e@x")
        #expect(d.accessToken.buffer === d.idToken.buffer)
        #expect(d.refreshToken.buffer !== d.accessToken.buffer)
        #expect(d.accessToken.buffer?.bytes.count == text.utf8.count)
    }

    @Test func serializedIsExactlyItsCountedSize() {
        let d = TokenDocument(accessToken: "a\u{1}b", refreshToken: "r\"é", idToken: "", accountId: "acct", expiresAt: 1_900_000_000)
        let s = d.serialized()
        #expect(s.count == d.serializedCount && s.capacity == s.count)
        #expect(s.unsafeString().contains(#""access_token":"a\u0001b","refresh_token":"r\"é","id_token":"""#))
    }
}

@Suite struct SecretJSONTests {
    /// Secrecy is the parser's default: every parse, whatever it reads from, makes the token
    /// members (`JSON.secretKeys`) secrets, at any depth, and leaves every other string a String.
    @Test func secretMembersBecomeSecretsAtAnyDepthInEveryParseAndOthersStayStrings() throws {
        let text = #"{"access_token":"x","s":"y","o":{"refresh_token":"z","n":1},"a":[{"id_token":"w"}],"u":{"code_verifier":2},"authorization_code":"c","Secret":"d","OPENAI_API_KEY":"k"}"#
        for v in [try JSON.parse(SecretBytes(copying: text.utf8)), try JSON.parse(text),
                  try JSON.parse(sharing: SecretToken.Buffer(SecretBytes(copying: text.utf8)))] {
            #expect(v["access_token"] == .secret("x") && v["s"] == .string("y"))
            #expect(v["o"]?["refresh_token"] == .secret("z"))
            #expect(v["u"]?["code_verifier"] == .number(2)) // only string values are secrets
            guard case .array(let items)? = v["a"] else { Issue.record("no array"); return }
            #expect(items.first?["id_token"] == .secret("w"))
            #expect(v["authorization_code"] == .secret("c") && v["Secret"] == .secret("d") && v["OPENAI_API_KEY"] == .secret("k"))
            #expect(v["access_token"]?.stringValue == nil && v["s"]?.secretValue == nil)
        }
        #expect(JSON.secretKeys == ["access_token", "refresh_token", "id_token", "authorization_code", "code_verifier", "Secret", "OPENAI_API_KEY",
                                    "device_auth_id"])
        #expect(JSONValue.secret("x") != .string("x"))
    }

    @Test func escapesAreDecodedAndBadStringsRefusedAsPlainOnesAre() throws {
        let v = try JSON.parse(SecretBytes(copying: #"{"id_token":"a\"b\u00e9\ud83d\ude00\/"}"#.utf8))
        #expect(v["id_token"] == .secret(SecretToken(copying: "a\"bé😀/")))
        for bad in [#"{"id_token":"a"#, "{\"id_token\":\"a\u{1}\"}", #"{"id_token":"\ud800"}"#, #"{"id_token":"\q"}"#] {
            #expect(throws: JSONError.self) { try JSON.parse(SecretBytes(copying: bad.utf8)) }
        }
        let invalid: [UInt8] = Array(#"{"id_token":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONError(reason: "invalid UTF-8", offset: 16)) {
            try JSON.parse(sharing: SecretToken.Buffer(SecretBytes(copying: invalid)))
        }
        let plainInvalid: [UInt8] = Array(#"{"t":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONError(reason: "invalid UTF-8", offset: 9)) { try JSON.parse(plainInvalid) }
    }

    @Test func serializeSecretWritesWhatSerializeWouldAndCountsIt() throws {
        let source = #"{"id_token":"x\u0007y","n":[1,2.5,null,true],"s":"\u202e"}"#
        let plain = try JSON.parse(source.replacing("id_token", with: "t"))
        let secret = try JSON.parse(SecretBytes(copying: source.utf8))
        let text = JSON.serializeSecret(secret, suffix: "\n")
        #expect(text.unsafeString() == JSON.serialize(plain).replacing(#""t""#, with: #""id_token""#) + "\n")
        #expect(text.count == JSON.serializedCount(secret) + 1 && text.capacity == text.count)
    }

    /// A token of printable ASCII without `"` or `\` (every real one) is copied in one piece;
    /// one byte that needs an escape anywhere in it, or a non-ASCII one, and it is quoted as before.
    @Test(arguments: ["eyJhbGciOi.eyJzdWIiOi-_x.c2ln", "", "a\"b", "a\\b", "tab\tx", "del\u{7F}", "é", "end\u{202E}"])
    func aTokenIsWrittenAsAPlainStringWouldBe(token: String) throws {
        let secret = JSONValue.object([("access_token", .secret(SecretToken(copying: token)))])
        let text = JSON.serializeSecret(secret)
        #expect(text.unsafeString() == JSON.serialize(.object([("access_token", .string(token))])))
        #expect(text.count == JSON.serializedCount(secret) && text.capacity == text.count)
        #expect(try JSON.parse(text)["access_token"] == .secret(SecretToken(copying: token)))
    }

    /// A token is never written into a String: that is a programming error, and it stops.
    @Test func serializingASecretIntoAStringStops() async {
        await #expect(processExitsWith: .failure) {
            _ = JSON.serialize(.object([("access_token", .secret("x"))]))
        }
    }

    @Test func base64OfASecretDecodesAsThePlainDecoder() throws {
        for text in ["", "YQ", "YWI", "YWJj", "YQ==", "Y-_8", "Y+/8", "YR", "a b"] {
            let secret: [UInt8]? = Array(text.utf8).withUnsafeBytes { raw in
                guard let decoded = Base64.decodeSecret(raw, alphabet: .urlSafe, padding: .optional) else { return nil }
                return decoded.withUnsafeBytes { Array($0) }
            }
            let plain = Base64.decode(text, alphabet: .urlSafe, padding: .optional)
            #expect(secret == plain, "\(text)")
        }
    }

    /// Found by fuzz/jwt: `exp` 0.7 became 0 ("unknown") although accepted as a positive time.
    @Test func aFractionalExpBelowOneSecondIsNoExpiry() {
        for (exp, expected) in [("0.7", nil), ("0.999", nil), ("1.5", Int64(1)), ("1900000000.9", Int64(1_900_000_000))] as [(String, Int64?)] {
            let payload = Base64.encode(Array(#"{"exp":\#(exp)}"#.utf8), alphabet: .urlSafe, padded: false)
            #expect(JWTClaims.decode(SecretToken(copying: "h.\(payload).s"))?.expiresAt == expected, "exp \(exp)")
        }
    }

    @Test func aJWTHasExactlyThreeSegments() {
        let payload = Base64.encode(Array(#"{"exp":1900000000,"email":"a@b.c"}"#.utf8), alphabet: .urlSafe, padded: false)
        #expect(JWTClaims.decode(SecretToken(copying: "h.\(payload).s"))?.expiresAt == 1_900_000_000)
        #expect(JWTClaims.decode(SecretToken(copying: "h.\(payload).s"))?.email == "a@b.c")
        #expect(JWTClaims.decode(SecretToken(copying: "h.\(payload)")) == nil)
        #expect(JWTClaims.decode(SecretToken(copying: "h.\(payload).s.x")) == nil)
        #expect(JWTClaims.decode(SecretToken()) == nil)
    }
}
