import Testing
@testable import HelperProtocols
@testable import CredentialCore
@testable import Secrets
import TestSupport

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// An unsigned JWT whose claims the library can read.
private func importTestJWT(_ payload: String) -> String {
    Base64.encode(Array(#"{"alg":"RS256","typ":"JWT"}"#.utf8), alphabet: .urlSafe, padded: false) + "."
        + Base64.encode(Array(payload.utf8), alphabet: .urlSafe, padded: false) + ".c2ln"
}

private let accessJWT = importTestJWT(#"{"exp":1900000000,"https://api.openai.com/auth":{"chatgpt_account_id":"acct-from-access","chatgpt_plan_type":"plus"}}"#)
private let idJWT = importTestJWT(#"{"email":"ann@example.com","https://api.openai.com/auth":{"chatgpt_account_id":"acct-from-id","chatgpt_plan_type":"plus"}}"#)
private let now: Int64 = 1_800_000_000

private func codexFile(accountId: String? = "acct-in-file", lastRefresh: String = "2026-11-18T11:06:40.123456Z", authMode: String? = nil) -> String {
    let account = accountId.map { #","account_id":"\#($0)""# } ?? ""
    let mode = authMode.map { #","auth_mode":"\#($0)""# } ?? ""
    return #"""
    {
      "OPENAI_API_KEY": null,
      "tokens": {
        "id_token": "\#(idJWT)",
        "access_token": "\#(accessJWT)",
        "refresh_token": "rt_abc-123.XYZ"\#(account)
      },
      "last_refresh": "\#(lastRefresh)"\#(mode)
    }
    """#
}

@Suite struct TokenImportTests {
    // MARK: accepted shapes

    @Test func importsCodexAuthFile() throws {
        let r = try TokenImport.parse(SecretBytes(copying: bytes(codexFile())), profile: .default, now: now + 10_000_000)
        #expect(r.format == .codexAuthFile)
        #expect(r.document.accessToken == SecretToken(copying: accessJWT))
        #expect(r.document.refreshToken == "rt_abc-123.XYZ")
        #expect(r.document.idToken == SecretToken(copying: idJWT))
        #expect(r.document.accountId == "acct-in-file") // the file's account id wins over claims
        #expect(r.document.expiresAt == 1_900_000_000)
        #expect(r.document.email == "ann@example.com")
        #expect(r.document.plan == "plus")
        #expect(r.document.lastRefresh == 1_795_000_000) // Codex's last_refresh kept
        #expect(r.document.state.rejection == nil)
    }

    @Test func codexFileWithoutAccountIdTakesItFromClaims() throws {
        let r = try TokenImport.parse(SecretBytes(copying: bytes(codexFile(accountId: nil, authMode: "chatgpt"))), profile: .default, now: now)
        #expect(r.document.accountId == "acct-from-access")
        // Codex writes `"account_id": null` too.
        let withNull = codexFile(accountId: nil).replacingFirst(#""refresh_token": "rt_abc-123.XYZ""#,
                                                                #""refresh_token": "rt_abc-123.XYZ", "account_id": null"#)
        #expect(try TokenImport.parse(SecretBytes(copying: bytes(withNull)), profile: .default, now: now).document.accountId == "acct-from-access")
    }

    /// Importing is not refreshing: an unusable last_refresh is unknown (0), never "just now",
    /// so the 60 s no-refresh-loop guard does not hold back the first refresh.
    @Test func lastRefreshInTheFutureOrInvalidBecomesUnknown() throws {
        #expect(try TokenImport.parse(SecretBytes(copying: bytes(codexFile(lastRefresh: "2099-01-01T00:00:00Z"))), profile: .default, now: now).document.lastRefresh == 0)
        #expect(try TokenImport.parse(SecretBytes(copying: bytes(codexFile(lastRefresh: "yesterday"))), profile: .default, now: now).document.lastRefresh == 0)
    }

    @Test func importsPlainTokens() throws {
        let r = try TokenImport.parse(SecretBytes(copying: bytes(#"{"access_token":"\#(accessJWT)","refresh_token":"rt_1","id_token":"\#(idJWT)"}"#)), profile: .default, now: now)
        #expect(r.format == .tokens)
        var expected = TokenDocument.fromTokens(accessToken: SecretToken(copying: accessJWT), refreshToken: "rt_1", idToken: SecretToken(copying: idJWT), now: now)
        expected.lastRefresh = 0 // a bare token set says nothing of when it was refreshed
        #expect(r.document == expected)
        #expect(r.document.accountId == "acct-from-access")
        #expect(r.document.lastRefresh == 0)
    }

    @Test func importsAnIssuerTokenResponseAsIs() throws {
        let body = #"{"access_token":"\#(accessJWT)","token_type":"Bearer","expires_in":3600,"refresh_token":"rt_2","scope":"openid","id_token":null}"#
        let r = try TokenImport.parse(SecretBytes(copying: bytes(body)), profile: .default, now: now)
        #expect(r.document.refreshToken == "rt_2")
        #expect(r.document.idToken == "")
        #expect(r.document.expiresAt == 1_900_000_000)
    }

    @Test func opaqueTokensAreAccepted() throws {
        let r = try TokenImport.parse(SecretBytes(copying: bytes(#"{"access_token":"opaque","refresh_token":"r"}"#)), profile: .default, now: now)
        #expect(r.document.accessToken == "opaque")
        #expect(r.document.accountId == "")
        #expect(r.document.expiresAt == 0)
    }

    @Test func inputOfExactly64KiBIsAccepted() throws {
        var text = #"{"access_token":"a","refresh_token":"r"}"#
        text += String(repeating: " ", count: 65536 - text.utf8.count)
        #expect(text.utf8.count == 65536)
        #expect(try TokenImport.parse(SecretBytes(copying: bytes(text)), profile: .default, now: now).document.refreshToken == "r")
        #expect(throws: CredentialError.badInput("store: the input is larger than 64 KiB")) {
            try TokenImport.parse(SecretBytes(copying: bytes(text + " ")), profile: .default, now: now)
        }
    }

    // MARK: rejected input

    static let badInputs: [(String, String)] = [
        ("", "store: no input; pipe Codex's auth.json or {\"access_token\",\"refresh_token\"} into it"),
        (" \n\t\r\n", "store: no input; pipe Codex's auth.json or {\"access_token\",\"refresh_token\"} into it"),
        ("access_token=abc", "store: the input is not JSON (unexpected character at byte 0)"),
        (#"{"access_token":"a","refresh_token":"r""#, "store: the input is not JSON (unexpected end at byte 39)"),
        (#"{"access_token":"a","access_token":"b","refresh_token":"r"}"#, "store: the input is not JSON (duplicate key at byte 34)"),
        ("[]", "store: the input is not a JSON object"),
        (#""tok""#, "store: the input is not a JSON object"),
        ("null", "store: the input is not a JSON object"),
        ("42", "store: the input is not a JSON object"),
        ("{}", #"store: missing access_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"access_token":"a"}"#, #"store: missing refresh_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"access_token":"a","refresh_token":null}"#, #"store: missing refresh_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"refresh_token":"r"}"#, #"store: missing access_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"access_token":"","refresh_token":"r"}"#, "store: access_token is empty"),
        (#"{"access_token":"a","refresh_token":""}"#, "store: refresh_token is empty"),
        (#"{"access_token":"a","refresh_token":"r","id_token":""}"#, "store: id_token is empty"),
        (#"{"access_token":"a b","refresh_token":"r"}"#, "store: access_token contains whitespace"),
        (#"{"access_token":"a","refresh_token":"r\n"}"#, "store: refresh_token contains whitespace"),
        (#"{"access_token":"a\tb","refresh_token":"r"}"#, "store: access_token contains whitespace"),
        (#"{"access_token":"a","refresh_token":"r\u00a0"}"#, "store: refresh_token contains whitespace"),
        (#"{"access_token":"a\u0000","refresh_token":"r"}"#, "store: access_token contains a NUL byte"),
        (#"{"access_token":"a","refresh_token":"r\u001b[31m"}"#, "store: refresh_token contains a control character"),
        (#"{"access_token":"a\u007f","refresh_token":"r"}"#, "store: access_token contains a control character"),
        (#"{"access_token":"a\u009b","refresh_token":"r"}"#, "store: access_token contains a control character"),
        (#"{"access_token":"tök","refresh_token":"r"}"#, "store: access_token contains a non-ASCII character"),
        (#"{"access_token":42,"refresh_token":"r"}"#, "store: access_token is not a string"),
        (#"{"access_token":"a","refresh_token":["r"]}"#, "store: refresh_token is not a string"),
        (#"{"access_token":"a","refresh_token":"r","account_id":"x y"}"#, "store: account_id contains whitespace"),
        (#"{"OPENAI_API_KEY":"sk-test","tokens":null}"#, "store: this Codex auth.json holds no ChatGPT sign-in (API-key mode?); run 'codex login' first or sign in with: chatgpt-credential login"),
        (#"{"tokens":"abc"}"#, #"store: "tokens" is not a JSON object"#),
        (#"{"tokens":{}}"#, #"store: missing tokens.access_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"tokens":{"access_token":"a","id_token":"i"}}"#, #"store: missing tokens.refresh_token; expected Codex's auth.json or {"access_token","refresh_token","id_token"?}"#),
        (#"{"tokens":{"access_token":"a","refresh_token":"r","id_token":"i d"}}"#, "store: tokens.id_token contains whitespace"),
        (#"{"tokens":{"access_token":"a","refresh_token":"r"},"access_token":"b"}"#, #"store: the input has both "tokens" and top-level tokens; give one credential"#),
    ]

    @Test(arguments: 0..<badInputs.count)
    func rejectsWithReason(_ index: Int) {
        let (input, reason) = Self.badInputs[index]
        #expect(throws: CredentialError.badInput(reason)) { try TokenImport.parse(SecretBytes(copying: bytes(input)), profile: .default, now: now) }
    }

    @Test func rejectsTenMegabytes() {
        let huge = bytes(#"{"access_token":""#) + [UInt8](repeating: 0x61, count: 10 * 1024 * 1024) + bytes(#"","refresh_token":"r"}"#)
        #expect(throws: CredentialError.badInput("store: the input is larger than 64 KiB")) { try TokenImport.parse(SecretBytes(copying: huge), profile: .default, now: now) }
    }

    @Test func rejectsBinaryGarbage() {
        var seed: UInt32 = 7
        let garbage: [UInt8] = (0..<2048).map { _ in seed = seed &* 1_103_515_245 &+ 12345; return UInt8(truncatingIfNeeded: seed >> 16) }
        #expect(throws: CredentialError.badInput("store: the input is not JSON (expected a key at byte 1)")) {
            try TokenImport.parse(SecretBytes(copying: [0x7B] + garbage), profile: .default, now: now)
        }
        // The offset is where the parser noticed (the end of the string), not the bad byte (17).
        #expect(throws: CredentialError.badInput("store: the input is not JSON (invalid UTF-8 at byte 20)")) {
            try TokenImport.parse(SecretBytes(copying: bytes(#"{"access_token":""#) + [0xFF, 0xFE] + bytes(#"","refresh_token":"r"}"#)), profile: .default, now: now)
        }
    }

    @Test func everyReasonIsOneLineAndExitCode2() {
        for (input, _) in Self.badInputs {
            do {
                _ = try TokenImport.parse(SecretBytes(copying: bytes(input)), profile: .default, now: now)
                Issue.record("accepted \(input)")
            } catch let e as CredentialError {
                #expect(e.exitCode == 2)
                #expect(!e.message.contains("\n"))
            } catch { Issue.record("unexpected \(error)") }
        }
    }

    @Test func errorsNeverEchoTheSecret() {
        let secret = "rt_SECRET_VALUE"
        do {
            _ = try TokenImport.parse(SecretBytes(copying: bytes(#"{"access_token":"a b","refresh_token":"\#(secret)"}"#)), profile: .default, now: now)
            Issue.record("accepted")
        } catch let e as CredentialError {
            #expect(!e.message.contains(secret))
        } catch { Issue.record("unexpected \(error)") }
    }

    // MARK: Codex's file

    @Test func codexDefaultPath() {
        #expect(CodexAuthFile.defaultPath(codexHome: nil, home: "/home/ann") == "/home/ann/.codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: nil, home: "/home/ann/") == "/home/ann/.codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: "/srv/codex", home: "/home/ann") == "/srv/codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: "/srv/codex//", home: "/home/ann") == "/srv/codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: "", home: "/home/ann") == "/home/ann/.codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: nil, home: "/") == "/.codex/auth.json")
        #expect(CodexAuthFile.defaultPath(codexHome: nil, home: "") == nil)
        #expect(CodexAuthFile.defaultPath(codexHome: nil, home: nil) == nil)
    }

    @Test func sharedRefreshTokenWarning() {
        let w = CodexAuthFile.sharedRefreshTokenWarning
        #expect(w.hasPrefix("warning: "))
        #expect(w.contains("same single-use refresh token"))
        #expect(w.contains("only one of them may keep refreshing"))
        #expect(!w.contains("\n"))
        #expect(Sanitize.line(w, limit: 1000) == w)
    }
}

private extension String {
    func replacingFirst(_ target: String, _ replacement: String) -> String {
        let s = Array(self.utf8), t = Array(target.utf8)
        guard t.count <= s.count else { return self }
        for i in 0...(s.count - t.count) where Array(s[i..<i + t.count]) == t {
            return String(decoding: s[..<i] + Array(replacement.utf8) + s[(i + t.count)...], as: UTF8.self)
        }
        return self
    }
}

/// Codex's keyring item name and its config switch.
@Suite struct CodexKeyringTests {
    @Test func accountIsCliAnd16HexDigitsOfTheSHA256OfThePath() {
        // printf %s /home/ann/.codex | sha256sum
        #expect(CodexKeyring.account(canonicalHome: "/home/ann/.codex") == "cli|" + String(CodexKeyringTests.sha("/home/ann/.codex").prefix(16)))
        #expect(CodexKeyring.account(canonicalHome: "/a").count == 20)
        #expect(CodexKeyring.account(canonicalHome: "/a") != CodexKeyring.account(canonicalHome: "/b"))
    }

    static func sha(_ s: String) -> String {
        Sodium.sha256(Array(s.utf8)).map { b in String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }.joined()
    }

    @Test func knownDigest() {
        // sha256("abc") = ba7816bf8f01cfea…
        #expect(CodexKeyring.account(canonicalHome: "abc") == "cli|ba7816bf8f01cfea")
    }

    @Test(arguments: [
        ("cli_auth_credentials_store = \"keyring\"\n", CodexKeyring.Mode.keyring),
        ("cli_auth_credentials_store='auto'", .auto),
        ("  cli_auth_credentials_store = \"file\" # comment\n", .file),
        ("\"cli_auth_credentials_store\" = \"keyring\"", .keyring),
        ("model = \"x\"\r\ncli_auth_credentials_store = \"keyring\"\r\n", .keyring),
    ] as [(String, CodexKeyring.Mode)])
    func modeIsRead(_ text: String, _ mode: CodexKeyring.Mode) {
        #expect(CodexKeyring.mode(configTOML: text) == mode)
    }

    @Test(arguments: [
        "",
        "[profiles.a]\ncli_auth_credentials_store = \"keyring\"\n", // not top level
        "cli_auth_credentials_store = keyring\n",                  // not a string
        "cli_auth_credentials_store = \"keyring\" extra\n",        // trailing junk
        "cli_auth_credentials_store = \"vault\"\n",                // unknown value
        "# cli_auth_credentials_store = \"keyring\"\n",            // a comment
        "cli_auth_credentials_store_x = \"keyring\"\n",
    ])
    func noModeOtherwise(_ text: String) {
        #expect(CodexKeyring.mode(configTOML: text) == nil)
    }

    @Test func homeIsCODEX_HOMEElseDotCodex() {
        #expect(CodexKeyring.home(codexHome: "/c", home: "/h") == "/c")
        #expect(CodexKeyring.home(codexHome: "", home: "/h") == "/h/.codex")
        #expect(CodexKeyring.home(codexHome: nil, home: nil) == nil)
    }
}
