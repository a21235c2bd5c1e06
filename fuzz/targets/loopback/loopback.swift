// The browser sign-in's loopback HTTP server: request head framing (headEnd), request parsing,
// the Host check (DNS rebinding), callback query parameters, and HTML escaping of what a page shows.
@testable import CredentialCore
import FuzzSupport
@testable import OAuth
@testable import SignIn
@testable import Transport

// `nonisolated(unsafe)`: made once, on the first input, and only read after; libFuzzer calls
// LLVMFuzzerTestOneInput from one thread (its -jobs/-workers are processes).
nonisolated(unsafe) private let listener: LoopbackListener = {
    do { return try LoopbackListener.bind(port: 0) } catch { fuzzFail("cannot bind 127.0.0.1:0: \(error)") }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    var head = input
    if let end = HTTPHead.end(input) {
        require(end >= 2 && end <= input.count && input[end - 1] == 0x0A, "headEnd \(end) is not after a line feed")
        require(HTTPHead.end(Array(input[..<(end - 1)])) == nil, "headEnd is not the first blank line")
        head = Array(input[..<end])
    }
    if let r = head.withUnsafeBytes({ listener.parse($0) }) {
        require(!r.method.isEmpty, "empty method")
        require(r.path.hasPrefix("/"), "path without /")
        for s in [r.path, r.query.unsafeString()] {
            require(s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } && !s.contains("#"), "path/query with unsafe bytes: \(s.debugDescription)")
        }
        require(!r.path.contains("?"), "path holds the query")
        for (name, value) in r.headers {
            require(!name.isEmpty && name == name.lowercased() && !name.contains(" ") && !name.contains("\t"), "bad header name \(name.debugDescription)")
            require(!value.utf8.contains(0x0A), "header value with a line feed")
        }
        let host = r.header("host")
        if listener.hostAllowed(host) {
            let h = host!.lowercased()
            require(h == "localhost:\(listener.port)" || h == "127.0.0.1:\(listener.port)", "Host \(h.debugDescription) allowed")
        }
        if let pairs = r.queryPairs(secretNames: CallbackParameters.secretNames) {
            let cb = CallbackParameters(pairs)
            if let code = cb.code { require(Sanitize.isTokenSafe(code) && code.count <= 2048, "unsafe code accepted") }
            if let refusal = cb.refusal { requireCleanError(refusal) }
        }
    }
    // Whatever text a page shows is escaped and clean.
    let text = String(decoding: input, as: UTF8.self)
    let escaped = LoopbackListener.htmlEscape(text)
    require(!escaped.contains("<") && !escaped.contains(">") && !escaped.contains("\"") && !escaped.contains("'"), "unescaped HTML")
    require(isCleanLine(escaped), "escaped text with control characters")
    let page = LoopbackListener.page(text, text)
    require(page.utf8.filter { $0 == 60 }.count == LoopbackListener.page("t", "m").utf8.filter { $0 == 60 }.count, "page gained tags")
    return 0
}
