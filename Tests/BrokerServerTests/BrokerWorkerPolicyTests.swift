import Foundation
import Testing
@testable import Broker
import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// Who gets a worker (man page BROKER, "No client holds up another"): usage requests may hold at
/// most `usageWorkers` of them, a token request takes any idle one ahead of queued usage
/// requests, and a request that waited `queueDeadline` seconds for one is answered 502.
extension BrokerServerTests {
    func until(_ fact: () -> Bool) -> Bool { BrokerServerTests.until(fact) }

    /// A server with one worker, held by a token request for `slow` (the handler waits on the
    /// gate), and a complete request's `queueDeadline`.
    func oneWorkerHeld(queueDeadline: Double) throws -> (Running, Client) {
        var settings = BrokerServer.Settings()
        settings.workers = 1
        settings.queueDeadline = queueDeadline
        let s = try Running(settings)
        return (s, try s.heldSlowRequest())
    }

    @Test func slowUsageRequestsLeaveWorkersForTokenRequests() throws {
        var settings = BrokerServer.Settings()
        settings.workers = 4
        settings.usageWorkers = 2
        settings.queueDeadline = 60
        let s = try Running(settings)
        // Four usage requests the handler holds: only two may be answered at once.
        var usage: [Client] = []
        for _ in 0..<4 {
            let c = try Client(s.path)
            c.send("GET /v1/usage?profile=slow HTTP/1.1\r\nConnection: close\r\n\r\n")
            usage.append(c)
        }
        #expect(until { s.recorder.handled.count >= 2 && s.server.queuedRequests + s.recorder.handled.count >= 4 })
        // A token request the loop cannot answer: a worker takes it at once.
        let token = try Client(s.path, receiveDeadline: 3)
        let start = Date()
        token.send("GET /v1/token?profile=work HTTP/1.1\r\nConnection: close\r\n\r\n")
        let r = token.response()
        #expect(r?.status == 200, "not answered within 3 s")
        #expect(Date().timeIntervalSince(start) < 3)
        #expect(s.recorder.handled.filter { $0.path == "/v1/usage" }.count == 2)
        for _ in 0..<4 { s.usageGate.signal() }
        for c in usage { #expect(c.response()?.status == 200); c.close() }
        token.close()
        s.stop()
        #expect(s.recorder.all.map(\.status) == Array(repeating: 200, count: 5))
    }

    @Test func aTokenRequestGoesAheadOfQueuedUsageRequests() throws {
        let (s, slow) = try oneWorkerHeld(queueDeadline: 60)
        // Queued behind it: a usage request, then a token request.
        let usage = try Client(s.path)
        usage.send("GET /v1/usage?profile=u HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(until { s.server.queuedRequests == 1 })
        let token = try Client(s.path)
        token.send("GET /v1/token?profile=t HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(until { s.server.queuedRequests == 2 })
        s.gate.signal()
        #expect(slow.response()?.status == 200)
        #expect(token.response()?.status == 200)
        #expect(usage.response()?.status == 200)
        slow.close(); usage.close(); token.close()
        s.stop()
        #expect(s.recorder.handled.map(\.profile?.name) == ["slow", "t", "u"])
    }

    @Test func aRequestThatWaitedTooLongForAWorkerIsAnswered502() throws {
        let (s, slow) = try oneWorkerHeld(queueDeadline: 1)
        let waiting = try Client(s.path, receiveDeadline: 4)
        let start = Date()
        waiting.send("GET /v1/token?profile=other HTTP/1.1\r\n\r\n")
        let r = waiting.response()
        let elapsed = Date().timeIntervalSince(start)
        #expect(r?.status == 502, "not answered within 4 s")
        #expect(r?.body.contains(#""error":"temporary""#) == true && r?.body.contains("the broker is busy") == true, "\(r?.body ?? "")")
        #expect(elapsed < 3, "\(elapsed) s")
        #expect(waiting.closedByServer())
        waiting.close()
        s.gate.signal()
        #expect(slow.response()?.status == 200)
        slow.close()
        s.stop()
        #expect(s.recorder.handled.map(\.profile?.name) == ["slow"])
        let busy = s.recorder.all.filter { $0.status == 502 }
        #expect(busy.count == 1 && busy.first?.path == "/v1/token" && busy.first?.profile == "other")
    }
}
