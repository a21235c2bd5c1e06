// The broker's request parser (man page BROKER, "Protocol"): head framing (headEnd), the
// request line and headers, the query, and what an answer and an audit line make of hostile
// text. Properties: the head is bounded, a request with a body is never accepted, nothing with
// a control byte or non-ASCII in its target is accepted, and what is accepted is exactly one
// of the three calls with a valid profile and min_ttl.
@testable import Broker
@testable import CredentialCore
import FuzzSupport
import Secrets
import Transport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    var head = input[...]
    if let end = HTTPHead.end(input) {
        require(end >= 2 && end <= input.count && input[end - 1] == 0x0A, "headEnd \(end) is not after a line feed")
        require(HTTPHead.end(Array(input[..<(end - 1)])) == nil, "headEnd is not the first blank line")
        head = input[..<end]
    }
    switch BrokerRequest.parse(head) {
    case .failure(let e):
        require([400, 404, 405].contains(e.status), "refused with \(e.status)")
        require(isCleanLine(e.message), "refusal message with control bytes: \(e.message.debugDescription)")
        if let path = e.path { require(path.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "refusal path with unsafe bytes") }
        answerAndAudit(message: e.message, path: e.path)
    case .success(let r):
        require(head.count <= BrokerProtocol.maxHeadBytes, "accepted a head of \(head.count) bytes")
        // Re-read the head independently: its lines, the request line, the headers.
        var lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> ArraySlice<UInt8> in
            line.last == 0x0D ? line.dropLast() : line
        }
        require(lines.count >= 3 && lines.suffix(2).allSatisfy(\.isEmpty), "accepted a head without its blank line")
        lines.removeLast(2)
        let requestLine = lines.removeFirst()
        let words = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
        require(words.count == 3 && words[0].elementsEqual("GET".utf8), "accepted a method other than GET")
        require(words[1].allSatisfy { $0 > 0x20 && $0 < 0x7F }, "accepted a target with control, space or non-ASCII bytes")
        require(words[2].elementsEqual("HTTP/1.1".utf8) || words[2].elementsEqual("HTTP/1.0".utf8), "accepted another HTTP version")
        for line in lines {
            require(line.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }, "accepted a header with a control byte")
            let text = String(decoding: line, as: UTF8.self).lowercased()
            require(!text.hasPrefix("transfer-encoding:"), "accepted a request with Transfer-Encoding (a body)")
            if text.hasPrefix("content-length:") {
                let value = text.dropFirst("content-length:".count).filter { $0 != " " && $0 != "\t" }
                require(!value.isEmpty && value.allSatisfy { $0 == "0" }, "accepted a request with a body (Content-Length \(value))")
            }
        }
        require([BrokerProtocol.tokenPath, BrokerProtocol.usagePath, BrokerProtocol.healthPath].contains(r.path), "accepted path \(r.path)")
        switch r.call {
        case .token(let p, let ttl):
            require(r.path == BrokerProtocol.tokenPath, "token call on \(r.path)")
            if let p { require(Profile.isValid(p.name) && !p.name.hasPrefix(".") && !p.name.hasPrefix("-"), "accepted profile \(p.name)") }
            if let ttl { require(ttl >= 0 && ttl <= BrokerProtocol.maxMinTTL, "accepted min_ttl \(ttl)") }
        case .usage(let p):
            require(r.path == BrokerProtocol.usagePath, "usage call on \(r.path)")
            if let p { require(Profile.isValid(p.name) && !p.name.hasPrefix(".") && !p.name.hasPrefix("-"), "accepted profile \(p.name)") }
        case .health:
            require(r.path == BrokerProtocol.healthPath, "health call on \(r.path)")
        }
        answerAndAudit(message: String(decoding: input, as: UTF8.self), path: r.path)
    }
    return 0
}

/// An error answer carrying hostile text is one JSON object of clean text, its HTTP head has no
/// stray line, and the audit line built from hostile names stays one printable line.
private func answerAndAudit(message: String, path: String?) {
    let answer = BrokerAnswer.failure(status: 400, message: message)
    let body = answer.body.unsafeString()
    require(body.hasSuffix("\n") && !body.dropLast().contains("\n"), "answer body is not one line")
    guard case .object(let members)? = try? JSON.parse(String(body.dropLast())) else { fuzzFail("answer body is not a JSON object: \(body.debugDescription)") }
    require(members.map(\.0) == ["error", "message"], "answer members \(members.map(\.0))")
    let wire = answer.serialized(keepAlive: false).unsafeArray()
    let end = HTTPHead.end(wire)
    require(end != nil && wire.count - end! == answer.body.count, "answer head does not end right before the body")
    let exe = BrokerPeer.printable(Array(message.utf8), limit: 256)
    require(exe.utf8.count <= 256 + 3 && exe.unicodeScalars.allSatisfy { ($0.value > 0x20 && $0.value < 0x7F) || $0 == "…" }, "exe not printable: \(exe.debugDescription)")
    let record = BrokerAuditRecord(time: 0, peer: BrokerPeer(pid: 1, uid: 2, gid: 3, executable: exe), path: path ?? message,
                                   profile: nil, status: 400, outcome: answer.outcome)
    require(isCleanLine(record.line) && !record.line.contains("\n"), "audit line not clean: \(record.line.debugDescription)")
}
