import Testing
@testable import Broker
import Transport
@testable import CredentialCore

/// The broker's request parser (man page BROKER, "Protocol"): what it accepts, and the status
/// each refusal gets.
@Suite struct BrokerRequestTests {
    func parse(_ text: String) -> Result<BrokerRequest, BrokerRequestError> {
        BrokerRequest.parse(Array(text.utf8))
    }

    func request(_ text: String) throws -> BrokerRequest {
        switch parse(text) {
        case .success(let r): return r
        case .failure(let e): throw e
        }
    }

    func status(_ text: String) -> Int? {
        if case .failure(let e) = parse(text) { return e.status }
        return nil
    }

    @Test func tokenWithProfileAndMinTTL() throws {
        let r = try request("GET /v1/token?profile=work&min_ttl=900 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n")
        #expect(r.call == .token(profile: try Profile("work"), minTTL: 900))
        #expect(r.path == "/v1/token")
        #expect(r.keepAlive)
    }

    @Test func everyParameterIsOptional() throws {
        #expect(try request("GET /v1/token HTTP/1.1\r\n\r\n").call == .token(profile: nil, minTTL: nil))
        #expect(try request("GET /v1/token? HTTP/1.1\r\n\r\n").call == .token(profile: nil, minTTL: nil))
        #expect(try request("GET /v1/usage?profile=a.b_c-1 HTTP/1.1\r\n\r\n").call == .usage(profile: try Profile("a.b_c-1")))
        #expect(try request("GET /v1/health HTTP/1.0\n\n").call == .health)
    }

    @Test func percentEscapesAreDecoded() throws {
        #expect(try request("GET /v1/token?profile=w%6Frk&min%5Fttl=%33 HTTP/1.1\r\n\r\n").call == .token(profile: try Profile("work"), minTTL: 3))
    }

    @Test func everyTokenCharacterMayNameAHeaderAndOtherHeadersAreNotRead() throws {
        // RFC 9110 tchar, all of them; a name one byte away from a framing header's is not one.
        let head = "GET /v1/token HTTP/1.1\r\nX-!#$%&'*+-.^_`|~09azAZ: anything\r\nContent-Lengths: 5\r\nConnection-: close\r\n\r\n"
        #expect(try request(head).keepAlive)
        #expect(try request("GET /v1/health HTTP/1.1\r\nCONNECTION: CLOSE\r\n\r\n").keepAlive == false)
    }

    @Test func theTargetSplitsAtItsFirstQuestionMark() throws {
        #expect(try request("GET /v1/health? HTTP/1.1\r\n\r\n").call == .health)
        #expect(try request("GET /v1/token? HTTP/1.1\r\n\r\n").call == .token(profile: nil, minTTL: nil))
        // A second '?' belongs to the query: here to a profile name, which cannot have one.
        #expect(status("GET /v1/token?profile=a?b HTTP/1.1\r\n\r\n") == 400)
        #expect(status("GET /v1/token/?profile=a HTTP/1.1\r\n\r\n") == 404)
    }

    @Test func connectionHandling() throws {
        #expect(try request("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n").keepAlive == false)
        #expect(try request("GET /v1/health HTTP/1.1\r\nconnection: Keep-Alive, Upgrade\r\n\r\n").keepAlive)
        #expect(try request("GET /v1/health HTTP/1.0\r\n\r\n").keepAlive == false)
        #expect(try request("GET /v1/health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepAlive)
    }

    @Test func unknownPathsAre404AndOtherMethods405() {
        #expect(status("GET / HTTP/1.1\r\n\r\n") == 404)
        #expect(status("GET /v1/token/ HTTP/1.1\r\n\r\n") == 404)
        #expect(status("GET /v1/refresh_token HTTP/1.1\r\n\r\n") == 404)
        #expect(status("POST /v1/token HTTP/1.1\r\n\r\n") == 405)
        #expect(status("HEAD /v1/health HTTP/1.1\r\n\r\n") == 405)
        #expect(status("DELETE /nope HTTP/1.1\r\n\r\n") == 404)
    }

