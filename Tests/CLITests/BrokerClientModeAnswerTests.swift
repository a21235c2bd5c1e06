import Foundation
import Testing
import TestSupport
@testable import CLI
@testable import Broker
@testable import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// A lying broker: a UNIX socket (in a 0700 directory of ours) that answers every request with
/// the same canned HTTP answer, whatever was asked.
final class LyingBroker: @unchecked Sendable {
    let directory: String
    var path: String { directory + "/broker.sock" }
    var address: String { "unix:" + path }
    private let listener: Int32
    private let stopped = DispatchSemaphore(value: 0)

    init(status: Int = 200, body: String) throws {
        (directory, listener) = try brokerSocketInOwnDirectory("ccred-lying", backlog: 8)
        let reply = Array("HTTP/1.1 \(status) X\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        let fd = listener
        Thread.detachNewThread { [stopped] in
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { if errno == EINTR { continue } else { break } }
                _ = readRequestHead(c) // whatever was asked, the same answer
                var off = 0
                while off < reply.count {
                    let n = reply[off...].withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if n <= 0 { break }
                    off += n
                }
                close(c)
            }
            stopped.signal()
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        _ = stopped.wait(timeout: .now() + 5)
        close(listener)
        unlink(path)
        rmdir(directory)
    }
}

/// A console that keeps what is printed on stdout and stderr and reads nothing.
final class CapturingConsole: Console, @unchecked Sendable {
    private(set) var stdout = ""
    private(set) var lines: [String] = []
    private var input: [UInt8]
    init(stdin: String = "") { input = Array(stdin.utf8) }
    func out(_ text: String) { stdout += text }
    func out(_ secret: borrowing SecretBytes) { stdout += String(decoding: secret.unsafeArray(), as: UTF8.self) }
    func err(_ line: String) { lines.append(line) }
    func readInput(limit: Int) throws -> SecretBytes { defer { input = [] }; return SecretBytes(copying: input) }
    func readSome(_ max: Int) throws -> [UInt8] { let n = min(max, input.count); defer { input.removeFirst(n) }; return Array(input[0..<n]) }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { false }
}

/// Client mode refuses an answer the host would refuse (man page BROKER, Client mode), whatever
/// the broker says: a lying broker is never passed on.
@Suite(.serialized) struct BrokerClientModeAnswerTests {
    /// Runs `args` in client mode against `broker`.
    func run(_ broker: LyingBroker, _ args: [String], argv0: String = "chatgpt-credential", stdin: String = "") throws -> (Outcome, CapturingConsole) {
        try run(address: broker.address, args, argv0: argv0, stdin: stdin)
    }

    func run(address: String, _ args: [String], argv0: String = "chatgpt-credential", stdin: String = "") throws -> (Outcome, CapturingConsole) {
        let console = CapturingConsole(stdin: stdin)
        let runner = Runner(console: console, services: .live(settings: Settings(), console: console))
        let invocation = try ArgumentParser.parse([argv0, "--broker", address] + args, settings: Settings())
        return (runner.run(invocation), console)
    }

    static func tokenAnswer(expiresIn: Int64, accountId: String = #""acct-1""#) -> String {
        #"{"access_token":"eyJ.lying-token","account_id":\#(accountId),"expires_at":"\#(Clock.rfc3339(Clock.now() + expiresIn))","email":"a@example.com","plan":"plus"}"#
    }

    @Test func anAccessTokenAlreadyExpiredIsExit4() throws {
        let broker = try LyingBroker(body: Self.tokenAnswer(expiresIn: -3600))
        defer { broker.stop() }
        for args in [["get"], ["get", "--json"], ["status"]] {
            let (outcome, console) = try run(broker, args)
            #expect(outcome == .exit(4), "\(args): expected exit 4 for an expired token: \(outcome) \(console.lines)")
            #expect(!console.stdout.contains("eyJ.lying-token"), "\(args) printed the expired token")
            #expect(console.lines.count == 1 && console.lines.first?.contains("expired") == true, "\(args): \(console.lines)")
        }
    }

    /// Valid, but for less than `--min-ttl`: printed, with the notice the host prints when even a
    /// fresh token falls short of what was asked (`RefreshPolicy.afterRefresh`).
    @Test func aTokenShortOfMinTTLIsPrintedWithTheHostsNotice() throws {
        let broker = try LyingBroker(body: Self.tokenAnswer(expiresIn: 1200))
        defer { broker.stop() }
        let (outcome, console) = try run(broker, ["get", "--min-ttl", "7200"])
        #expect(outcome == .exit(0), "expected exit 0 for a valid token short of --min-ttl: \(outcome) \(console.lines)")
        #expect(console.stdout == "eyJ.lying-token\n")
        #expect(console.lines.count == 1, "\(console.lines)")
        #expect(console.lines.first?.hasPrefix("chatgpt-credential: notice: the issuer grants tokens valid for ") == true
                && console.lines.first?.contains("less than the 7200 s asked for; printing this one") == true, "\(console.lines)")
        // Long enough: no notice.
        let (plain, quiet) = try run(broker, ["get", "--min-ttl", "600"])
        #expect(plain == .exit(0) && quiet.lines.isEmpty, "expected exit 0 without a notice: \(quiet.lines)")
    }

