import Foundation
import Testing
@testable import Broker
@testable import CredentialCore
@testable import Secrets
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A one-connection broker stand-in on a UNIX socket: records the request, then answers with
/// `reply` (written in pieces, to exercise the reader), or never answers (`reply == nil`).
final class CannedBroker: @unchecked Sendable {
    let directory: String
    var path: String { directory + "/broker.sock" }
    private(set) var request = ""
    private let listener: Int32
    private let done = DispatchSemaphore(value: 0)

    init(reply: [UInt8]?, listen: Bool = true, closeAfter: Bool = true) throws {
        (directory, listener) = try brokerSocketInOwnDirectory("ccred-bclient", backlog: listen ? 4 : nil)
        guard listen else { done.signal(); return }
        let fd = listener
        Thread.detachNewThread { [self] in
            let c = accept(fd, nil, nil)
            guard c >= 0 else { done.signal(); return }
            let got = readRequestHead(c)
            request = String(decoding: got, as: UTF8.self)
            if let reply {
                // Three pieces with pauses: the client must put the answer together.
                let cut = [0, reply.count / 3, 2 * reply.count / 3, reply.count]
                for k in 0..<3 {
                    _ = reply[cut[k]..<cut[k + 1]].withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
                    usleep(20_000)
                }
                if closeAfter { close(c) }
            } else {
                // Never answer: wait until the client gives up and closes.
                var buf = [UInt8](repeating: 0, count: 4096)
                while read(c, &buf, buf.count) > 0 {}
                close(c)
            }
            done.signal()
        }
    }

    private var finished = false
    func finish() {
        if finished { return }
        finished = true
        _ = done.wait(timeout: .now() + 5)
        close(listener)
        unlink(path)
        rmdir(directory)
    }

    static func http(_ status: Int, _ body: String, length: Bool = true) -> [UInt8] {
        var head = "HTTP/1.1 \(status) X\r\nContent-Type: application/json\r\n"
        if length { head += "Content-Length: \(body.utf8.count)\r\n" }
        return Array((head + "Connection: close\r\n\r\n" + body).utf8)
    }
}

@Suite struct BrokerClientTests {
    static let tokenBody = #"{"access_token":"eyJ.tok-EN_1","account_id":"acct-1","expires_at":"2031-05-01T00:00:00Z","email":"a@example.com","plan":"plus"}"#

    func client(_ b: CannedBroker, timeout: Double = BrokerClient.defaultTimeout) -> BrokerClient {
        BrokerClient(address: BrokerAddress(path: b.path), timeout: timeout)
    }

    @Test func addressIsUnixAndAnAbsolutePath() throws {
        #expect(try BrokerAddress.parse("unix:/run/user/1000/chatgpt-credential/broker.sock", from: "--broker").path == "/run/user/1000/chatgpt-credential/broker.sock")
        for bad in ["/tmp/b.sock", "unix:", "unix:relative.sock", "tcp://127.0.0.1:1", "unix:/" + String(repeating: "a", count: 120), "unix:/tmp/a\u{1b}b"] {
            let e = thrownCredentialError { _ = try BrokerAddress.parse(bad, from: "--broker") }
            #expect(e?.exitCode == 2, "\(bad): \(String(describing: e))")
        }
    }

    @Test func aTokenAnswerComesBackWithTheTokenInGuardedMemory() throws {
        let b = try CannedBroker(reply: CannedBroker.http(200, Self.tokenBody))
        defer { b.finish() }
        let v = try client(b).token(profile: try Profile("work"), minTTL: 900)
        let token = try #require(v["access_token"]?.secretValue, "access_token is not a secret value")
        #expect(token == SecretToken(stringLiteral: "eyJ.tok-EN_1"))
        #expect(v["account_id"]?.stringValue == "acct-1")
        b.finish()
        #expect(b.request.hasPrefix("GET /v1/token?profile=work&min_ttl=900 HTTP/1.1\r\n"), "\(b.request)")
        #expect(b.request.contains("\r\nConnection: close\r\n") && b.request.contains("\r\nHost: localhost\r\n"))
    }

