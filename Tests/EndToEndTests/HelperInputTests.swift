import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hostile and malformed input through the real binary. git ignores a helper's exit status, so
/// the property that matters is "no token on stdout unless the request was well-formed and for
/// our host"; the exit status is checked too (0 = no answer, 2 = bad input) and must never be a
/// signal.
@Suite(.serialized) struct HelperInputTests {
    /// One signed-in sandbox per test, with the file store and the test issuer.
    final class Fixture {
        let issuer: TestIssuer
        let sb: Sandbox
        let tokens: TestIssuer.SeededTokens
        init() throws {
            issuer = try TestIssuer()
            sb = Sandbox(bus: .none, store: "file")
            tokens = try sb.signIn(issuer)
        }
        /// Exactly what `git-credential-chatgpt get` prints for a well-formed chatgpt.com request.
        var answer: String {
            "username=\(tokens.accountId)\npassword=\(tokens.accessToken)\npassword_expiry_utc=\(tokens.expiresAt)\n"
        }
        func gitHelper(_ verb: String, _ input: [UInt8]) -> ProcessResult {
            sb.runHelper([verb], stdin: input, as: Sandbox.gitHelperName)
        }
        func dockerHelper(_ verb: String, _ input: [UInt8]) -> ProcessResult {
            sb.runHelper([verb], stdin: input, as: Sandbox.dockerHelperName)
        }
    }

    struct Case: CustomStringConvertible, Sendable {
        var name: String
        var input: [UInt8]
        var status: Int32
        var answers: Bool
        var description: String { name }
        init(_ name: String, _ input: String, status: Int32, answers: Bool = false) {
            self.init(name, Array(input.utf8), status: status, answers: answers)
        }
        init(_ name: String, _ input: [UInt8], status: Int32, answers: Bool = false) {
            self.name = name; self.input = input; self.status = status; self.answers = answers
        }
    }

    static let longValue = String(repeating: "a", count: 70_000)

    static let gitCases: [Case] = [
        Case("well-formed", "protocol=https\nhost=chatgpt.com\n\n", status: 0, answers: true),
        Case("no blank line, ends at EOF", "protocol=https\nhost=chatgpt.com\n", status: 0, answers: true),
        Case("no line feed at all at EOF", "protocol=https\nhost=chatgpt.com", status: 0, answers: true),
        Case("CRLF lines", "protocol=https\r\nhost=chatgpt.com\r\n\r\n", status: 0, answers: true),
        Case("upper case and trailing dot", "protocol=https\nhost=ChatGPT.COM.\n\n", status: 0, answers: true),
        Case("bytes after the blank line are not read", Array("protocol=https\nhost=chatgpt.com\n\n".utf8) + [0, 0xFF, 0x0A], status: 0, answers: true),
        Case("other host at EOF", "protocol=https\nhost=evil.com", status: 0),
        Case("empty input", "", status: 0),
        Case("only a blank line", "\n", status: 0),
        Case("no host", "protocol=https\n\n", status: 0),
        Case("70000-byte path line", "protocol=https\nhost=chatgpt.com\npath=\(longValue)\n\n", status: 2),
        Case("70000-byte host line", "protocol=https\nhost=chatgpt.com\(longValue)\n\n", status: 2),
        Case("70000-byte line with no line feed", "protocol=https\nhost=chatgpt.com\nx=\(longValue)", status: 2),
        Case("NUL inside the host", Array("protocol=https\nhost=chatgpt.com".utf8) + [0] + Array("evil.com\n\n".utf8), status: 2),
        Case("NUL before the host line", Array("protocol=https\n".utf8) + [0] + Array("\nhost=chatgpt.com\n\n".utf8), status: 2),
        Case("host given twice, ours first", "protocol=https\nhost=chatgpt.com\nhost=evil.com\n\n", status: 2),
        Case("host given twice, ours last", "protocol=https\nhost=evil.com\nhost=chatgpt.com\n\n", status: 2),
        Case("host twice without blank line", "host=chatgpt.com\nhost=evil.com", status: 2),
        Case("protocol given twice", "protocol=http\nprotocol=https\nhost=chatgpt.com\n\n", status: 2),
        Case("password given twice", "protocol=https\nhost=chatgpt.com\npassword=a\npassword=b\n\n", status: 2),
        Case("percent-encoded line feed in host", "protocol=https\nhost=evil.com%0Ahost=chatgpt.com\n\n", status: 0),
        Case("percent-encoded line feed, ours first", "protocol=https\nhost=chatgpt.com%0Ahost=evil.com\n\n", status: 0),
        Case("carriage return inside host", "protocol=https\nhost=evil.com\rhost=chatgpt.com\n\n", status: 0),
        Case("url= only (git never sends it to helpers)", "url=https://chatgpt.com/\n\n", status: 0),
        Case("url= with encoded newline host", "protocol=https\nurl=https://evil.com?%0ahost=chatgpt.com\n\n", status: 0),
        Case("url= with encoded newline, trailing", "protocol=https\nurl=https://chatgpt.com%0a\n\n", status: 0),
        Case("url= for us, host for someone else", "url=https://chatgpt.com/\nhost=evil.com\n\n", status: 0),
        Case("userinfo in host", "protocol=https\nhost=chatgpt.com@evil.com\n\n", status: 0),
        Case("backslash in host", "protocol=https\nhost=evil.com\\@chatgpt.com\n\n", status: 0),
        Case("look-alike suffix", "protocol=https\nhost=chatgpt.com.evil.com\n\n", status: 0),
        Case("look-alike prefix", "protocol=https\nhost=notchatgpt.com\n\n", status: 0),
        Case("leading space in host", "protocol=https\nhost= chatgpt.com\n\n", status: 0),
        Case("port 0", "protocol=https\nhost=chatgpt.com:0\n\n", status: 0),
        Case("port out of range", "protocol=https\nhost=chatgpt.com:65536\n\n", status: 0),
        Case("IDN look-alike", "protocol=https\nhost=chatgpt.cοm\n\n", status: 0),
        Case("plain http", "protocol=http\nhost=chatgpt.com\n\n", status: 0),
        Case("line without =", "protocol=https\nhostchatgpt.com\n\n", status: 2),
        Case("invalid UTF-8", Array("protocol=https\nhost=chatgpt.com\npath=".utf8) + [0xFF, 0xFE] + Array("\n\n".utf8), status: 2),
    ]

