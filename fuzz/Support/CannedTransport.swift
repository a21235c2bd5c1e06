// A transport that answers every request with the same fuzzed response (issuer and usage targets).
import OAuth
import Transport

package struct CannedTransport: HTTPTransport {
    package let status: Int
    package let headers: [String: String]
    package let body: [UInt8]

    /// The answer an HTTP-answer target's input describes: bytes 0-1 the status (100-599), byte 2
    /// the content type (one of a few, or none), the rest the body.
    package init(fuzzing input: inout FuzzInput) {
        status = 100 + (Int(input.byte()) << 8 | Int(input.byte())) % 500
        let contentType = Self.contentTypes[Int(input.byte()) % Self.contentTypes.count]
        headers = contentType.isEmpty ? [:] : ["Content-Type": contentType]
        body = input.rest()
    }

    package func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse { HTTPResponse(status: status, headers: headers, bytes: body) }

    static let contentTypes = ["application/json", "", "text/html; charset=utf-8", "application/json; charset=utf-8", "text/plain"]
}