    @Test(arguments: [
        // a body, in any form
        "GET /v1/token HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nContent-Length: -0\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        // a framing header's name in any case
        "GET /v1/token HTTP/1.1\r\nTRANSFER-ENCODING: chunked\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\ncOnTeNt-LeNgTh: 1\r\n\r\n",
        // control bytes, spaces and non-ASCII in the target
        "GET /v1/token?profile=a\u{01} HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=a\u{7F} HTTP/1.1\r\n\r\n",
        "GET /v1/tok\ren HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=é HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=%0A HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=%00 HTTP/1.1\r\n\r\n",
        "GET /v1/token#x HTTP/1.1\r\n\r\n",
        "GET  /v1/token HTTP/1.1\r\n\r\n",
        "GET http://localhost/v1/token HTTP/1.1\r\n\r\n",
        // the request line and headers
        "get /v1/token HTTP/1.1\r\n\r\n",
        "GET /v1/token HTTP/2\r\n\r\n",
        "GET /v1/token\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nNo colon here\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nBad@Name: x\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nBad\u{E9}: x\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nX: a\u{1B}[31m\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        "GET /v1/token HTTP/1.1\r\n",
        // the query
        "GET /v1/token?profile=-x HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=.x HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile= HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=a/b HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=a&profile=b HTTP/1.1\r\n\r\n",
        "GET /v1/token?min-ttl=5 HTTP/1.1\r\n\r\n",
        "GET /v1/token?min_ttl=-5 HTTP/1.1\r\n\r\n",
        "GET /v1/token?min_ttl=1e3 HTTP/1.1\r\n\r\n",
        "GET /v1/token?min_ttl=31622401 HTTP/1.1\r\n\r\n",
        "GET /v1/token?min_ttl= HTTP/1.1\r\n\r\n",
        "GET /v1/token?profile=%4 HTTP/1.1\r\n\r\n",
        "GET /v1/usage?min_ttl=5 HTTP/1.1\r\n\r\n",
        "GET /v1/health?x=1 HTTP/1.1\r\n\r\n",
    ])
    func refusedWith400(_ text: String) {
        #expect(status(text) == 400, "\(text.debugDescription)")
    }

    @Test func theHeadIsBoundedTo8KiB() {
        let filler = "X-Filler: " + String(repeating: "a", count: 8192) + "\r\n"
        #expect(status("GET /v1/health HTTP/1.1\r\n" + filler + "\r\n") == 400)
        let exact = "GET /v1/health HTTP/1.1\r\n\r\n"
        let pad = "X: " + String(repeating: "a", count: BrokerProtocol.maxHeadBytes - exact.utf8.count - 5) + "\r\n"
        let fits = "GET /v1/health HTTP/1.1\r\n" + pad + "\r\n"
        #expect(fits.utf8.count == BrokerProtocol.maxHeadBytes)
        #expect(status(fits) == nil)
    }

    @Test func headEndFindsTheFirstBlankLine() {
        #expect(HTTPHead.end(Array("GET / HTTP/1.1\r\n\r\nGET".utf8)) == 18)
        #expect(HTTPHead.end(Array("GET / HTTP/1.1\n\nx".utf8)) == 16)
        #expect(HTTPHead.end(Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)) == nil)
        #expect(HTTPHead.end(Array("GET / HTTP/1.1\r\n\r\n".utf8)[...]) == 18)
    }

    @Test func statusTableMatchesTheExitCodes() {
        for (code, status) in [(Int32(2), 400), (3, 401), (4, 502), (5, 503), (1, 500)] {
            #expect(BrokerProtocol.status(forExitCode: code) == status)
            #expect(BrokerProtocol.exitCode(forStatus: status) == code)
        }
        // One table for the broker and its client (man page BROKER, Client mode): every status
        // either side can meet gives the same exit code on both.
        for (status, code) in [(200, Int32(0)), (400, 2), (401, 3), (403, 5), (404, 1), (405, 1), (500, 1), (502, 4), (503, 5), (418, 1)] {
            #expect(BrokerProtocol.exitCode(forStatus: status) == code, "HTTP \(status): expected exit \(code)")
            if status != 200 {
                #expect(CredentialError.brokerAnswered(status: status, message: "", broker: "unix:/b").exitCode == code, "HTTP \(status): expected exit \(code)")
            }
        }
        #expect(BrokerProtocol.errorCode(forStatus: 401) == "login_required")
        #expect(BrokerProtocol.errorCode(forStatus: 403) == "peer_refused")
    }
}