    @Test(arguments: gitCases)
    func gitGetThroughTheRealBinary(_ c: Case) throws {
        let f = try Fixture()
        let r = f.gitHelper("get", c.input)
        #expect(!r.signaled && !r.timedOut, "\(c.name): killed by signal \(r.status)")
        #expect(r.status == c.status, "\(c.name): \(r.stderr)")
        #expect(r.stdout == (c.answers ? f.answer : ""), "\(c.name)")
        if !c.answers { #expect(!r.allOutput.contains(f.tokens.accessToken), "\(c.name)") }
        // Bad input says why on stderr, in one line.
        if c.status == 2 {
            #expect(r.stderr.hasPrefix("chatgpt-credential: git credential input"), "\(c.name): \(r.stderr)")
            #expect(r.stderr.filter { $0 == "\n" }.count == 1, "\(c.name): \(r.stderr)")
        }
    }

    @Test func badInputToStoreAndEraseChangesNothing() throws {
        let f = try Fixture()
        let before = f.sb.fileBytes(f.sb.credentialFile)
        let erase = "protocol=https\nhost=chatgpt.com\npassword=\(f.tokens.accessToken)\n"
        for verb in ["store", "erase"] {
            for input in [Array((erase + "host=evil.com\n\n").utf8),          // ambiguous
                          Array(erase.utf8) + [0] + Array("\n\n".utf8),          // NUL
                          Array((erase + "x=\(Self.longValue)\n\n").utf8)] {     // oversized
                let r = f.gitHelper(verb, input)
                #expect(!r.signaled)
                #expect(r.status == 2, "\(verb): \(r.stderr)")
                #expect(r.stdout == "")
                #expect(f.sb.fileBytes(f.sb.credentialFile) == before, "\(verb) changed the stored credential")
            }
        }
        // Unknown verbs are ignored without reading stdin.
        let unknown = f.gitHelper("capability", Array(Self.longValue.utf8))
        #expect(unknown.status == 0 && !unknown.signaled)
        #expect(unknown.stdoutBytes.isEmpty)
        #expect(try f.issuer.counter("refresh_requests") == 0)
    }

    /// git itself refuses URLs that would smuggle a line into the helper's input; whatever it
    /// does, our token must not come out.
    @Test(.enabled(if: Tools.haveGit)) func realGitWithURLTricks() throws {
        let f = try Fixture()
        for url in ["https://evil.com?%0ahost=chatgpt.com", "https://evil.com/%0Ahost=chatgpt.com",
                    "https://evil.com%0a.chatgpt.com/", "https://chatgpt.com@evil.com/",
                    "https://chatgpt.com.evil.com/", "https://evil.com/chatgpt.com",
                    "http://chatgpt.com/", "https://evil.com%00chatgpt.com/"] {
            let r = f.sb.git(GitHelperTests.helperConfig("chatgpt") + ["credential", "fill"], stdin: "url=\(url)\n\n")
            #expect(r.status != 0, "\(url): git answered \(r.stdout)")
            #expect(!r.allOutput.contains(f.tokens.accessToken), "\(url)")
        }
        // Control: the same route does answer for the real host.
        let ok = f.sb.git(GitHelperTests.helperConfig("chatgpt") + ["credential", "fill"], stdin: "url=https://chatgpt.com/\n\n")
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("password=\(f.tokens.accessToken)\n"))
    }

