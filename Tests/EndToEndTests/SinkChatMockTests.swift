import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real ChatMock (PyPI `chatmock`, installed into .venv-tools by `make tools`, part of
/// `make setup`) reading a `chatmock` sink (chatgpt-credential(7), SINKS): it finds a fresh token
/// and nothing to spend, so the loopback test issuer counts no refresh from it; the control case, the
/// same file with a live refresh token, makes ChatMock refresh on its own.
@Suite(.serialized) struct SinkChatMockTests {
    static let chatmock = Harness.repoRoot + "/.venv-tools/bin/chatmock"
    static var installed: Bool { FileManager.default.isExecutableFile(atPath: chatmock) }

    /// `chatmock info` with ChatMock's own variables (its chatmock/config.py and utils.py):
    /// `CHATGPT_LOCAL_HOME` for the auth.json, `CHATGPT_LOCAL_ISSUER` for the issuer.
    static func info(_ w: SinkEndToEndTests.World, home dir: String, json: Bool = false) -> RunResult {
        var env = w.sandbox.env
        env["CHATGPT_LOCAL_HOME"] = dir
        env["CHATGPT_LOCAL_ISSUER"] = w.issuer.url
        env.removeValue(forKey: "CODEX_HOME")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return Harness.run(chatmock, ["info"] + (json ? ["--json"] : []), env: env, timeout: 60)
    }

    @Test(.enabled(if: SinkChatMockTests.installed, "ChatMock is not installed in .venv-tools: run make tools (make setup does)"))
    func chatMockReadsTheSinkAndNeverRefreshesItself() throws {
        let w = try SinkEndToEndTests.world(expiresIn: 3600)
        let dir = w.home + "/chatmock"
        let add = w.run(["sink", "add", "--format", "chatmock", "--path", dir + "/auth.json"])
        #expect(add.status == 0, "\(add.stderr)")
        let first = Self.info(w, home: dir)
        #expect(first.status == 0, "chatmock info: \(first.allOutput)")
        #expect(first.stdout.contains("Signed in with ChatGPT") && first.stdout.contains(w.tokens.accountId), "\(first.stdout)")
        #expect(try w.issuer.counter("refresh_requests") == 0)

        // The token nears expiry (within ChatMock's 5 minutes): ChatMock has no refresh token to spend.
        let short = try w.issuer.seed(["expires_in": 120])
        let store = w.run(["store"], stdin: #"{"access_token":"\#(short.accessToken)","refresh_token":"\#(short.refreshToken)","id_token":"\#(short.idToken)"}"#)
        #expect(store.status == 0, "\(store.stderr)")
        let near = Self.info(w, home: dir)
        #expect(near.status == 0 && near.stdout.contains("Signed in with ChatGPT"), "\(near.allOutput)")
        #expect(try w.issuer.counter("refresh_requests") == 0, "ChatMock refreshed the sink's token itself")

        // One refresh, ours; ChatMock then reads the new token.
        let get = w.run(["get"])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(try w.issuer.counter("refresh_requests") == 1)
        let after = Self.info(w, home: dir, json: true)
        let auth = try #require(try JSONSerialization.jsonObject(with: Data(after.stdoutBytes)) as? [String: Any])
        let tokens = try #require(auth["tokens"] as? [String: Any])
        #expect(tokens["access_token"] as? String == get.stdout.trimmingCharacters(in: .newlines))
        #expect(tokens["refresh_token"] as? String == "")
        #expect(Self.info(w, home: dir).status == 0)
        #expect(try w.issuer.counter("refresh_requests") == 1, "ChatMock refreshed after the rewrite")
    }

    /// Control: the same shape with a live refresh token and a token near expiry makes ChatMock
    /// refresh on its own, so the test above can fail.
    @Test(.enabled(if: SinkChatMockTests.installed, "ChatMock is not installed in .venv-tools: run make tools (make setup does)"))
    func controlChatMockRefreshesAFileWithALiveRefreshToken() throws {
        let w = try SinkEndToEndTests.world(expiresIn: 3600)
        let dir = w.home + "/control"
        _ = try SinkEndToEndTests.codexFile(w, dir + "/auth.json", expiresIn: 120)
        let r = Self.info(w, home: dir)
        #expect(r.status == 0, "\(r.allOutput)")
        #expect(try w.issuer.counter("refresh_requests") == 1, "ChatMock did not refresh a file holding a live refresh token")
    }
}
