import Foundation
import Testing
@testable import CLI
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import Transport
@testable import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// The browser flow's loopback server on its own (any free port, so these run alongside the
/// 1455/1457 login tests).
@Suite struct LoopbackListenerTests {
    final class Running: @unchecked Sendable {
        let listener: LoopbackListener
        let done = DispatchSemaphore(value: 0)
        var end: LoopbackListener.ServeEnd?
        var seen: [String] = []
        let lock = NSLock()

        init(readDeadlineMillis: Int64 = 10_000) throws {
            listener = try LoopbackListener.bind(port: 0)
            listener.readDeadlineMillis = readDeadlineMillis
            let t = Thread { [self] in
                let e = listener.serve(until: Clock.monotonicMillis() + 30_000, interrupt: nil) { request in
                    self.lock.lock(); self.seen.append(request.path + "?" + request.query.unsafeString()); self.lock.unlock()
                    if request.path == "/stop" { return (.init(status: 200, html: "bye"), .stop) }
                    return (.init(status: 200, html: LoopbackListener.page("ok", "q=" + (request.queryValue("q") ?? ""))), .keepServing)
                }
                self.end = e
                self.done.signal()
            }
            t.start()
        }

        var port: Int { listener.port }

        func stop() {
            _ = rawGET(port: port, path: "/stop", host: "localhost:\(port)")
            _ = done.wait(timeout: .now() + 5)
        }
    }

    @Test func bindsLoopbackOnlyAndAnswersGoodHosts() throws {
        let r = try Running()
        defer { r.stop() }
        #expect(r.listener.boundAddress == "127.0.0.1:\(r.port)")
        let ok = rawGET(port: r.port, path: "/x?q=1", host: "localhost:\(r.port)")
        #expect(statusOf(ok) == 200)
        #expect(ok?.contains("Connection: close\r\n") == true)
        #expect(statusOf(rawGET(port: r.port, path: "/x", host: "127.0.0.1:\(r.port)")) == 200)
        // Bound to 127.0.0.1 itself: another loopback address (which 0.0.0.0 would accept) is refused.
        #expect(rawGET(port: r.port, path: "/x", host: "127.0.0.2:\(r.port)", address: "127.0.0.2") == nil)
    }

    @Test(arguments: ["evil.com", "evil.com:%d", "localhost", "localhost:1", "127.0.0.1.evil.com:%d", ""])
    func foreignHostIsRefused(_ template: String) throws {
        let r = try Running()
        defer { r.stop() }
        let host = template.replacingOccurrences(of: "%d", with: String(r.port))
        let answer = rawGET(port: r.port, path: "/auth/callback?q=1", host: host)
        #expect(statusOf(answer) == 400)
        r.lock.lock(); let seen = r.seen; r.lock.unlock()
        #expect(seen.isEmpty, "the handler must not see a request for another host")
    }

    @Test func missingHostIsRefused() throws {
        let r = try Running()
        defer { r.stop() }
        let answer = rawHTTP(port: r.port, Array("GET / HTTP/1.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(statusOf(answer) == 400)
    }

    @Test func overLongRequestIsRefused() throws {
        let r = try Running()
        defer { r.stop() }
        let big = "GET /x HTTP/1.1\r\nHost: localhost:\(r.port)\r\nX-Pad: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
        let answer = rawHTTP(port: r.port, Array(big.utf8))
        #expect(statusOf(answer) == 431)
        // A long target alone, too.
        let longTarget = "GET /x?" + String(repeating: "b", count: 17_000) + " HTTP/1.1\r\nHost: localhost:\(r.port)\r\n\r\n"
        #expect(statusOf(rawHTTP(port: r.port, Array(longTarget.utf8))) == 431)
        // Still serving afterwards.
        #expect(statusOf(rawGET(port: r.port, path: "/x", host: "localhost:\(r.port)")) == 200)
    }

    @Test func garbageAndOtherMethods() throws {
        let r = try Running()
        defer { r.stop() }
        #expect(statusOf(rawHTTP(port: r.port, Array("HELLO\r\n\r\n".utf8))) == 400)
        #expect(statusOf(rawHTTP(port: r.port, Array("POST /x HTTP/1.1\r\nHost: localhost:\(r.port)\r\nContent-Length: 0\r\n\r\n".utf8))) == 405)
    }

    @Test func slowClientDoesNotBlockOthers() throws {
        let r = try Running(readDeadlineMillis: 5_000)
        defer { r.stop() }
        // An idle connection that never sends its request (a pre-connect, or a slowloris).
        let idle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(idle) }
        #expect(Loopback.connect(idle, port: r.port) == 0)
        _ = "GET /partial HTTP/1.1\r\n".withCString { send(idle, $0, 23, Int32(MSG_NOSIGNAL)) }
        let start = Date()
        #expect(statusOf(rawGET(port: r.port, path: "/x", host: "localhost:\(r.port)")) == 200)
        #expect(Date().timeIntervalSince(start) < 2)
        // The idle connection is dropped at its deadline, without an answer.
        var tv = timeval(tv_sec: 8, tv_usec: 0)
        setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var b = [UInt8](repeating: 0, count: 16)
        let t0 = Date()
        #expect(recv(idle, &b, b.count, 0) == 0)
        #expect(Date().timeIntervalSince(t0) < 7)
    }

    @Test func pagesEscapeWhatTheyShow() {
        let page = LoopbackListener.page("<script>", "a&b \"c\" 'd' <img src=x>\u{1B}[2J")
        #expect(!page.contains("<script>"))
        #expect(page.contains("&lt;script&gt;"))
        #expect(page.contains("a&amp;b &quot;c&quot; &#39;d&#39; &lt;img src=x&gt;"))
        #expect(!page.contains("\u{1B}"))
    }
}