    @Test func withoutMinTTLTheQueryNamesOnlyTheProfile() throws {
        let b = try CannedBroker(reply: CannedBroker.http(200, Self.tokenBody))
        defer { b.finish() }
        _ = try client(b).token(profile: .default, minTTL: nil)
        b.finish()
        #expect(b.request.hasPrefix("GET /v1/token?profile=default HTTP/1.1\r\n"), "\(b.request)")
    }

    @Test func anAnswerWithoutContentLengthEndsWhenTheBrokerCloses() throws {
        let b = try CannedBroker(reply: CannedBroker.http(200, Self.tokenBody, length: false))
        defer { b.finish() }
        #expect(try client(b).token(profile: .default, minTTL: nil)["plan"]?.stringValue == "plus")
    }

    @Test(arguments: [(400, Int32(2)), (401, 3), (403, 5), (502, 4), (503, 5), (500, 1), (404, 1)])
    func errorAnswersMapToExitCodes(_ status: Int, _ exit: Int32) throws {
        let b = try CannedBroker(reply: CannedBroker.http(status, #"{"error":"x","message":"what \u001b[31mhappened"}"#))
        defer { b.finish() }
        do {
            _ = try client(b).token(profile: .default, minTTL: nil)
            Issue.record("HTTP \(status) was not an error")
        } catch let e as CredentialError {
            #expect(e.exitCode == exit, "HTTP \(status): \(e.message)")
            #expect(e.message.contains("what [31mhappened") && !e.message.contains("\u{1b}"), "\(e.message)")
            if status == 403 { #expect(e.message.contains("refused this process")) }
        }
    }

    /// The broker's message is the client's one line whole, advice included: a store problem's
    /// message names a bus or a path and says what to do (~400 bytes); only a runaway is cut.
    @Test func theBrokersAdviceArrivesWhole() throws {
        let message = "no credential in the Secret Service: the session bus at /run/user/1000/bus is not a socket of this user"
            + String(repeating: " (a long path)", count: 20) + "; if you sign in with the file store instead, run: chatgpt-credential --store file login"
        let b = try CannedBroker(reply: CannedBroker.http(503, #"{"error":"store_problem","message":"\#(message)"}"#))
        defer { b.finish() }
        let e = thrownCredentialError { _ = try client(b).token(profile: .default, minTTL: nil) }
        #expect(e?.exitCode == 5 && e?.message.contains(message) == true, "\(e?.message ?? "none")")
        let runaway = try CannedBroker(reply: CannedBroker.http(503, #"{"error":"store_problem","message":"\#(String(repeating: "x", count: 5000))"}"#))
        defer { runaway.finish() }
        let cut = thrownCredentialError { _ = try client(runaway).token(profile: .default, minTTL: nil) }
        #expect((cut?.message.count ?? 0) < 1200, "\(cut?.message.count ?? 0) characters")
    }

    /// The server answers a failure with the status of its exit code; the client's table (the one
    /// in `CredentialError.exitCode`) gives the same exit code back.
    @Test func everyStatusTheServerSendsMapsBackToItsExitCode() {
        for code: Int32 in 1...5 {
            let status = BrokerProtocol.status(forExitCode: code)
            #expect(CredentialError.brokerAnswered(status: status, message: "", broker: "unix:/b").exitCode == code, "HTTP \(status)")
        }
    }

    @Test func aMissingSocketIsExit5() {
        let c = BrokerClient(address: BrokerAddress(path: "/tmp/ccred-no-such-dir-\(getpid())/broker.sock"))
        let e = thrownCredentialError { _ = try c.get("/v1/health") }
        #expect(e?.exitCode == 5 && e?.message.contains("no broker socket") == true, "\(String(describing: e))")
    }

    @Test func aSocketNobodyListensOnIsExit4AtOnce() throws {
        let b = try CannedBroker(reply: nil, listen: false)
        defer { b.finish() }
        let start = Clock.monotonicMillis()
        do { _ = try client(b).get("/v1/health"); Issue.record("answered") } catch let e as CredentialError {
            #expect(e.exitCode == 4 && e.message.contains("broker not answering"), "\(e.message)")
        }
        #expect(Clock.monotonicMillis() - start < 1000)
    }

    @Test func aBrokerThatNeverAnswersIsExit4AtTheDeadline() throws {
        let b = try CannedBroker(reply: nil)
        defer { b.finish() }
        let start = Clock.monotonicMillis()
        do { _ = try client(b, timeout: 0.5).get("/v1/health"); Issue.record("answered") } catch let e as CredentialError {
            #expect(e.exitCode == 4 && e.message.contains("no answer within 0.5 s"), "\(e.message)")
        }
        let took = Clock.monotonicMillis() - start
        #expect(took >= 450 && took < 2000, "took \(took) ms")
    }

    @Test func aMalformedAnswerIsExit1() throws {
        for reply in [Array("HELLO\r\n\r\n".utf8), Array("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{}".utf8),
                      Array("HTTP/1.1 020 OK\r\n\r\n{}".utf8), Array("HTTP/1.1 +42 OK\r\n\r\n{}".utf8), Array("HTTP/1.1 999 X\r\n\r\n{}".utf8),
                      CannedBroker.http(200, "[1,2]"), CannedBroker.http(200, "not json")] {
            let b = try CannedBroker(reply: reply)
            defer { b.finish() }
            do { _ = try client(b).json("/v1/token?profile=default"); Issue.record("accepted \(reply)") } catch let e as CredentialError {
                #expect(e.exitCode == 1, "\(e.message)")
            }
        }
    }

    /// `Content-Length` is digits only: a negative one crashed the client (a range with its upper
    /// bound below its lower: found by the broker_answer fuzz target, its input in the corpus).
    @Test(arguments: ["-1", "+2", "1 2", "0x2", "", "99999999999999999999999"])
    func aBadContentLengthIsMalformedNeverACrash(_ value: String) throws {
        let raw = SecretBytes(copying: Array("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n{\"access_token\":\"a\"}".utf8))
        #expect(throws: CredentialError.failure("the broker at unix:/b.sock sent a malformed answer (bad Content-Length)")) {
            _ = try BrokerClient.parseAnswer(raw, from: "unix:/b.sock")
        }
        #expect(CredentialError.failure("").exitCode == 1)
        let b = try CannedBroker(reply: Array("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n{}".utf8))
        defer { b.finish() }
        do { _ = try client(b).json("/v1/token?profile=default"); Issue.record("accepted Content-Length '\(value)'") } catch let e as CredentialError {
            #expect(e.exitCode == 1 && e.message.contains("bad Content-Length"), "\(e.message)")
        }
    }

    @Test func aClosedConnectionWithoutAnAnswerIsTemporary() throws {
        let b = try CannedBroker(reply: [])
        defer { b.finish() }
        do { _ = try client(b).get("/v1/health"); Issue.record("answered") } catch let e as CredentialError {
            #expect(e.exitCode == 4, "\(e.message)")
        }
    }

    @Test func anOversizedAnswerIsRefused() throws {
        let big = "{\"pad\":\"" + String(repeating: "a", count: BrokerClient.maxAnswerBytes + 10) + "\"}"
        let b = try CannedBroker(reply: CannedBroker.http(200, big, length: false))
        defer { b.finish() }
        do { _ = try client(b).get("/v1/usage?profile=default"); Issue.record("read it all") } catch let e as CredentialError {
            #expect(e.exitCode == 1 && e.message.contains("more than"), "\(e.message)")
        }
    }
}

/// A listener that accepts nobody until the test does, its backlog (0: one pending connection
/// on Linux) filled by connections that are never read: what a client meets when a broker is
/// busy. A UNIX socket's non-blocking connect says EAGAIN then.
final class FullBacklog: @unchecked Sendable {
    let directory: String
    var path: String { directory + "/broker.sock" }
    let listener: Int32
    private(set) var fillers: [Int32] = []

    init() throws {
        (directory, listener) = try brokerSocketInOwnDirectory("ccred-backlog", backlog: 0)
        fillers = try fillBacklog(at: directory + "/broker.sock")
    }

    /// Accepts the filling connections (closing them), then the next one, which it answers with
    /// `reply` once its request head is in. False when no connection came within 10 s.
    func acceptAndAnswer(_ reply: [UInt8]) -> Bool {
        for _ in fillers {
            let c = accept(listener, nil, nil)
            if c >= 0 { close(c) }
        }
        var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 10_000) == 1 else { return false }
        let c = accept(listener, nil, nil)
        guard c >= 0 else { return false }
        defer { close(c) }
        var got: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while !got.suffix(4).elementsEqual([13, 10, 13, 10]) {
            let n = read(c, &buf, buf.count)
            if n <= 0 { return false }
            got += buf[0..<n]
        }
        _ = reply.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
        return true
    }

    func finish() {
        for f in fillers { close(f) }
        fillers = []
        close(listener)
        unlink(path)
        rmdir(directory)
    }
}

/// What a client thread ended with: the answer's `ok` member, or its error's exit code and message.
final class ClientOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private var value: String?
    var text: String? { lock.withLock { value } }
    func set(_ s: String) { lock.withLock { value = s } }
}

@Suite struct BrokerClientBacklogTests {
    /// A full backlog is waited on within the 10 s deadline (man page BROKER, Client mode): the
    /// client is still waiting half a second after it started (it used to fail at once, "Transport
    /// endpoint is not connected", exit 4), and is answered once the broker accepts.
    @Test func aFullBacklogIsWaitedOnUntilTheBrokerAccepts() throws {
        let backlog = try FullBacklog()
        defer { backlog.finish() }
        let finished = DispatchSemaphore(value: 0)
        let outcome = ClientOutcome()
        let address = BrokerAddress(path: backlog.path)
        Thread.detachNewThread {
            do {
                let v = try BrokerClient(address: address).json(BrokerProtocol.healthPath)
                outcome.set("exit 0, ok=\(v["ok"]?.boolValue.map(String.init) ?? "?")")
            } catch let e as CredentialError {
                outcome.set("exit \(e.exitCode): \(e.message)")
            } catch {
                outcome.set("\(error)")
            }
            finished.signal()
        }
        #expect(finished.wait(timeout: .now() + 0.5) == .timedOut,
                "the client did not wait for a full backlog (expected it still waiting, to exit 0 once accepted): \(outcome.text ?? "")")
        #expect(backlog.acceptAndAnswer(CannedBroker.http(200, #"{"ok":true}"#)), "the client never connected")
        #expect(finished.wait(timeout: .now() + 10) == .success)
        #expect(outcome.text == "exit 0, ok=true", "expected exit 0 once the broker accepted: \(outcome.text ?? "")")
    }

    /// Nobody accepts: exit 4, "broker not answering", at the deadline, not before (the deadline
    /// is the client's `timeout`, 10 s unless told).
    @Test func aBacklogThatStaysFullIsExit4AtTheDeadline() throws {
        let backlog = try FullBacklog()
        defer { backlog.finish() }
        let start = Clock.monotonicMillis()
        do {
            _ = try BrokerClient(address: BrokerAddress(path: backlog.path), timeout: 1).get(BrokerProtocol.healthPath)
            Issue.record("expected exit 4, but it answered")
        } catch let e as CredentialError {
            #expect(e.exitCode == 4 && e.message.contains("broker not answering") && e.message.contains("within 1 s"), "expected exit 4: \(e.exitCode) \(e.message)")
        }
        let took = Clock.monotonicMillis() - start
        #expect(took >= 950 && took < 3000, "expected exit 4 at the 1 s deadline; took \(took) ms")
    }
}

/// The socket's directory decides (man page BROKER, Client mode): one that another user can
/// write is refused, exit 5, before any connection is made.
@Suite struct BrokerClientDirectoryTests {
    /// A listening socket (never accepting) at `directory/broker.sock`; the directory is made
    /// with mkdtemp (0700, ours) and then given `mode`.
    final class Listener {
        let directory: String
        let fd: Int32
        var path: String { directory + "/broker.sock" }
        init(mode: mode_t, owner: uid_t? = nil) throws {
            (directory, fd) = try brokerSocketInOwnDirectory("ccred-bdir", backlog: 8)
            if let owner { guard chown(directory, owner, owner) == 0 else { throw CredentialError.failure("chown: \(errno)") } }
            guard chmod(directory, mode) == 0 else { throw CredentialError.failure("chmod: \(errno)") }
        }
        /// Whether a connection is waiting to be accepted: the client got as far as connect.
        var connected: Bool {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            return poll(&p, 1, 0) == 1
        }
        deinit {
            close(fd)
            unlink(path)
            rmdir(directory)
        }
    }

    func outcome(_ path: String) -> CredentialError? {
        do { _ = try BrokerClient(address: BrokerAddress(path: path), timeout: 0.2).get(BrokerProtocol.healthPath); return nil } catch let e as CredentialError { return e } catch { return .failure("\(error)") }
    }

    @Test(arguments: [mode_t(0o1777), 0o777, 0o770, 0o730, 0o702])
    func aDirectoryOthersCanWriteIsRefusedWithExit5BeforeConnecting(_ mode: mode_t) throws {
        let l = try Listener(mode: mode)
        let e = outcome(l.path)
        #expect(e?.exitCode == 5 && e?.message.contains("its directory \(l.directory) is writable by") == true,
                "mode \(String(mode, radix: 8)): expected exit 5: \(e?.exitCode ?? 0) \(e?.message ?? "answered")")
        #expect(!l.connected, "mode \(String(mode, radix: 8)): it connected before refusing")
        #expect(e.map { !$0.message.contains("\n") } ?? true)
    }

    @Test func tmpItselfIsRefusedWithExit5() {
        let e = outcome("/tmp/ccred-squatted-\(getpid()).sock")
        #expect(e?.exitCode == 5 && e?.message.contains("its directory /tmp is writable by others (mode 1777)") == true, "expected exit 5: \(e?.message ?? "answered")")
    }

    /// The real directory is judged: a link to /tmp inside a directory of ours is still /tmp.
    @Test func aSymbolicLinkToTmpIsJudgedAsTmp() throws {
        let l = try Listener(mode: 0o700)
        #expect(symlink("/tmp", l.directory + "/tmp-link") == 0)
        defer { unlink(l.directory + "/tmp-link") }
        let e = outcome(l.directory + "/tmp-link/ccred-squatted.sock")
        #expect(e?.exitCode == 5 && e?.message.contains("(/tmp) is writable by others") == true, "expected exit 5: \(e?.message ?? "answered")")
    }

    @Test(.enabled(if: geteuid() == 0)) func aDirectoryOfAnotherUserIsRefusedWithExit5() throws {
        let l = try Listener(mode: 0o755, owner: 4321)
        let e = outcome(l.path)
        #expect(e?.exitCode == 5 && e?.message.contains("belongs to uid 4321") == true, "expected exit 5: \(e?.message ?? "answered")")
        #expect(!l.connected)
    }

    /// A directory of our own, 0700 or 0755 (a socket bound into a container): asked.
    @Test(arguments: [mode_t(0o700), 0o755, 0o750, 0o1755])
    func aDirectoryOfOurOwnIsAsked(_ mode: mode_t) throws {
        let l = try Listener(mode: mode)
        let e = outcome(l.path)
        #expect(e?.exitCode == 4 && e?.message.contains("no answer within") == true, "mode \(String(mode, radix: 8)): expected exit 4 (asked, no answer): \(e?.message ?? "answered")")
        #expect(l.connected, "mode \(String(mode, radix: 8)): it did not connect")
    }
}
