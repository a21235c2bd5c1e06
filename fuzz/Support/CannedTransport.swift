// A transport that answers every request with the same fuzzed response (issuer and usage targets).
import OAuth

package struct CannedTransport: HTTPTransport {
    package let status: Int
    package let headers: [String: String]
    package let body: [UInt8]
    package init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status; self.headers = headers; self.body = body
    }
    package func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse { HTTPResponse(status: status, headers: headers, bytes: body) }
}

/// The content types the fuzz input picks from (byte 2 of an HTTP-answer target's input).
package let fuzzContentTypes = ["application/json", "", "text/html; charset=utf-8", "application/json; charset=utf-8", "text/plain"]
