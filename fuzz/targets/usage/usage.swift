// The backend's usage answer (GET /wham/usage): UsageReport.parse on any bytes, UsageClient.fetch
// behind a transport that answers with them, and what `usage` prints of the result (plain,
// terminal and JSON). Byte 0-1: status, byte 2: the content type, the rest: the body.
import CredentialCore
import FuzzSupport
@testable import OAuth
@testable import UsageBackend
@testable import CLI

private let now: Int64 = 1_800_000_000
private let token = "eyJhbGciOiJub25lIn0.eyJleHAiOjE5MDAwMDAwMDB9.sig"
private let secretToken = SecretToken(copying: token)

/// What the parser promises of a report, whatever the body was.
private func requireSane(_ r: UsageReport) {
    let limits = (r.rateLimit.map { [$0] } ?? []) + r.additional.map(\.limit)
    require(r.additional.count <= UsageReport.maxAdditional, "\(r.additional.count) additional limits")
    for limit in limits {
        require(limit.windows.count <= 2, "\(limit.windows.count) windows in one limit")
        for w in limit.windows {
            if let p = w.usedPercent { require(p.isFinite && p >= 0 && p <= 100, "used_percent \(p)") }
            if let s = w.windowSeconds { require(s >= 1 && s <= UsageReport.maxWindowSeconds, "window \(s) s") }
            if let t = w.resetsAt { require(t >= now - UsageReport.maxResetAge && t <= now + UsageReport.maxWindowSeconds, "resets at \(t)") }
        }
    }
    var strings = [r.plan, r.credits?.balance].compactMap { $0 }
    for a in r.additional { strings.append(a.name); if let f = a.meteredFeature { strings.append(f) } }
    for s in strings {
        require(isCleanLine(s), "unclean vendor string \(s.debugDescription)")
        require(!s.isEmpty && s.count <= 65, "vendor string of \(s.count) characters")
    }
}

/// Our own SGR sequences are the only escapes a terminal rendering may hold.
private func withoutOwnColours(_ s: String) -> String {
    var out = s
    for sgr in ["\u{1b}[0m", "\u{1b}[1m", "\u{1b}[2m", "\u{1b}[31m", "\u{1b}[32m", "\u{1b}[33m", "\u{1b}[1;31m"] { out = out.replacing(sgr, with: "") }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let transport = CannedTransport(fuzzing: &input)
    let (status, body) = (transport.status, transport.body)

    // The parser alone: nil exactly when the body is not a JSON object.
    let parsed = UsageReport.parse(body, now: now)
    let isObject = (try? JSON.parse(body, maxBytes: UsageReport.maxBytes))?.isObject == true
    require((parsed != nil) == isObject, "parse returned \(parsed == nil ? "nil" : "a report") for a body that is\(isObject ? "" : " not") a JSON object")

    // Through the client: only typed, clean errors; a report only for 2xx, unauthorized only for 401.
    var client = UsageClient(config: .default, transport: transport, retry: .none, userAgent: "chatgpt-credential/fuzz")
    client.retry.sleep = { _ in fuzzFail("slept with retry .none") }
    do {
        switch try client.fetch(accessToken: secretToken, accountId: "acct-123", profile: .default, now: { now }) {
        case .report(let r):
            require((200...299).contains(status), "a report from HTTP \(status)")
            require(r == parsed, "the client's report differs from the parser's")
        case .unauthorized:
            require(status == 401, "unauthorized from HTTP \(status)")
        }
    } catch {
        requireCleanError(error)
        if let e = error as? CredentialError { require(!e.message.contains(token), "the token in an error message") }
    }

    guard let report = parsed else { return 0 }
    requireSane(report)

    // What `usage` prints: plain text has no control byte but newlines; the terminal text only
    // our own colours; the JSON parses back and holds no raw control byte.
    let plain = UsageRenderer(style: .plain, now: now).text(report, plan: report.plan)
    require(plain.hasSuffix("\n") && isCleanLine(plain.replacing("\n", with: "")), "plain output with control bytes: \(plain.debugDescription)")
    for unicode in [true, false] {
        let tty = UsageRenderer(style: .terminal(unicode: unicode), now: now).text(report, plan: report.plan)
        require(isCleanLine(withoutOwnColours(tty).replacing("\n", with: "")), "terminal output with foreign escapes: \(tty.debugDescription)")
        require(tty.split(separator: "\n").count == plain.split(separator: "\n").count, "terminal and plain output differ in lines")
    }
    let json = UsageRenderer.json(report, plan: report.plan)
    require(!json.dropLast().unicodeScalars.contains { $0.value < 0x20 }, "JSON output with a raw control byte")
    guard let again = try? JSON.parse(json), again.isObject else { fuzzFail("usage --json output does not parse: \(json.debugDescription)") }
    require(again["windows"] != nil && again["additional_limits"] != nil, "usage --json lacks windows or additional_limits")
    return 0
}
