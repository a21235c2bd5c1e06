import Foundation
import Testing
@testable import CLI
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// The docker credential-helper protocol through the symlinked name `docker-credential-chatgpt`:
/// every verb's exact stdout and exit status, then Debian's python3-dockerpycreds (the client
/// library docker-py uses) driving the helper found on PATH.
@Suite(.serialized) struct DockerHelperTests {
    static let notFound = "credentials not found in native keychain\n"

    func docker(_ sb: Sandbox, _ verb: String, _ stdin: String?) -> ProcessResult {
        sb.runHelper([verb], stdin: stdin.map { Array($0.utf8) }, as: Sandbox.dockerHelperName)
    }

    @Test func getAnswersForChatGPTServersOnly() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let t = try sb.signIn(issuer)

        let get = docker(sb, "get", "https://chatgpt.com\n")
        #expect(get.status == 0 && !get.signaled, "\(get.stderr)")
        #expect(get.stdout == #"{"ServerURL":"https://chatgpt.com","Username":"\#(t.accountId)","Secret":"\#(t.accessToken)"}"# + "\n")
        // The URL is echoed as docker sent it (docker passes it without a line feed).
        let api = docker(sb, "get", "https://api.openai.com/v1")
        #expect(api.status == 0)
        #expect(api.stdout == #"{"ServerURL":"https://api.openai.com/v1","Username":"\#(t.accountId)","Secret":"\#(t.accessToken)"}"# + "\n")