    @Test(arguments: ["12345", "null", "[\"acct-1\"]", "{\"id\":\"acct-1\"}", "true"])
    func aNonStringAccountIdIsExit1(_ accountId: String) throws {
        let broker = try LyingBroker(body: Self.tokenAnswer(expiresIn: 3600, accountId: accountId))
        defer { broker.stop() }
        for args in [["get"], ["get", "--json"], ["get", "--account-id"], ["status"]] {
            let (outcome, console) = try run(broker, args)
            #expect(outcome == .exit(1), "account_id \(accountId), \(args): expected exit 1 (malformed answer): \(outcome) \(console.stdout)")
            #expect(console.stdout.isEmpty, "\(args) printed \(console.stdout)")
            #expect(console.lines.count == 1 && console.lines.first?.contains("malformed") == true, "\(console.lines)")
        }
    }

    /// A usage answer the host would never print: more windows in a limit than there are roles,
    /// more additional limits than `UsageReport.maxAdditional`, or a body over 64 KiB.
    static func repeated(_ item: String, _ count: Int) -> String {
        Array(repeating: item, count: count).joined(separator: ",")
    }

    static let oversizedUsage: [String] = {
        let manyWindows: String = #"{"plan":"plus","windows":["# + repeated(#"{"name":"primary","used_percent":1}"#, 5000) + "]}"
        let manyLimits: String = #"{"plan":"plus","windows":[],"additional_limits":["# + repeated(#"{"name":"x","windows":[]}"#, 5000) + "]}"
        let threeWindows: String = #"{"plan":"plus","windows":[],"additional_limits":[{"name":"x","windows":["# + repeated(#"{"name":"primary"}"#, 3) + "]}]}"
        let big: String = #"{"plan":"plus","windows":[],"credits":{"balance":""# + String(repeating: "9", count: 70_000) + #""}}"#
        return [manyWindows, manyLimits, threeWindows, big]
    }()

    @Test(arguments: oversizedUsage)
    func anOversizedUsageAnswerIsExit1(_ body: String) throws {
        let broker = try LyingBroker(body: body)
        defer { broker.stop() }
        for args in [["usage", "--json"], ["usage"]] {
            let (outcome, console) = try run(broker, args)
            #expect(outcome == .exit(1), "\(args): expected exit 1 for an oversized usage answer (\(body.utf8.count) bytes): \(outcome)")
            #expect(console.stdout.isEmpty, "\(args) printed \(console.stdout.prefix(200))")
            #expect(console.lines.count == 1, "\(console.lines)")
        }
    }

    /// What the host prints is taken: two windows, 16 additional limits.
    @Test func aUsageAnswerTheHostCouldPrintIsPrintedAsTheHostWould() throws {
        let window = #"{"name":"primary","label":"5h","window_seconds":18000,"used_percent":12,"resets_at":null}"#
        let extra: String = #"{"name":"x","metered_feature":null,"allowed":true,"limit_reached":false,"windows":[\#(window)]}"#
        let head: String = #"{"plan":"plus","allowed":true,"limit_reached":false,"windows":[\#(window)],"credits":null,"additional_limits":["#
        let body: String = head + Self.repeated(extra, 16) + "]}"
        let broker = try LyingBroker(body: body)
        defer { broker.stop() }
        let (outcome, console) = try run(broker, ["usage", "--json"])
        #expect(outcome == .exit(0), "expected exit 0: \(console.lines)")
        #expect(console.stdout == body + "\n")
    }
}

/// Advice in client mode never names a verb client mode refuses as something to run here
/// (man page BROKER, Client mode): every path by which advice reaches a client-mode user.
@Suite(.serialized) struct ClientModeAdviceTests {
    static let refusedVerbs = ["login", "store", "erase", "refresh", "serve", "sink"]

    /// The clauses of `line` (between `;`, `(` and `)`) that name a refused verb, as a command
    /// (`chatgpt-credential [--OPTION [VALUE]]… VERB`) or as `VERB --option`, without saying
    /// "broker's side".
    static func adviceHere(_ line: String) -> [String] {
        let verbs = refusedVerbs.joined(separator: "|")
        // A verb's --help runs in client mode too: pointing at it is no advice to run the verb.
        let command = try! NSRegularExpression(pattern: "chatgpt-credential( --[a-z-]+( [^ -][^ ;()]*)?)* '?(\(verbs))\\b(?! --help)|\\b(\(verbs))'?( --(?!help)[a-z]|\\?)")
        return line.split(whereSeparator: { ";()".contains($0) }).map(String.init).filter { clause in
            command.firstMatch(in: clause, range: NSRange(clause.startIndex..., in: clause)) != nil && !clause.contains("broker's side")
        }
    }

