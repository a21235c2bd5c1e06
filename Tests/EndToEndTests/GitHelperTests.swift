import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The git credential protocol with the real `git` (Debian 12's 2.39): `git credential
/// fill/reject` through both ways of naming the helper, and real HTTPS fetches (`ls-remote`,
/// `clone`) whose only credentials come from our helper. Everything is loopback: the test issuer
/// for refreshes, Tests/EndToEndTests/Fixtures/git_http_server.py for git's HTTP traffic.
@Suite(.serialized) struct GitHelperTests {
    static let enabled = Tools.haveGit

    /// `-c credential.helper=` first empties the helper list (no machine or user helper can
    /// answer), then the one under test.
    static func helperConfig(_ helper: String) -> [String] {
        ["-c", "credential.helper=", "-c", "credential.helper=\(helper)"]
    }

    /// The two ways a user configures us: the symlinked name found on PATH (`chatgpt` →
    /// `git-credential-chatgpt`), and a shell snippet running the main binary with --protocol git.
    static let absoluteHelper = "!'\(Harness.binary)' --protocol git"
    static let helperForms = ["chatgpt", absoluteHelper]

    static let fillChatGPT = "protocol=https\nhost=chatgpt.com\n\n"

    func fill(_ sb: Sandbox, helper: String, input: String = fillChatGPT, env: [String: String] = [:]) -> ProcessResult {
        sb.git(Self.helperConfig(helper) + ["credential", "fill"], stdin: input, env: env)
    }

    func reject(_ sb: Sandbox, helper: String = "chatgpt", accountId: String, password: String) -> ProcessResult {
        sb.git(Self.helperConfig(helper) + ["credential", "reject"],
               stdin: "protocol=https\nhost=chatgpt.com\nusername=\(accountId)\npassword=\(password)\n\n")
    }

    func expectedFill(_ accountId: String, _ token: String, host: String = "chatgpt.com") -> String {
        // git 2.39 does not know password_expiry_utc (2.41+), so `fill` drops it from our answer.
        "protocol=https\nhost=\(host)\nusername=\(accountId)\npassword=\(token)\n"
    }

    @Test(.enabled(if: enabled), arguments: helperForms)
    func fillAnswersForChatGPT(helper: String) throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)
        // The absolute form must work without the symlink on PATH.
        let env = helper == "chatgpt" ? [:] : ["PATH": "/usr/bin:/bin"]
        let r = fill(sb, helper: helper, env: env.merging(["GIT_TRACE": sb.root + "/trace"]) { $1 })
        #expect(r.status == 0, "git credential fill: \(r.stderr)")
        #expect(r.stdout == expectedFill(tokens.accountId, tokens.accessToken))
        #expect(!tokens.accountId.isEmpty && !tokens.accessToken.isEmpty)
        // git really ran our helper (not some other credential source).
        let trace = String(decoding: sb.fileBytes(sb.root + "/trace") ?? [], as: UTF8.self)
        if helper == "chatgpt" {
            #expect(trace.contains("git credential-chatgpt get"), "trace: \(trace)")
        } else {
            #expect(trace.contains("--protocol git get"), "trace: \(trace)")
        }
        #expect(try issuer.counter("refresh_requests") == 0)

        // A subdomain and api.openai.com are ours too; the explicit default port is kept in the host.
        let sub = fill(sb, helper: helper, input: "protocol=https\nhost=ab.chatgpt.com:443\n\n", env: env)
        #expect(sub.stdout == expectedFill(tokens.accountId, tokens.accessToken, host: "ab.chatgpt.com:443"))
        let api = fill(sb, helper: helper, input: "protocol=https\nhost=api.openai.com\n\n", env: env)
        #expect(api.stdout == expectedFill(tokens.accountId, tokens.accessToken, host: "api.openai.com"))
    }

    @Test(.enabled(if: enabled), arguments: helperForms)
    func otherHostsGetNothing(helper: String) throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)
        let env = helper == "chatgpt" ? [:] : ["PATH": "/usr/bin:/bin"]
        for input in ["protocol=https\nhost=github.com\n\n",
                      "protocol=https\nhost=chatgpt.com.evil.com\n\n",
                      "protocol=http\nhost=chatgpt.com\n\n",
                      "protocol=https\nhost=evilchatgpt.com\n\n",
                      "protocol=https\nhost=chatgpt.com:8080\n\n",
                      "protocol=https\nhost=api.openai.com:8443\n\n",
                      "url=https://chatgpt.com@evil.com/\n\n"] {
            let r = fill(sb, helper: helper, input: input, env: env.merging(["GIT_TRACE": sb.root + "/trace"]) { $1 })
            // No helper answered and prompting is off: git gives up.
            #expect(r.status == 128, "\(input.debugDescription): \(r.status) \(r.stderr)")
            #expect(r.stdout == "", "\(input.debugDescription)")
            #expect(!r.allOutput.contains(tokens.accessToken), "\(input.debugDescription)")
            #expect(r.stderr.contains("terminal prompts disabled"), "\(input.debugDescription): \(r.stderr)")
        }
        // It was our helper that was asked, and it said nothing.
        let trace = String(decoding: sb.fileBytes(sb.root + "/trace") ?? [], as: UTF8.self)
        #expect(trace.contains(helper == "chatgpt" ? "git credential-chatgpt get" : "--protocol git get"))
        for host in ["github.com", "chatgpt.com:8080"] { // another port is another server: nothing, exit 0
            let direct = sb.runHelper(["get"], stdin: Array("protocol=https\nhost=\(host)\n\n".utf8), as: Sandbox.gitHelperName)
            #expect(direct.status == 0 && !direct.signaled, "\(host): exit \(direct.status)")
            #expect(direct.stdoutBytes.isEmpty, "\(host)")
        }
        let defaultPort = sb.runHelper(["get"], stdin: Array("protocol=https\nhost=chatgpt.com:443\n\n".utf8), as: Sandbox.gitHelperName)
        #expect(defaultPort.status == 0 && defaultPort.stdout.contains("password=\(tokens.accessToken)\n"), "exit \(defaultPort.status)")
        #expect(try issuer.counter("refresh_requests") == 0)
    }

    @Test(.enabled(if: enabled), arguments: helperForms)
    func rejectOfTheCurrentTokenRefreshesOnceAndKeepsTheRefreshToken(helper: String) throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)
        let env = helper == "chatgpt" ? [:] : ["PATH": "/usr/bin:/bin"]
        #expect(fill(sb, helper: helper, env: env).stdout == expectedFill(tokens.accountId, tokens.accessToken))

        let rej = sb.git(Self.helperConfig(helper) + ["credential", "reject"],
                         stdin: "protocol=https\nhost=chatgpt.com\nusername=\(tokens.accountId)\npassword=\(tokens.accessToken)\n\n",
                         env: env)
        #expect(rej.status == 0, "reject: \(rej.stderr)")
        #expect(rej.stdout == "")
        #expect(try issuer.counter("refresh_requests") == 0, "reject itself must not refresh")

        let after = fill(sb, helper: helper, env: env)
        #expect(after.status == 0, "fill after reject: \(after.stderr)")
        let fresh = sb.currentToken()
        #expect(fresh != tokens.accessToken && !fresh.isEmpty)
        #expect(after.stdout == expectedFill(tokens.accountId, fresh))
        #expect(try issuer.counter("refresh_requests") == 1)
        #expect(try issuer.counter("refresh_success") == 1)
        // The refresh used the stored refresh token: the reject dropped only the access token.
        #expect(try issuer.stats()["last_refresh_token_seen"] as? String == tokens.refreshToken)

        // Later gets use the new token without refreshing again.
        #expect(fill(sb, helper: helper, env: env).stdout == expectedFill(tokens.accountId, fresh))
        #expect(try issuer.counter("refresh_requests") == 1)
    }

    @Test(.enabled(if: enabled))
    func rejectOfAnOlderOrForeignTokenChangesNothing() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)

        // A token that was never ours: the stored file is not even rewritten.
        let before = sb.fileBytes(sb.credentialFile)
        #expect(before != nil)
        #expect(reject(sb, accountId: tokens.accountId, password: "not-" + tokens.accessToken).status == 0)
        #expect(sb.fileBytes(sb.credentialFile) == before)
        // Our token but for another host: nothing either.
        #expect(sb.git(Self.helperConfig("chatgpt") + ["credential", "reject"],
                       stdin: "protocol=https\nhost=github.com\nusername=x\npassword=\(tokens.accessToken)\n\n").status == 0)
        #expect(sb.fileBytes(sb.credentialFile) == before)
        #expect(fill(sb, helper: "chatgpt").stdout == expectedFill(tokens.accountId, tokens.accessToken))
        #expect(try issuer.counter("refresh_requests") == 0)

        // Rotate once (reject the current token, get), then a late reject of the old token.
        #expect(reject(sb, accountId: tokens.accountId, password: tokens.accessToken).status == 0)
        let rotated = fill(sb, helper: "chatgpt")
        let fresh = sb.currentToken()
        #expect(fresh != tokens.accessToken)
        #expect(rotated.stdout == expectedFill(tokens.accountId, fresh))
        #expect(try issuer.counter("refresh_requests") == 1)

        let settled = sb.fileBytes(sb.credentialFile)
        #expect(reject(sb, accountId: tokens.accountId, password: tokens.accessToken).status == 0)
        #expect(sb.fileBytes(sb.credentialFile) == settled)
        #expect(fill(sb, helper: "chatgpt").stdout == expectedFill(tokens.accountId, fresh))
        #expect(try issuer.counter("refresh_requests") == 1)
    }

    @Test(.enabled(if: enabled))
    func globalOptionsInTheHelperStringSelectTheProfile() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        sb.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let work = try issuer.seed(["account_id": "acct-work"])
        let stored = sb.runHelper(["--profile", "work", "store"], stdin: Array(work.codexAuthJSON.utf8))
        #expect(stored.status == 0, "\(stored.stderr)")

        // git runs `git credential-chatgpt --profile work get`.
        let r = fill(sb, helper: "chatgpt --profile work")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == expectedFill("acct-work", work.accessToken))
        let abs = fill(sb, helper: "!'\(Harness.binary)' --protocol git --profile work", env: ["PATH": "/usr/bin:/bin"])
        #expect(abs.stdout == expectedFill("acct-work", work.accessToken))

        // The default profile holds nothing: no answer, and our one-line reason on stderr.
        let none = fill(sb, helper: "chatgpt")
        #expect(none.status == 128)
        #expect(none.stdout == "")
        #expect(!none.allOutput.contains(work.accessToken))
        #expect(none.stderr.contains("chatgpt-credential: "), "\(none.stderr)")
    }

    @Test(.enabled(if: enabled))
    func aFailedRefreshNeverAnswers() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer, ["expires_in": -60])

        // The issuer answers the refresh with a token carrying a line feed (which would inject
        // lines into git's input): nothing is printed.
        try issuer.configure(["poison": "newline"])
        let poisoned = fill(sb, helper: "chatgpt")
        #expect(poisoned.status == 128)
        #expect(poisoned.stdout == "")
        #expect(!poisoned.allOutput.contains(tokens.accessToken))
        #expect(try issuer.counter("refresh_requests") == 1)
        let direct = sb.runHelper(["get"], stdin: Array(Self.fillChatGPT.utf8), as: Sandbox.gitHelperName)
        #expect(!direct.signaled && direct.status != 0)
        #expect(direct.stdoutBytes.isEmpty)

        // A permanent rejection: exit 3 from the helper, no output, the credential kept. (The
        // poisoned answer was a transient failure, shared with later calls for a while: forgotten
        // here so the next call reaches the issuer.)
        sb.forgetSharedBackoff()
        try issuer.configure(["poison": NSNull(),
                              "faults": [["status": 401, "body": ["error": ["code": "refresh_token_expired"]]]]])
        let before = sb.fileBytes(sb.credentialFile)
        let rejected = sb.runHelper(["get"], stdin: Array(Self.fillChatGPT.utf8), as: Sandbox.gitHelperName)
        #expect(rejected.status == 3, "\(rejected.stderr)")
        #expect(rejected.stdoutBytes.isEmpty)
        #expect(sb.fileBytes(sb.credentialFile) != nil)
        #expect(before != nil)
        let docker = sb.runHelper(["get"], stdin: Array("https://chatgpt.com".utf8), as: Sandbox.dockerHelperName)
        #expect(docker.status == 1)
        #expect(!docker.stdout.isEmpty && !docker.stdout.contains(tokens.accessToken))
        #expect(!docker.stdout.contains("\"Secret\""))
    }

    // MARK: real HTTP

    static let httpEnabled = Tools.haveGit && Tools.haveOpenSSL && Tools.haveGitHTTPBackend
        && FileManager.default.isExecutableFile(atPath: Tools.python3)

    @Test(.enabled(if: httpEnabled), arguments: helperForms)
    func lsRemoteAndCloneOverHTTPSUseOnlyOurHelper(helper: String) throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)
        mkdir(sb.root + "/server", 0o700)
        let server = try GitHTTPServer(directory: sb.root + "/server", expectedToken: tokens.accessToken,
                                       username: tokens.accountId)
        let env = helper == "chatgpt" ? [:] : ["PATH": "/usr/bin:/bin"]
        let git = Self.helperConfig(helper) + server.gitOptions

        let ls = sb.git(git + ["ls-remote", server.url], env: env)
        #expect(ls.status == 0, "ls-remote: \(ls.stderr)")
        #expect(ls.stdout == "\(server.commit)\tHEAD\n\(server.commit)\trefs/heads/main\n")
        let log = server.log()
        // git first tries without credentials, is challenged, asks our helper, retries.
        #expect(log.first?.auth == "none" && log.first?.status == 401)
        #expect(log.contains { $0.auth == "ok" && $0.user == tokens.accountId && $0.status == 200 })
        #expect(!log.contains { $0.auth == "bad" })

        let clone = sb.git(git + ["clone", "-q", server.url, sb.root + "/clone"], env: env)
        #expect(clone.status == 0, "clone: \(clone.stderr)")
        let head = sb.git(["-C", sb.root + "/clone", "rev-parse", "HEAD"])
        #expect(head.stdout == server.commit + "\n")
        #expect(sb.fileBytes(sb.root + "/clone/README") == Array("served over loopback\n".utf8))
        // git keeps neither the token nor the account id in the clone's configuration.
        let config = String(decoding: sb.fileBytes(sb.root + "/clone/.git/config") ?? [], as: UTF8.self)
        #expect(config.contains("https://chatgpt.com/repo.git"))
        #expect(!config.contains(tokens.accessToken))
        #expect(!ls.allOutput.contains(tokens.accessToken) && !clone.allOutput.contains(tokens.accessToken))
        #expect(try issuer.counter("refresh_requests") == 0)

        // Control: without our helper the same fetch fails, so it was our helper that got us in.
        let none = sb.git(["-c", "credential.helper="] + server.gitOptions + ["ls-remote", server.url], env: env)
        #expect(none.status == 128)
        #expect(none.stdout == "")
    }

    @Test(.enabled(if: httpEnabled))
    func aTokenTheServerRejectsIsDroppedAndTheNextFetchRefreshes() throws {
        let issuer = try TestIssuer()
        let sb = Sandbox(bus: .none, store: "file")
        let tokens = try sb.signIn(issuer)
        mkdir(sb.root + "/server", 0o700)
        // The server no longer accepts the stored token (as after a server-side revocation).
        let server = try GitHTTPServer(directory: sb.root + "/server", expectedToken: "revoked-" + tokens.accessToken)
        let git = Self.helperConfig("chatgpt") + server.gitOptions

        let failed = sb.git(git + ["ls-remote", server.url])
        #expect(failed.status == 128)
        #expect(failed.stderr.contains("Authentication failed"), "\(failed.stderr)")
        #expect(server.log().contains { $0.auth == "bad" && $0.user == tokens.accountId })
        // git ran `erase` with the rejected token: the next get refreshes, exactly once.
        #expect(try issuer.counter("refresh_requests") == 0)
        let fresh = sb.currentToken()
        #expect(fresh != tokens.accessToken && !fresh.isEmpty)
        #expect(try issuer.counter("refresh_requests") == 1)
        #expect(try issuer.stats()["last_refresh_token_seen"] as? String == tokens.refreshToken)

        try server.expect(token: fresh)
        let ok = sb.git(git + ["ls-remote", server.url])
        #expect(ok.status == 0, "ls-remote: \(ok.stderr)")
        #expect(ok.stdout == "\(server.commit)\tHEAD\n\(server.commit)\trefs/heads/main\n")
        #expect(try issuer.counter("refresh_requests") == 1)
    }
}