        let defaultPort = docker(sb, "get", "https://chatgpt.com:443/")
        #expect(defaultPort.status == 0 && defaultPort.stdout.contains(t.accessToken), "exit \(defaultPort.status)")
        for other in ["https://index.docker.io/v1/", "ghcr.io", "https://chatgpt.com@evil.com",
                      "https://evil.com/chatgpt.com", "http://chatgpt.com", "chatgpt.com.evil.com",
                      "https://chatgpt.com:8080", "api.openai.com:8443/v1"] {
            let r = docker(sb, "get", other)
            #expect(r.status == 1 && !r.signaled, "\(other): \(r.status)")
            #expect(r.stdout == Self.notFound, "\(other)")
            #expect(!r.allOutput.contains(t.accessToken), "\(other)")
        }
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    @Test func getWhenNotSignedInIsNotFound() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        sb.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let r = docker(sb, "get", "https://chatgpt.com")
        #expect(r.status == 1 && !r.signaled)
        #expect(r.stdout == Self.notFound)
        #expect(try issuer.counter("refresh_requests") == 0)
        #expect(r.stderr == "")
    }

    @Test func storeIsANoOpAndLeavesTheDocumentUnchanged() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let t = try sb.signIn(issuer)
        let before = sb.fileBytes(sb.credentialFile)
        #expect(before != nil)
        let r = docker(sb, "store", #"{"ServerURL":"https://chatgpt.com","Username":"someone","Secret":"other-secret"}"#)
        #expect(r.status == 0 && !r.signaled, "\(r.stdout) \(r.stderr)")
        #expect(r.stdout == "")
        #expect(sb.fileBytes(sb.credentialFile) == before)
        #expect(docker(sb, "get", "https://chatgpt.com").stdout.contains(#""Secret":"\#(t.accessToken)""#))

        // Not the JSON docker sends: an error on stdout, exit 1, still nothing changed.
        let bad = docker(sb, "store", "not json")
        #expect(bad.status == 1 && !bad.signaled)
        #expect(!bad.stdout.isEmpty)
        #expect(sb.fileBytes(sb.credentialFile) == before)
    }

    @Test func listEraseAndVersion() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let t = try sb.signIn(issuer)

        let list = docker(sb, "list", nil)
        #expect(list.status == 0)
        #expect(list.stdout == #"{"https://chatgpt.com":"\#(t.accountId)"}"# + "\n")

        // erase for another server touches nothing.
        let foreign = docker(sb, "erase", "https://index.docker.io/v1/")
        #expect(foreign.status == 1)
        #expect(foreign.stdout == Self.notFound)
        #expect(sb.fileBytes(sb.credentialFile) != nil)
        #expect(try issuer.counter("revocations") == 0)

        // `docker logout https://chatgpt.com` means log out: revoked at the issuer, then removed.
        let erase = docker(sb, "erase", "https://chatgpt.com")
        #expect(erase.status == 0 && !erase.signaled, "\(erase.stdout) \(erase.stderr)")
        #expect(erase.stdout == "")
        #expect(!FileManager.default.fileExists(atPath: sb.credentialFile))
        #expect(try issuer.counter("revocations") == 1)
        #expect(try issuer.stats()["last_revoked_token"] as? String == t.refreshToken)

        #expect(docker(sb, "list", nil).stdout == "{}\n")
        let gone = docker(sb, "get", "https://chatgpt.com")
        #expect(gone.status == 1)
        #expect(gone.stdout == Self.notFound)
        // A second erase: nothing to erase, reported as not found; no second revocation.
        let again = docker(sb, "erase", "https://chatgpt.com")
        #expect(again.status == 1)
        #expect(again.stdout == Self.notFound)
        #expect(try issuer.counter("revocations") == 1)

        let version = docker(sb, "version", nil)
        #expect(version.status == 0)
        #expect(version.stdout == "chatgpt-credential \(CommandLineSpec.version)\n")
        #expect(sb.runHelper(["--version"]).stdout == version.stdout)
        // The plain protocol's verb says the same (a verb added as one file and one registry line).
        let verb = sb.run(["version"])
        #expect(verb.status == 0 && verb.stdout == version.stdout, "\(verb.stderr)")
        let extra = sb.run(["version", "--json"])
        #expect(extra.status == 2 && extra.stdout.isEmpty, "\(extra.stderr)")

        let unknown = docker(sb, "frobnicate", nil)
        #expect(unknown.status == 1)
        #expect(unknown.stdout.hasPrefix("unknown verb 'frobnicate'"))

        // Errors found before a verb runs follow docker's convention too: on stdout, exit 1.
        let none = sb.runHelper([], stdin: [], as: Sandbox.dockerHelperName)
        #expect(none.status == 1 && none.stdout.hasPrefix("missing docker helper verb") && none.stderr.isEmpty, "\(none.stdout) \(none.stderr)")
        let badProfile = sb.runHelper(["--profile", "bad name", "get"], stdin: Array("https://chatgpt.com".utf8), as: Sandbox.dockerHelperName)
        #expect(badProfile.status == 1 && badProfile.stdout.hasPrefix("invalid profile name 'bad name'") && badProfile.stderr.isEmpty,
                "\(badProfile.stdout) \(badProfile.stderr)")
        let badVariable = sb.runHelper(["get"], stdin: Array("https://chatgpt.com".utf8), env: ["CHATGPT_CREDENTIAL_PROFILE": "bad name"], as: Sandbox.dockerHelperName)
        #expect(badVariable.status == 1 && badVariable.stdout.contains("bad name") && badVariable.stderr.isEmpty, "\(badVariable.stdout) \(badVariable.stderr)")
        let named = sb.run(["--protocol", "docker"])
        #expect(named.status == 1 && named.stdout.hasPrefix("missing docker helper verb") && named.stderr.isEmpty, "\(named.stdout) \(named.stderr)")
        // The plain protocol keeps its own: stderr, exit 2.
        let plain = sb.run(["--profile", "bad name", "get"])
        #expect(plain.status == 2 && plain.stdout.isEmpty && plain.stderr.hasPrefix("chatgpt-credential: invalid profile name"), "\(plain.stderr)")
    }

    /// A credential imported from Codex's auth.json is erased but not revoked: Codex may still
    /// use the same session (man page, `erase`), and erase says so.
    @Test func logoutOfACodexImportDoesNotRevoke() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox()
        _ = try sb.signIn(issuer, codex: true)
        let erase = docker(sb, "erase", "https://chatgpt.com")
        #expect(erase.status == 0, "\(erase.stdout) \(erase.stderr)")
        #expect(erase.stderr.contains("the refresh token was not revoked: it came from Codex"), "\(erase.stderr)")
        #expect(!FileManager.default.fileExists(atPath: sb.credentialFile))
        #expect(try issuer.counter("revocations") == 0)
    }

    // MARK: a real client library

    /// Runs a short python3 program against the helper on PATH through dockerpycreds; it prints
    /// one JSON line describing what happened.
    func pycreds(_ sb: Sandbox, _ body: String) -> ProcessResult {
        let program = """
            import json, sys
            import dockerpycreds
            from dockerpycreds import errors
            store = dockerpycreds.Store('chatgpt')
            def attempt(f):
                try:
                    return {"ok": f()}
                except errors.CredentialsNotFound as e:
                    return {"not_found": str(e)}
                except errors.StoreError as e:
                    return {"store_error": str(e)}
            \(body)
            """
        return Proc.run(Tools.python3, ["-c", program],
                        env: sb.helperEnv.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 })
    }

    func json(_ r: ProcessResult) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any]) ?? [:]
    }

    @Test(.enabled(if: Tools.haveDockerPyCreds)) func dockerpycredsGetsTheToken() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let t = try sb.signIn(issuer)

        let got = pycreds(sb, "print(json.dumps(attempt(lambda: store.get('https://chatgpt.com'))))")
        #expect(got.status == 0, "\(got.stderr)")
        let ok = json(got)["ok"] as? [String: String]
        #expect(ok == ["ServerURL": "https://chatgpt.com", "Username": t.accountId, "Secret": t.accessToken])

        let other = pycreds(sb, "print(json.dumps(attempt(lambda: store.get('https://index.docker.io/v1/'))))")
        #expect(other.status == 0, "\(other.stderr)")
        #expect(json(other)["not_found"] as? String == "No matching credentials in docker-credential-chatgpt")
        #expect(!other.allOutput.contains(t.accessToken))

        // store through the library is accepted and changes nothing; erase logs out.
        let before = sb.fileBytes(sb.credentialFile)
        let stored = pycreds(sb, "print(json.dumps(attempt(lambda: store.store('https://chatgpt.com', 'u', 's').decode())))")
        #expect(json(stored)["ok"] as? String == "", "\(stored.stdout) \(stored.stderr)")
        #expect(sb.fileBytes(sb.credentialFile) == before)

        let erased = pycreds(sb, "print(json.dumps(attempt(lambda: store.erase('https://chatgpt.com'))))")
        #expect(erased.status == 0, "\(erased.stderr)")
        #expect(json(erased).keys.sorted() == ["ok"])
        #expect(try issuer.counter("revocations") == 1)
        let after = pycreds(sb, "print(json.dumps(attempt(lambda: store.get('https://chatgpt.com'))))")
        #expect(json(after)["not_found"] as? String == "No matching credentials in docker-credential-chatgpt")
    }
}
