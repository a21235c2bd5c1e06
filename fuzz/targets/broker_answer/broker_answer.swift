// Client mode's reading of a broker's answer (man page BROKER, "Client mode"): the HTTP framing
// (BrokerClient.parseAnswer), the JSON with its token members in guarded memory, the document
// made of a token answer and what get prints of it, and the usage answer read back and printed.
// Properties: the body is exactly the bytes after the head (cut at Content-Length), a status is
// 100-599, an error's message reaches stderr clean, what is printed as JSON parses again,
// and the plain usage text holds no control byte.
@testable import Broker
@testable import CLI
@testable import OAuth
import CredentialCore
import FuzzSupport
import Secrets
#if canImport(Glibc)
import Glibc
#endif

private let now: Int64 = 1_800_000_000

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let raw = SecretBytes(copying: input)
    do {
        let reply = try BrokerClient.parseAnswer(raw, from: "unix:/fuzz.sock")
        check(reply, input, raw)
    } catch {
        requireCleanError(error)
    }
    return 0
}

private func check(_ reply: borrowing BrokerClient.Reply, _ input: [UInt8], _ raw: borrowing SecretBytes) {
    require(reply.status >= 100 && reply.status <= 599, "status \(reply.status)")
    let end = BrokerClient.headEnd(raw)
    require(end != nil, "an answer without the end of its head")
    let body = reply.body.unsafeArray()
    require(body.count <= input.count - end!, "a body longer than what follows the head")
    require(body.elementsEqual(input[end!..<(end! + body.count)]), "the body is not the bytes after the head")

    guard let value = try? JSON.parse(reply.body, maxBytes: BrokerClient.maxAnswerBytes) else { return }
    if reply.status != 200 {
        let e = CredentialError.brokerAnswered(status: reply.status, message: Sanitize.line(value["message"]?.stringValue ?? "", limit: 300), broker: "unix:/fuzz.sock")
        require(isCleanLine(e.message), "unclean error line \(e.message.debugDescription)")
        require((1...5).contains(e.exitCode), "exit \(e.exitCode)")
        return
    }
    // A token answer: what get prints of it.
    // (A refresh token cannot come from it: a ServedCredential has none.)
    if let document = try? Runner.credential(fromTokenAnswer: value, broker: "unix:/fuzz.sock") {
        do {
            let json = try GetFormatter.format(document, .json)
            require((try? JSON.parse(json)) != nil, "get --json printed what does not parse")
        } catch {
            requireCleanError(error)
        }
        do {
            let bytes = try GetFormatter.format(document, .token).unsafeArray()
            require(bytes.last == 0x0A && bytes.dropLast().allSatisfy { $0 > 0x20 && $0 < 0x7F }, "get printed a token with unsafe bytes")
        } catch {
            requireCleanError(error)
        }
    }
    // A usage answer, read back: printed as JSON it parses, as plain text it is clean.
    guard let plain = try? JSON.parse(reply.body, maxBytes: BrokerClient.maxAnswerBytes), plain.isObject else { return }
    let (report, plan) = UsageRenderer.report(normalized: plain, now: now)
    require((try? JSON.parse(UsageRenderer.json(report, plan: plan))) != nil, "usage --json printed what does not parse")
    let text = UsageRenderer(style: .plain, now: now, localTime: { _ in tm() }).text(report, plan: plan)
    for line in text.split(separator: "\n") { require(isCleanLine(String(line)), "usage printed \(line.debugDescription)") }
}