    @Test func theCheckerSeesTheHostsAdvice() {
        #expect(!Self.adviceHere(CredentialError.notSignedIn(profile: "work").message).isEmpty)
        #expect(!Self.adviceHere("it answers its own user (or one named by serve --allow-uid)").isEmpty)
        #expect(!Self.adviceHere("unknown verb 'logn'; did you mean 'login'? (see: chatgpt-credential login --help)").isEmpty)
        #expect(Self.adviceHere("unknown verb 'x' (see: chatgpt-credential login --help)").isEmpty)
        #expect(Self.adviceHere("'erase' is refused in client mode (broker unix:/b): only the broker's side changes or serves the credential; run it there").isEmpty)
    }

    /// What the host says when it advises a refused verb, relayed by the broker with its status.
    static let relayed: [(status: Int, message: String, args: [String])] = [
        (401, CredentialError.notSignedIn(profile: "default").message, ["get"]),
        (401, CredentialError.notSignedIn(profile: "work").message, ["--profile", "work", "get"]),
        (401, CredentialError.refreshRejected(profile: "default", code: "refresh_token_reused").message, ["get", "--json"]),
        (401, CredentialError.backendRejected(profile: "default").message, ["usage"]),
        (503, CredentialError.notFoundKeyringUnreachable(profile: "default", keyring: "the Secret Service is not reachable", file: "/h/default.age").message, ["status"]),
        (503, "the stored copy is damaged; " + Profile.default.removeDamagedHint, ["get"]),
        (503, CredentialError.storeCorrupt("the stored access token contains characters that cannot be sent; sign in again: chatgpt-credential login").message, ["exec", "--", "/bin/true"]),
        (403, "peer uid 1234 is not allowed", ["get"]),
    ]

    @Test(arguments: 0..<relayed.count)
    func theBrokersAdviceIsForTheBrokersSide(_ i: Int) throws {
        let (status, message, args) = Self.relayed[i]
        let broker = try LyingBroker(status: status, body: JSON.serialize(.object([("error", .string("x")), ("message", .string(message))])))
        defer { broker.stop() }
        let expected = CredentialError.exitCode(forBrokerStatus: status)
        let (outcome, console) = try ClientModeAnswerRunner.run(broker.address, args)
        #expect(outcome == .exit(expected), "\(args): expected exit \(expected) for HTTP \(status): \(outcome)")
        #expect(console.lines.count == 1, "\(console.lines)")
        let line = console.lines.joined()
        #expect(Self.adviceHere(line).isEmpty, "\(args), HTTP \(status): advice for a refused verb here: \(line)")
        if message.contains("chatgpt-credential") {
            #expect(line.contains("broker's side"), "\(line)")
        }
    }

    /// The same relayed through `status --json`'s error member.
    @Test func statusJSONsErrorIsForTheBrokersSide() throws {
        let broker = try LyingBroker(status: 401, body: JSON.serialize(.object([("error", .string("login_required")), ("message", .string(CredentialError.notSignedIn(profile: "default").message))])))
        defer { broker.stop() }
        let (outcome, console) = try ClientModeAnswerRunner.run(broker.address, ["status", "--json"])
        #expect(outcome == .exit(3), "expected exit 3: \(outcome)")
        #expect(console.stdout.contains("\"needs_login\":true") && console.stdout.contains("on the broker's side: chatgpt-credential login"), "\(console.stdout)")
        #expect(Self.adviceHere(console.stdout).isEmpty, "\(console.stdout)")
    }