    @Test func plainProtocolUsageErrorsExit2() throws {
        let f = try Fixture()
        let before = f.sb.fileBytes(f.sb.credentialFile)
        for (args, stdin) in [(["frobnicate"], nil), (["--protocol", "smtp", "get"], nil), (["get", "--bogus"], nil),
                              (["store"], Array("not json".utf8)), (["store"], [0, 1, 2, 0xFF] as [UInt8]),
                              (["store"], Array(#"{"access_token":"a"}"#.utf8))] as [([String], [UInt8]?)] {
            let r = f.sb.runHelper(args, stdin: stdin)
            #expect(!r.signaled)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stdout == "", "\(args)")
            #expect(r.stderr.hasPrefix("chatgpt-credential: "), "\(args): \(r.stderr)")
        }
        #expect(f.sb.fileBytes(f.sb.credentialFile) == before)
    }

    // MARK: garbage from a seeded generator

    /// An independent, deliberately simple reading of a git request: the one `host` value if the
    /// request is for one of our hosts, else nil. Used only as an oracle for "may it answer?".
    static func oracleAllowsAnswer(_ input: [UInt8]) -> Bool {
        var end = input.count
        for i in 0..<input.count where input[i] == 0x0A && (i == 0 || input[i - 1] == 0x0A) { end = i; break }
        let text = String(decoding: input[..<end], as: UTF8.self)
        var hosts: [String] = [], protocols: [String] = []
        for var line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.last == "\r" { line.removeLast() }
            if line.hasPrefix("host=") { hosts.append(String(line.dropFirst(5))) }
            if line.hasPrefix("protocol=") { protocols.append(String(line.dropFirst(9))) }
        }
        guard hosts.count == 1, protocols.count <= 1, protocols.first.map({ $0.lowercased() == "https" }) ?? true else { return false }
        var h = hosts[0].lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        return h == "chatgpt.com" || h == "api.openai.com" || h.hasSuffix(".chatgpt.com")
    }

    @Test func gitGetWithSeededGarbage() throws {
        let f = try Fixture()
        var rng = SeededRandom(seed: 0x5EED_C0DE)
        let valid = Array("protocol=https\nhost=chatgpt.com\n\n".utf8)
        for round in 0..<120 {
            var input: [UInt8]
            switch round % 3 {
            case 0: // pure noise
                input = rng.bytes(Int.random(in: 0...4096, using: &rng))
            case 1: // a well-formed request for another host, then noise
                input = Array("protocol=https\nhost=evil.com\n".utf8) + rng.bytes(Int.random(in: 1...2048, using: &rng))
            default: // our request with 1-4 bytes replaced by random ones (often newline, NUL, '=')
                input = valid
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    let special: [UInt8] = [0x0A, 0x00, 0x3D, 0x0D, 0x2E, 0xFF]
                    let b = Bool.random(using: &rng) ? special.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
                    input[Int.random(in: 0..<input.count, using: &rng)] = b
                }
            }
            let r = f.gitHelper("get", input)
            #expect(!r.signaled && !r.timedOut, "round \(round): signal \(r.status)")
            #expect(r.status == 0 || r.status == 2, "round \(round): status \(r.status) \(r.stderr)")
            if r.stdoutBytes.isEmpty { continue }
            // An answer is allowed only when the request was unambiguously for us, and then it
            // is exactly the answer.
            #expect(round % 3 == 2, "round \(round): answered noise: \(input)")
            #expect(Self.oracleAllowsAnswer(input), "round \(round): answered \(input)")
            #expect(r.stdout == f.answer, "round \(round)")
        }
        #expect(try f.issuer.counter("refresh_requests") == 0)
    }

    @Test func dockerGetWithGarbageAndHugeInput() throws {
        let f = try Fixture()
        var rng = SeededRandom(seed: 0xD0C_4E12)
        var inputs: [[UInt8]] = (0..<40).map { _ in rng.bytes(Int.random(in: 1...2048, using: &rng)) }
        inputs.append([UInt8](repeating: 0x41, count: 10 << 20))                               // 10 MB
        inputs.append(Array(String(repeating: "https://chatgpt.com\n", count: 600_000).utf8))  // 12 MB of our URL
        inputs.append(Array("https://chatgpt.com".utf8) + [0] + Array("evil.com".utf8))
        inputs.append(Array("https://chatgpt.com\nhttps://evil.com".utf8))
        inputs.append(Array("https://chatgpt.com".utf8) + [0x1B] + Array("[2J".utf8))
        for (n, input) in inputs.enumerated() {
            let r = f.dockerHelper("get", input)
            #expect(!r.signaled && !r.timedOut, "input \(n): signal \(r.status)")
            #expect(r.status == 1, "input \(n): \(r.stdout)")
            #expect(!r.stdout.isEmpty, "input \(n): docker expects the error on stdout")
            #expect(!r.allOutput.contains(f.tokens.accessToken), "input \(n)")
        }
        // store/erase with 10 MB: refused, nothing changed.
        let before = f.sb.fileBytes(f.sb.credentialFile)
        for verb in ["store", "erase"] {
            let r = f.dockerHelper(verb, [UInt8](repeating: 0x7B, count: 10 << 20))
            #expect(!r.signaled && r.status == 1, "\(verb): \(r.status)")
            #expect(f.sb.fileBytes(f.sb.credentialFile) == before)
        }
        #expect(try f.issuer.counter("revocations") == 0)
    }
}
