import Foundation
import Testing
@testable import CLI
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
@testable import HelperProtocols
#if canImport(Glibc)
import Glibc
#endif

/// `chatgpt-credential store`: importing Codex's auth.json (from a path, from the default
/// `$CODEX_HOME/auth.json` / `~/.codex/auth.json`, or from stdin) and a bare token set, through
/// the real binary into the file store. What was stored is checked by using it: `get` prints the
/// access token, and a forced refresh presents the imported refresh token to the issuer.
@Suite(.serialized) struct StoreImportTests {
    static let warning = "chatgpt-credential: " + CodexAuthFile.sharedRefreshTokenWarning

    func setUp() throws -> (TestIssuer, Sandbox) {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        sb.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        return (issuer, sb)
    }

    func write(_ path: String, _ text: String) {
        let dir = (path as NSString).deletingLastPathComponent
        _ = try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]),
                "cannot write \(path)")
    }

    /// The stored credential is exactly the imported one: same access token and account id, and
    /// its refresh token is the one the issuer sees on a forced refresh.
    func expectStored(_ sb: Sandbox, _ issuer: TestIssuer, _ t: TestIssuer.SeededTokens,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(sb.runHelper(["get"]).stdout == t.accessToken + "\n", sourceLocation: sourceLocation)
        #expect(sb.runHelper(["get", "--account-id"]).stdout == t.accountId + "\n", sourceLocation: sourceLocation)
        #expect(sb.runHelper(["get", "--id-token"]).stdout == t.idToken + "\n", sourceLocation: sourceLocation)
        let refreshes = try issuer.counter("refresh_requests")
        let forced = sb.runHelper(["get", "--force-refresh"])
        #expect(forced.status == 0, "\(forced.stderr)", sourceLocation: sourceLocation)
        #expect(try issuer.counter("refresh_requests") == refreshes + 1, sourceLocation: sourceLocation)
        #expect(try issuer.stats()["last_refresh_token_seen"] as? String == t.refreshToken, sourceLocation: sourceLocation)
    }

    func warningLines(_ r: ProcessResult) -> Int {
        r.stderr.split(separator: "\n").filter { $0 == Self.warning }.count
    }

    @Test func fromCodexWithAPath() throws {
        let (issuer, sb) = try setUp()
        let t = try issuer.seed()
        let path = sb.root + "/elsewhere/auth.json"
        write(path, t.codexAuthJSON)
        let r = sb.runHelper(["store", "--from-codex", path])
        #expect(r.status == 0 && !r.signaled, "\(r.stderr)")
        #expect(r.stdout == "")
        #expect(warningLines(r) == 1, "\(r.stderr)")
        #expect(!r.allOutput.contains(t.accessToken) && !r.allOutput.contains(t.refreshToken))
        #expect(FileManager.default.fileExists(atPath: sb.credentialFile))
        try expectStored(sb, issuer, t)
    }

    @Test func fromCodexHonoursCODEX_HOMEOverHOME() throws {
        let (issuer, sb) = try setUp()
        let inCodexHome = try issuer.seed(["account_id": "acct-codex-home"])
        let inHome = try issuer.seed(["account_id": "acct-dot-codex"])
        let codexHome = sb.root + "/codex-home"
        write(codexHome + "/auth.json", inCodexHome.codexAuthJSON)
        write(sb.env["HOME"]! + "/.codex/auth.json", inHome.codexAuthJSON)

        let r = sb.runHelper(["store", "--from-codex"], env: ["CODEX_HOME": codexHome])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(warningLines(r) == 1, "\(r.stderr)")
        try expectStored(sb, issuer, inCodexHome)
        #expect(inCodexHome.accountId == "acct-codex-home")
    }

    @Test func fromCodexDefaultsToDotCodexInHOME() throws {
        let (issuer, sb) = try setUp()
        let t = try issuer.seed()
        write(sb.env["HOME"]! + "/.codex/auth.json", t.codexAuthJSON)
        // An empty CODEX_HOME counts as unset.
        let r = sb.runHelper(["store", "--from-codex"], env: ["CODEX_HOME": ""])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(warningLines(r) == 1)
        try expectStored(sb, issuer, t)

        // CODEX_HOME pointing at a directory without auth.json: an error, the stored one stays.
        let before = sb.fileBytes(sb.credentialFile)
        let missing = sb.runHelper(["store", "--from-codex"], env: ["CODEX_HOME": sb.root + "/nowhere"])
        #expect(missing.status != 0 && !missing.signaled)
        #expect(missing.stdout == "")
        #expect(missing.stderr.hasPrefix("chatgpt-credential: "))
        #expect(missing.stderr.contains(sb.root + "/nowhere/auth.json"), "\(missing.stderr)")
        #expect(sb.fileBytes(sb.credentialFile) == before)
    }

    @Test func codexShapeFromStdin() throws {
        let (issuer, sb) = try setUp()
        let t = try issuer.seed()
        let r = sb.runHelper(["store"], stdin: Array(t.codexAuthJSON.utf8))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "")
        #expect(warningLines(r) == 1, "\(r.stderr)")
        try expectStored(sb, issuer, t)
    }

    @Test func bareTokenSetFromStdinHasNoCodexWarning() throws {
        let (issuer, sb) = try setUp()
        let t = try issuer.seed()
        let json = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)"}"#
        let r = sb.runHelper(["store"], stdin: Array(json.utf8))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "")
        #expect(warningLines(r) == 0, "\(r.stderr)")
        try expectStored(sb, issuer, t)
    }

    @Test func codexAPIKeyModeIsRefused() throws {
        let (_, sb) = try setUp()
        let r = sb.runHelper(["store"], stdin: Array(#"{"OPENAI_API_KEY":"sk-x","tokens":null,"last_refresh":null}"#.utf8))
        #expect(r.status == 2)
        #expect(r.stdout == "")
        #expect(r.stderr.contains("API-key mode"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: sb.credentialFile))
    }
}