    /// Advice made here of the broker's answer: an empty account id, a token with bytes a token
    /// cannot have (get, exec, git's and docker's helpers).
    @Test func adviceMadeOfTheAnswerIsForTheBrokersSide() throws {
        let expires = Clock.rfc3339(Clock.now() + 3600)
        let noAccount = try LyingBroker(body: #"{"access_token":"eyJ.tok","account_id":"","expires_at":"\#(expires)","email":"","plan":""}"#)
        defer { noAccount.stop() }
        let badToken = try LyingBroker(body: #"{"access_token":"eyJ.bad\u0001tok","account_id":"acct-1","expires_at":"\#(expires)","email":"","plan":""}"#)
        defer { badToken.stop() }
        let git = "protocol=https\nhost=chatgpt.com\n\n"
        let cases: [(LyingBroker, [String], String, String, Int32)] = [
            (noAccount, ["get", "--account-id"], "chatgpt-credential", "", 1),
            (noAccount, ["get", "--header"], "chatgpt-credential", "", 1),
            (badToken, ["get"], "chatgpt-credential", "", 5),
            (badToken, ["exec", "--", "/bin/true"], "chatgpt-credential", "", 5),
            (badToken, ["get"], "git-credential-chatgpt", git, 5),
            (badToken, ["get"], "docker-credential-chatgpt", "https://chatgpt.com", 1),
        ]
        for (broker, args, argv0, stdin, expected) in cases {
            let (outcome, console) = try ClientModeAnswerRunner.run(broker.address, args, argv0: argv0, stdin: stdin)
            #expect(outcome == .exit(expected), "\(argv0) \(args): expected exit \(expected): \(outcome) \(console.lines) \(console.stdout)")
            // docker's helpers report on stdout.
            let said = argv0.hasPrefix("docker") ? console.stdout : console.lines.joined(separator: "\n")
            #expect(said.contains("sign in again on the broker's side: chatgpt-credential login"), "\(argv0) \(args): \(said)")
            #expect(Self.adviceHere(said).isEmpty, "\(argv0) \(args): advice for a refused verb here: \(said)")
        }
    }

    /// The client's own advice: a missing socket, a socket nobody listens on.
    @Test func theClientsOwnAdviceIsForTheBrokersSide() throws {
        var template = Array("/tmp/ccred-advice-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { unlink(dir + "/dead.sock"); rmdir(dir) }
        let missing = try ClientModeAnswerRunner.run("unix:" + dir + "/none.sock", ["get"])
        #expect(missing.0 == .exit(5), "expected exit 5 for a missing socket: \(missing.0)")
        let bound = try #require(BoundUnixSocket(at: dir + "/dead.sock")) // bound, never listening
        let dead = try withExtendedLifetime(bound) { try ClientModeAnswerRunner.run("unix:" + dir + "/dead.sock", ["get"]) }
        #expect(dead.0 == .exit(4), "expected exit 4 for a socket nobody listens on: \(dead.0)")
        for line in missing.1.lines + dead.1.lines {
            #expect(Self.adviceHere(line).isEmpty && line.contains("broker's side"), "advice for a refused verb here: \(line)")
        }
    }

    /// A mistyped verb, or one of another tool's words, in client mode: a refused verb is meant for
    /// the broker's side, never "to do that here".
    @Test(arguments: ["logout", "signin", "logn", "eras", "refesh", "serv"])
    func aVerbHintInClientModeIsForTheBrokersSide(_ word: String) throws {
        for env in [["CHATGPT_CREDENTIAL_BROKER": "unix:/run/b.sock"], [:]] {
            let args = env.isEmpty ? ["chatgpt-credential", "--broker", "unix:/run/b.sock", word] : ["chatgpt-credential", word]
            do {
                _ = try ArgumentParser.parse(args, settings: Settings(environment: env))
                Issue.record("\(word) was accepted")
            } catch let e as CredentialError {
                #expect(e.exitCode == 2, "\(word): expected exit 2: \(e.message)")
                #expect(e.message.contains("on the broker's side") && Self.adviceHere(e.message).isEmpty, "\(word): \(e.message)")
            }
        }
        // Without a broker the host's hint stands.
        do { _ = try ArgumentParser.parse(["chatgpt-credential", "logout"], settings: Settings()) } catch let e as CredentialError {
            #expect(e.message.contains("to do that here: chatgpt-credential erase"), "\(e.message)")
        }
    }

    @Test func theRewritingKeepsWhatIsNotAdviceAndIsIdempotent() {
        let once = ClientModeAdvice.onTheBrokersSide("profile 'work' is not signed in; run: chatgpt-credential --profile work login")
        #expect(once == "profile 'work' is not signed in; run on the broker's side: chatgpt-credential --profile work login")
        #expect(ClientModeAdvice.onTheBrokersSide(once) == once)
        #expect(ClientModeAdvice.onTheBrokersSide("else sign in here: chatgpt-credential login") == "else sign in on the broker's side: chatgpt-credential login")
        for plain in ["the broker at unix:/run/chatgpt-credential/broker.sock says: HTTP 500", "run: chatgpt-credential get --json", "run: chmod 600 /x",
                      "unknown verb 'x' (see: chatgpt-credential erase --help)"] {
            #expect(ClientModeAdvice.onTheBrokersSide(plain) == plain)
        }
    }
}

/// Runs one client-mode invocation in process.
enum ClientModeAnswerRunner {
    static func run(_ address: String, _ args: [String], argv0: String = "chatgpt-credential", stdin: String = "") throws -> (Outcome, CapturingConsole) {
        let console = CapturingConsole(stdin: stdin)
        let runner = Runner(console: console, services: .live(settings: Settings(), console: console))
        let invocation = try ArgumentParser.parse([argv0, "--broker", address] + args, settings: Settings())
        return (runner.run(invocation), console)
    }
}
