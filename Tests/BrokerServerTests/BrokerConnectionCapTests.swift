import Foundation
import Testing
@testable import Broker
import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// A uid at its connection cap (man page BROKER, "No client holds up another"): connections
/// dripping a head never lock out a new one; only when all are being answered is it refused,
/// 502 (temporary: retry), never a store problem.
extension BrokerServerTests {
    @Test func aUIDAtItsCapLosesItsLongestDrippingConnectionNotTheNewOne() throws {
        var settings = BrokerServer.Settings()
        settings.maxConnectionsPerUID = 2
        let s = try Running(settings)
        // Two connections each sending a head a byte at a time: a began its head before b. What
        // each sent is read once its complete first request is answered.
        let a = try Client(s.path), b = try Client(s.path)
        for c in [a, b] {
            c.send("GET /v1/health HTTP/1.1\r\n\r\nGET /v1/hea")
            #expect(c.response()?.status == 200)
        }
        // A third, well-behaved: answered; a, the longest dripping, is closed to make room.
        let c = try Client(s.path)
        c.send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n")
        let r = c.response()
        #expect(r?.status == 200, "\(r?.body ?? "no answer")")
        #expect(a.closedByServer())
        b.send("lth HTTP/1.1\r\n\r\n")
        #expect(b.response()?.status == 200)
        a.close(); b.close(); c.close()
        s.stop()
        #expect(s.recorder.all.map(\.status) == [200, 200, 200, 200])
    }
}
