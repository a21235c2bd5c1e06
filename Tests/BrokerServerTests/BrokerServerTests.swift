import Foundation
import Testing
@testable import Broker
import Transport
@testable import CredentialCore
@testable import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The broker's server loop over a real UNIX socket in a temporary directory, with a handler
/// that answers from the request alone: framing, keep-alive, deadlines, bounds, the audit
/// record, idle exit, and what binding does with a socket file that is already there.
@Suite(.serialized) struct BrokerServerTests {
    final class Recorder: @unchecked Sendable {
        let lock = NSLock()
        var records: [BrokerAuditRecord] = []
        var requests: [BrokerRequest] = []
        /// Requests the quick handler answered (on the loop thread).
        var quick: [BrokerRequest] = []
        func add(_ r: BrokerAuditRecord) { lock.lock(); records.append(r); lock.unlock() }
        func add(_ r: BrokerRequest) { lock.lock(); requests.append(r); lock.unlock() }
        func addQuick(_ r: BrokerRequest) { lock.lock(); quick.append(r); lock.unlock() }
        var all: [BrokerAuditRecord] { lock.lock(); defer { lock.unlock() }; return records }
        var handled: [BrokerRequest] { lock.lock(); defer { lock.unlock() }; return requests }
        var answeredQuickly: [BrokerRequest] { lock.lock(); defer { lock.unlock() }; return quick }
    }

    /// A running server on `DIR/b.sock`; `stop()` ends it and waits for `run` to return.
    /// Waits (at most 10 s) until `fact` holds; whether it does.
    static func until(_ fact: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !fact() && Date() < deadline { usleep(1000) }
        return fact()
    }

    final class Running: @unchecked Sendable {
        let dir: String
        let path: String
        let server: BrokerServer
        let listener: BrokerListener
        let recorder = Recorder()
        let done = DispatchSemaphore(value: 0)
        var ending: BrokerServer.Ending?
        /// A token request for the profile `slow` waits on this before it is answered.
        let gate = DispatchSemaphore(value: 0)
        /// A usage request for the profile `slow` waits on this before it is answered.
        let usageGate = DispatchSemaphore(value: 0)
        /// The body of the profile `big`'s token: more than a socket's buffer takes at once.
        static let bigBody = "{\"access_token\":\"" + String(repeating: "b", count: 4 << 20) + "\"}"

        /// The quick handler (unless `quick` is false) answers the health check and the token of
        /// the profiles `cached`, `big` and `big-around`; the handler answers everything else.
        init(_ settings: BrokerServer.Settings = .init(), quick: Bool = true) throws {
            var template = Array("/tmp/ccred-broker-XXXXXX".utf8CString)
            dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            path = dir + "/b.sock"
            listener = try BrokerListener.bind(path: path)
            let recorder = self.recorder
            let gate = self.gate
            let usageGate = self.usageGate
            let quickHandler: BrokerServer.QuickHandler = { request, peer in
                switch request.call {
                case .health:
                    recorder.addQuick(request)
                    return .ok(#"{"ok":true}"#)
                case .token(let p, _) where p?.name == "cached":
                    recorder.addQuick(request)
                    return BrokerAnswer(status: 200, body: SecretBytes(copying: #"{"access_token":"cached-\#(peer.pid)"}"#.utf8), outcome: "ok")
                case .token(let p, _) where p?.name == "big":
                    recorder.addQuick(request)
                    return BrokerAnswer(status: 200, body: SecretBytes(copying: Running.bigBody.utf8), outcome: "ok")
                case .token(let p, _) where p?.name == "big-around":
                    // The same body, sent as the text around a token in its own buffer.
                    recorder.addQuick(request)
                    let token = SecretToken(SecretBytes(copying: String(repeating: "b", count: 4 << 20).utf8))
                    return BrokerAnswer(status: 200, around: (Array("{\"access_token\":\"".utf8), token, Array("\"}".utf8)), outcome: "ok")
                default:
                    return nil
                }
            }
            server = BrokerServer(listenFD: listener.fd, settings: settings, handler: { request, peer in
                recorder.add(request)
                switch request.call {
                case .health: return .ok(#"{"ok":true}"#)
                case .token(let p, _):
                    if p?.name == "missing" { return .failure(status: 401, message: "profile 'missing' is not signed in") }
                    if p?.name == "slow" { gate.wait() }
                    return BrokerAnswer(status: 200, body: SecretBytes(copying: #"{"access_token":"tok-\#(peer.pid)"}"#.utf8), outcome: "ok")
                case .usage(let p):
                    if p?.name == "slow" { usageGate.wait() }
                    return .ok(#"{"plan":"plus"}"#)
                }
            }, quick: quick ? quickHandler : nil, audit: { recorder.add($0) })
            let server = self.server
            Thread { [self] in
                ending = try? server.run()
                listener.close()
                done.signal()
            }.start()
        }

        /// A connection whose token request for `slow` the handler holds (waiting on the gate):
        /// returned once the handler has it (at most 10 s).
        func heldSlowRequest() throws -> Client {
            let c = try Client(path)
            c.send("GET /v1/token?profile=slow HTTP/1.1\r\n\r\n")
            _ = BrokerServerTests.until { !recorder.handled.isEmpty }
            return c
        }

        @discardableResult
        func stop(timeout: Double = 10) -> BrokerServer.Ending? {
            server.stop()
            _ = done.wait(timeout: .now() + timeout)
            return ending
        }

        deinit { rmdir(dir) }
    }

    /// A blocking client connection with a 10 s deadline on every call (`receiveDeadline`: a
    /// shorter one for reading, where a test needs its answer sooner).
    final class Client {
        let fd: Int32
        /// Bytes received past the last response (the next one, pipelined).
        var pending: [UInt8] = []
        init(_ path: String, receiveDeadline: Int = 10) throws {
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var tv = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            tv.tv_sec = receiveDeadline
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var addr = BrokerListener.address(path)
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard rc == 0 else { Glibc.close(fd); throw CredentialError.failure("connect: \(errno)") }
        }
        func send(_ text: String) { send(Array(text.utf8)) }
        func send(_ bytes: [UInt8]) {
            var off = 0
            while off < bytes.count {
                let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return }
                off += n
            }
        }
        /// One response: status, headers (lower-cased names) and body, read by Content-Length.
        func response() -> (status: Int, headers: [String: String], body: String)? {
            var data = pending
            pending = []
            var buf = [UInt8](repeating: 0, count: 4096)
            while HTTPHead.end(data) == nil {
                let n = recv(fd, &buf, buf.count, 0)
                if n <= 0 { return nil }
                data += buf[0..<n]
            }
            let end = HTTPHead.end(data)!
            let head = String(decoding: data[..<end], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            let status = Int(lines.removeFirst().split(separator: " ")[1]) ?? 0
            var headers: [String: String] = [:]
            for l in lines { let kv = l.split(separator: ":", maxSplits: 1); headers[kv[0].lowercased()] = kv[1].trimmingCharacters(in: .whitespaces) }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            var body = Array(data[end...])
            while body.count < length {
                let n = recv(fd, &buf, buf.count, 0)
                if n <= 0 { break }
                body += buf[0..<n]
            }
            if body.count > length { pending = Array(body[length...]); body = Array(body[..<length]) }
            return (status, headers, String(decoding: body, as: UTF8.self))
        }
        /// True when the server closed the connection (EOF) within the receive timeout.
        func closedByServer() -> Bool {
            var b: UInt8 = 0
            return recv(fd, &b, 1, 0) == 0
        }
        func close() { Glibc.close(fd) }
    }

    @Test func answersAndAuditsEveryRequest() throws {
        let s = try Running()
        let c = try Client(s.path)
        c.send("GET /v1/token?profile=work HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        let r = try #require(c.response())
        #expect(r.status == 200)
        #expect(r.body == #"{"access_token":"tok-\#(getpid())"}"#)
        #expect(r.headers["content-type"] == "application/json")
        #expect(r.headers["cache-control"] == "no-store")
        #expect(r.headers["connection"] == "close")
        #expect(c.closedByServer())
        c.close()
        #expect(s.stop() == .stopped)
        let record = try #require(s.recorder.all.first)
        #expect(record.peer.pid == getpid() && record.peer.uid == geteuid())
        #expect(record.peer.executable == (try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
        #expect(record.path == "/v1/token" && record.profile == "work" && record.status == 200 && record.outcome == "ok")
        #expect(record.line.contains("pid=\(getpid()) uid=\(geteuid()) exe=/"))
        #expect(record.line.contains(" path=/v1/token profile=work status=200 ok"))
        #expect(!record.line.contains("tok-"))
    }

    /// The audit line, byte for byte (man page BROKER): a control byte of the path is written
    /// %-escaped, a missing path or profile as `-`.
    @Test func anAuditLineIsExactlyTheDocumentedLine() {
        let peer = BrokerPeer(pid: 4242, uid: 1000, gid: 1000, executable: "/usr/bin/curl")
        var record = BrokerAuditRecord(time: 1_795_000_000, peer: peer, path: "/v1/token", profile: "work", status: 200, outcome: "ok")
        #expect(record.line == "chatgpt-credential: broker: 2026-11-18T11:06:40Z pid=4242 uid=1000 exe=/usr/bin/curl path=/v1/token profile=work status=200 ok")
        record.path = nil; record.profile = nil; record.status = 403; record.outcome = "refused"
        #expect(record.line == "chatgpt-credential: broker: 2026-11-18T11:06:40Z pid=4242 uid=1000 exe=/usr/bin/curl path=- profile=- status=403 refused")
        record.path = "/v1/\u{1B}[2J"
        #expect(record.line.contains(" path=/v1/%1B[2J profile=- "), "\(record.line)")
    }

    @Test func keepAliveCarriesSeveralRequestsAndPipelining() throws {
        let s = try Running()
        let c = try Client(s.path)
        c.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(c.response()?.body == "{\"ok\":true}\n")
        // Two requests in one write: both answered, in order.
        c.send("GET /v1/usage HTTP/1.1\r\n\r\nGET /v1/token?profile=missing HTTP/1.1\r\n\r\n")
        let usage = c.response(), missing = c.response()
        #expect(usage?.status == 200 && usage?.body == "{\"plan\":\"plus\"}\n")
        #expect(missing?.status == 401)
        #expect(missing?.body == #"{"error":"login_required","message":"profile 'missing' is not signed in"}"# + "\n")
        #expect(missing?.headers["connection"] == "keep-alive")
        c.close()
        s.stop()
        #expect(s.recorder.all.map(\.status) == [200, 200, 401])
        #expect(s.recorder.all.map(\.outcome) == ["ok", "ok", "login_required"])
    }

    @Test func pipelinedRequestsAreAnsweredInOrderOnTheLoopAndByWorkers() throws {
        let s = try Running()
        let c = try Client(s.path)
        // health (loop), work (worker), cached (loop), usage (worker), health (loop): one write.
        c.send(["/v1/health", "/v1/token?profile=work", "/v1/token?profile=cached", "/v1/usage", "/v1/health"]
            .map { "GET \($0) HTTP/1.1\r\n\r\n" }.joined())
        let bodies = (0..<5).map { _ in c.response()?.body }
        #expect(bodies == ["{\"ok\":true}\n", #"{"access_token":"tok-\#(getpid())"}"#, #"{"access_token":"cached-\#(getpid())"}"#,
                           "{\"plan\":\"plus\"}\n", "{\"ok\":true}\n"])
        c.close()
        s.stop()
        #expect(s.recorder.answeredQuickly.map(\.path) == ["/v1/health", "/v1/token", "/v1/health"])
        #expect(s.recorder.handled.map(\.path) == ["/v1/token", "/v1/usage"])
        #expect(s.recorder.all.map(\.profile) == [nil, "work", "cached", nil, nil])
    }

    @Test func aQuickAnswerIsMadeWhileEveryWorkerIsBusy() throws {
        var settings = BrokerServer.Settings()
        settings.workers = 1
        let s = try Running(settings)
        // The one worker holds the profile `slow`'s request.
        let slow = try s.heldSlowRequest()
        #expect(s.recorder.handled.map(\.profile?.name) == ["slow"])
        // A cached token and the health check are answered meanwhile, well within 2 s.
        let other = try Client(s.path, receiveDeadline: 2)
        other.send("GET /v1/token?profile=cached HTTP/1.1\r\n\r\n")
        let cached = other.response()
        #expect(cached?.status == 200 && cached?.body == #"{"access_token":"cached-\#(getpid())"}"#, "not answered within 2 s")
        other.send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(other.response()?.status == 200, "not answered within 2 s")
        #expect(other.closedByServer())
        other.close()
        s.gate.signal()
        #expect(slow.response()?.body == #"{"access_token":"tok-\#(getpid())"}"#)
        slow.close()
        s.stop()
        #expect(s.recorder.all.map(\.profile) == ["cached", nil, "slow"])
    }

    @Test(arguments: ["big", "big-around"])
    func anAnswerTheSocketDoesNotTakeAtOnceIsFinishedByAWorker(profile: String) throws {
        let s = try Running()
        let c = try Client(s.path)
        // 4 MiB: the loop writes what the socket takes, a worker the rest; the connection stays.
        // `big-around`'s body is three pieces (text, token, text), so the rest starts inside one.
        c.send("GET /v1/token?profile=\(profile) HTTP/1.1\r\n\r\n")
        let big = c.response()
        #expect(big?.status == 200 && big?.body.utf8.count == Running.bigBody.utf8.count)
        #expect(big?.body == Running.bigBody)
        #expect(big?.headers["connection"] == "keep-alive")
        c.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(c.response()?.body == "{\"ok\":true}\n")
        c.close()
        s.stop()
        #expect(s.recorder.all.map(\.status) == [200, 200])
        #expect(s.recorder.all.map(\.profile) == [profile, nil])
        #expect(s.recorder.handled.isEmpty)
    }

    @Test func theLastRequestAConnectionMayCarrySaysClose() throws {
        var settings = BrokerServer.Settings()
        settings.maxRequestsPerConnection = 3
        let s = try Running(settings)
        let c = try Client(s.path)
        for expected in ["keep-alive", "keep-alive", "close"] {
            c.send("GET /v1/health HTTP/1.1\r\n\r\n")
            #expect(c.response()?.headers["connection"] == expected)
        }
        #expect(c.closedByServer())
        c.close()
        s.stop()
    }

    @Test func refusalsCloseTheConnectionAfterAnswering() throws {
        let s = try Running()
        for (request, status) in [("POST /v1/token HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
                                  ("GET /v2/token HTTP/1.1\r\n\r\n", 404),
                                  ("GET /v1/token HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"a\":\"body\"}", 400),
                                  ("GET /v1/token?profile=%1B HTTP/1.1\r\n\r\n", 400)] {
            let c = try Client(s.path)
            c.send(request)
            let r = c.response()
            #expect(r?.status == status, "\(request.debugDescription)")
            #expect(r?.headers["connection"] == "close")
            #expect(c.closedByServer())
            c.close()
        }
        s.stop()
        // The handler never saw any of them.
        #expect(s.recorder.requests.isEmpty)
        #expect(s.recorder.all.map(\.status) == [405, 404, 400, 400])
    }

    @Test func anOversizedHeadIsRefusedWithoutReadingOn() throws {
        let s = try Running()
        let c = try Client(s.path)
        c.send("GET /v1/health HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 4000))
        let r = c.response()
        #expect(r?.status == 400)
        #expect(r?.body.contains("larger than 8 KiB") == true)
        c.close()
        s.stop()
        #expect(s.recorder.requests.isEmpty)
    }

    @Test func aSlowClientGetsAnAnswerAtTheDeadline() throws {
        var settings = BrokerServer.Settings()
        settings.requestDeadline = 0.3
        let s = try Running(settings)
        let c = try Client(s.path)
        c.send("GET /v1/health HTTP/1.1\r\n")
        let started = Date()
        let r = c.response()
        #expect(r?.status == 400)
        #expect(Date().timeIntervalSince(started) < 3)
        c.close()
        // An idle kept-alive connection is simply closed at the deadline.
        let idle = try Client(s.path)
        #expect(idle.closedByServer())
        idle.close()
        s.stop()
        #expect(s.recorder.all.count == 1)
    }

    @Test func idleExitReturnsAfterTheQuietPeriodOnly() throws {
        var settings = BrokerServer.Settings()
        settings.idleExit = 0.5
        let started = Date()
        let s = try Running(settings)
        // Activity pushes the exit back.
        for _ in 0..<3 {
            usleep(300_000)
            let c = try Client(s.path)
            c.send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n")
            #expect(c.response()?.status == 200)
            c.close()
        }
        #expect(s.done.wait(timeout: .now() + 10) == .success)
        #expect(s.ending == .idle)
        #expect(Date().timeIntervalSince(started) >= 1.2)
        // The socket file it created is gone.
        #expect(access(s.path, F_OK) != 0)
    }

    @Test func fiftyClientsAtOnceAreServedConcurrently() throws {
        let s = try Running()
        let group = DispatchGroup()
        final class Count: @unchecked Sendable { let lock = NSLock(); var ok = 0 }
        let count = Count()
        for _ in 0..<50 {
            group.enter()
            Thread {
                if let c = try? Client(s.path) {
                    for _ in 0..<20 {
                        c.send("GET /v1/token HTTP/1.1\r\n\r\n")
                        if c.response()?.status == 200 { count.lock.lock(); count.ok += 1; count.lock.unlock() }
                    }
                    c.close()
                }
                group.leave()
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        s.stop()
        #expect(count.ok == 1000)
        #expect(s.recorder.all.count == 1000)
    }

    @Test func aUIDAtItsCapLosesItsLongestIdleConnectionNotTheNewOne() throws {
        var settings = BrokerServer.Settings()
        settings.maxConnectionsPerUID = 2
        let s = try Running(settings)
        // Two kept-alive connections of this uid, a answered before b: a is the longest idle.
        let a = try Client(s.path), b = try Client(s.path)
        a.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(a.response()?.status == 200)
        b.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(b.response()?.status == 200)
        // A third: answered at once; a is closed to make room, b is kept.
        let c = try Client(s.path)
        c.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(c.response()?.status == 200)
        #expect(a.closedByServer())
        b.send("GET /v1/health HTTP/1.1\r\n\r\n")
        #expect(b.response()?.status == 200)
        a.close(); b.close(); c.close()
        #expect(s.stop() == .stopped)
        #expect(s.recorder.all.count == 4)
        // Workers are kept and reused: many connections one after another. (With the default cap:
        // at a cap of 2, a connection the server is still closing after its answer counts as busy,
        // and the next one could meet a 503 — the flake seen once.)
        let many = try Running(BrokerServer.Settings())
        for _ in 0..<200 {
            let d = try Client(many.path)
            d.send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n")
            #expect(d.response()?.status == 200)
            d.close()
        }
        #expect(many.stop() == .stopped)
        #expect(many.recorder.all.count == 200)
    }

    @Test func aClientThatNeverReadsHoldsNoWorker() throws {
        var settings = BrokerServer.Settings()
        settings.workers = 1
        let s = try Running(settings)
        // Pipelined requests whose answers are never read: the socket fills with answers.
        let greedy = try Client(s.path)
        _ = fcntl(greedy.fd, F_SETFL, fcntl(greedy.fd, F_GETFL) | O_NONBLOCK)
        let request = Array(String(repeating: "GET /v1/health HTTP/1.1\r\n\r\n", count: 100).utf8)
        var sent = 0
        for _ in 0..<200 {
            let n = request.withUnsafeBytes { Glibc.send(greedy.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        #expect(sent > 100_000)
        // The fact to wait for: the broker has stopped answering it (its socket is full of
        // unread answers), seen as an audit count that no longer grows (at most 10 s).
        var last = -1, still = 0
        let deadline = Date().addingTimeInterval(10)
        while still < 3 && Date() < deadline {
            let now = s.recorder.all.count
            still = now == last ? still + 1 : 0
            last = now
            var none = pollfd(fd: -1, events: 0, revents: 0)
            _ = poll(&none, 1, 100)
        }
        #expect(still == 3 && last > 0 && last < 20_000, "the broker kept answering (\(last))")
        // Another client is answered well before the 5 s write deadline the one worker would
        // otherwise spend on the client that does not read.
        let other = try Client(s.path, receiveDeadline: 2)
        other.send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(other.response()?.status == 200, "not answered within 2 s")
        other.close(); greedy.close()
        s.stop()
    }

    @Test func aUIDAtItsCapWithEveryConnectionBeingAnsweredGets502() throws {
        var settings = BrokerServer.Settings()
        settings.maxConnectionsPerUID = 1
        let s = try Running(settings)
        // The one connection allowed is being answered.
        let a = try s.heldSlowRequest()
        // None idle or dripping to close: the new one is answered 502 (retry) and closed.
        let b = try Client(s.path)
        let r = b.response()
        #expect(r?.status == 502)
        #expect(r?.body.contains(#""error":"temporary""#) == true, "\(r?.body ?? "")")
        #expect(r?.body.contains("has 1 connections open, all being answered") == true, "\(r?.body ?? "")")
        #expect(b.closedByServer())
        s.gate.signal()
        #expect(a.response()?.status == 200)
        a.close(); b.close()
        s.stop()
        #expect(s.recorder.all.map(\.status).sorted() == [200, 502])
    }

    // MARK: binding

    func tempDir() -> String {
        var template = Array("/tmp/ccred-broker-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    @Test func theSocketIsCreated0600AndAStaleOneIsReplaced() throws {
        let dir = tempDir()
        defer { rmdir(dir) }
        let path = dir + "/b.sock"
        let first = try BrokerListener.bind(path: path)
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK && st.st_mode & 0o777 == 0o600)
        // A live broker is never replaced.
        #expect(throws: CredentialError.failure("a broker is already listening on \(path)")) { try BrokerListener.bind(path: path) }
        // Left behind by a broker that died: nothing accepts, so it is replaced.
        Glibc.close(first.fd)
        #expect(lstat(path, &st) == 0)
        let second = try BrokerListener.bind(path: path)
        second.close()
        #expect(lstat(path, &st) != 0)
    }

    @Test func closeRemovesOnlyItsOwnSocketFile() throws {
        let dir = tempDir()
        defer { rmdir(dir) }
        let path = dir + "/b.sock"
        let first = try BrokerListener.bind(path: path)
        // Removed by hand, and a newer broker bound at the same path: the older one's close
        // leaves the newer one's socket (another inode).
        #expect(unlink(path) == 0)
        let second = try BrokerListener.bind(path: path)
        first.close()
        var st = stat()
        #expect(lstat(path, &st) == 0, "the older broker removed the newer one's socket")
        #expect(BrokerListener.isLive(path))
        second.close()
        #expect(lstat(path, &st) != 0)
        // A relative path is refused (exit 2).
        #expect(throws: CredentialError.usage("--socket needs an absolute path: b.sock")) { try BrokerListener.bind(path: "b.sock") }
    }

    @Test func theACLValueIsVersion2SortedByTagThenID() {
        let v = BrokerSocketAccess.aclValue(uids: [4343, 4242, 4343])
        func entry(_ tag: UInt16, _ perm: UInt16, _ id: UInt32) -> [UInt8] {
            [UInt8(tag & 0xFF), UInt8(tag >> 8), UInt8(perm), 0] + (0..<4).map { UInt8((id >> (8 * UInt32($0))) & 0xFF) }
        }
        #expect(v == [2, 0, 0, 0] + entry(1, 6, .max) + entry(2, 6, 4242) + entry(2, 6, 4343)
                + entry(4, 0, .max) + entry(0x10, 6, .max) + entry(0x20, 0, .max))
        #expect(BrokerSocketAccess.overflowUIDs().contains(65534))
    }

    @Test func symlinksOtherFilesAndLooseDirectoriesAreRefused() throws {
        let dir = tempDir()
        defer { _ = Harness.rm(dir) }
        symlink("/tmp/elsewhere.sock", dir + "/link.sock")
        #expect(throws: CredentialError.failure("\(dir)/link.sock exists and is not a socket of this user; not replacing it")) {
            try BrokerListener.bind(path: dir + "/link.sock")
        }
        #expect(FileManager.default.createFile(atPath: dir + "/file.sock", contents: Data()))
        #expect(throws: CredentialError.failure("\(dir)/file.sock exists and is not a socket of this user; not replacing it")) {
            try BrokerListener.bind(path: dir + "/file.sock")
        }
        #expect(FileManager.default.fileExists(atPath: dir + "/file.sock"))
        mkdir(dir + "/loose", 0o777)
        chmod(dir + "/loose", 0o777)
        #expect(throws: CredentialError.storeFailure("\(dir)/loose is writable by group or others; run: chmod go-w \(dir)/loose")) {
            try BrokerListener.bind(path: dir + "/loose/b.sock")
        }
        // A shared sticky directory (/tmp): a private directory is advised, never a chmod of it.
        mkdir(dir + "/shared-tmp", 0o777)
        chmod(dir + "/shared-tmp", 0o1777)
        #expect(throws: CredentialError.storeFailure("\(dir)/shared-tmp is a shared directory (writable by others); put the socket in a private one: --socket in $XDG_RUNTIME_DIR or in a 0700 directory of your own")) {
            try BrokerListener.bind(path: dir + "/shared-tmp/b.sock")
        }
        // A 0755 directory of the user is fine for an explicit socket.
        mkdir(dir + "/shared", 0o755)
        try BrokerListener.bind(path: dir + "/shared/b.sock").close()
        let long = dir + "/" + String(repeating: "x", count: 120)
        #expect(throws: CredentialError.usage("socket path too long (at most 107 bytes): \(Sanitize.line(long, limit: 120))")) {
            try BrokerListener.bind(path: long)
        }
    }

    @Test func socketActivationTakesFD3OnlyWhenItIsForThisProcess() throws {
        #expect(try BrokerListener.activated(listenPID: nil, listenFDs: nil) == nil)
        #expect(try BrokerListener.activated(listenPID: 1, listenFDs: 1) == nil)
        #expect(try BrokerListener.activated(listenPID: getpid(), listenFDs: nil) == nil)
        #expect(throws: CredentialError.usage("systemd passed 2 sockets (LISTEN_FDS); the broker takes exactly one")) {
            try BrokerListener.activated(listenPID: getpid(), listenFDs: 2)
        }
    }

    @Test func executableNamesArePrintable() {
        #expect(BrokerPeer.printable(Array("/usr/bin/curl".utf8), limit: 256) == "/usr/bin/curl")
        #expect(BrokerPeer.printable(Array("/tmp/a b\u{1B}[31m%\"é".utf8), limit: 256) == "/tmp/a%20b%1B[31m%25%22%C3%A9")
        #expect(BrokerPeer.printable([UInt8](repeating: 0x61, count: 1000), limit: 256).utf8.count < 300)
        // The limit exactly: whole; one byte more: cut, with an ellipsis; an escape never split.
        #expect(BrokerPeer.printable([UInt8](repeating: 0x61, count: 256), limit: 256) == String(repeating: "a", count: 256))
        #expect(BrokerPeer.printable([UInt8](repeating: 0x61, count: 257), limit: 256) == String(repeating: "a", count: 256) + "…")
        #expect(BrokerPeer.printable(Array("ab\u{7F}".utf8), limit: 4) == "ab…")
        #expect(BrokerPeer.printable([0x00, 0xFF], limit: 6) == "%00%FF")
    }
}

enum Harness {
    static func rm(_ path: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/rm")
        p.arguments = ["-rf", path]
        try? p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}
