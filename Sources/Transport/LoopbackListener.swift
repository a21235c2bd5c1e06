import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// A deliberately small HTTP/1.1 server for the browser sign-in's redirect: it listens on
/// 127.0.0.1 only (never 0.0.0.0), serves GET requests, one answer per connection
/// (`Connection: close`), and bounds everything a client controls:
/// - the request line and headers together are at most `maxHeaderBytes` (else 431);
/// - each connection must deliver its request within `readDeadlineMillis` (else it is dropped),
///   and several connections are read side by side, so an idle or slow client (a browser's
///   speculative pre-connect, say) blocks nobody;
/// - a `Host` other than `localhost:PORT` or `127.0.0.1:PORT` is refused with 400 (DNS rebinding).
public final class LoopbackListener {
    public struct Request: Sendable {
        public var method: String
        /// The path without the query, e.g. `/auth/callback`.
        public var path: String
        /// The raw query (after `?`, before any `#`; empty when absent), in guarded memory: a
        /// sign-in's callback carries the authorization code there.
        public var query: SecretToken
        /// Header names lower-cased, in order.
        public var headers: [(String, String)]

        public func header(_ name: String) -> String? {
            let n = name.lowercased()
            return headers.first { $0.0 == n }?.1
        }

        /// Decoded query pairs, the values named in `secretNames` in guarded memory; nil when
        /// the query has a bad escape.
        public func queryPairs(secretNames: Set<String>) -> [(String, FormEncoding.Value)]? {
            query.withUnsafeBytes { FormEncoding.decode(query: $0, secretNames: secretNames) }
        }

        /// A query value that is no secret.
        public func queryValue(_ key: String) -> String? {
            for (name, value) in queryPairs(secretNames: []) ?? [] where name == key {
                if case .text(let text) = value { return text }
            }
            return nil
        }
    }

    public struct Response: Sendable {
        public var status: Int
        public var body: String
        public var contentType: String

        public init(status: Int, html: String) {
            self.status = status
            self.body = html
            self.contentType = "text/html; charset=utf-8"
        }
    }

    /// What the request handler wants after answering.
    public enum Next { case keepServing, stop }

    public enum BindError: Error, Equatable { case busy, failed(String) }

    public enum ServeEnd: Equatable { case stopped, timedOut, interrupted }

    public let port: Int
    public var maxHeaderBytes = 16 * 1024
    public var readDeadlineMillis: Int64 = 10_000
    public var maxConnections = 32
    private let fd: Int32

    private init(fd: Int32, port: Int) {
        self.fd = fd
        self.port = port
    }

    deinit { close(fd) }

    /// Binds 127.0.0.1:`port` (0 = any free port) and listens.
    public static func bind(port: Int) throws -> LoopbackListener {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { throw BindError.failed("socket: " + String(cString: strerror(errno))) }
        var one: Int32 = 1
        // Lets a new sign-in bind while old connections of a finished one sit in TIME_WAIT; Linux
        // still refuses the bind while another socket listens on the port.
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian // 127.0.0.1, never INADDR_ANY
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 {
            let e = errno
            close(s)
            throw e == EADDRINUSE ? BindError.busy : BindError.failed("bind 127.0.0.1:\(port): " + String(cString: strerror(e)))
        }
        guard listen(s, 16) == 0 else {
            let e = errno
            close(s)
            throw e == EADDRINUSE ? BindError.busy : BindError.failed("listen: " + String(cString: strerror(e)))
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) }
        }
        return LoopbackListener(fd: s, port: Int(UInt16(bigEndian: bound.sin_port)))
    }

    /// The bound address as "A.B.C.D:PORT" (for tests: it must be 127.0.0.1).
    public var boundAddress: String {
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let a = UInt32(bigEndian: bound.sin_addr.s_addr)
        return "\(a >> 24).\((a >> 16) & 255).\((a >> 8) & 255).\(a & 255):\(UInt16(bigEndian: bound.sin_port))"
    }

    private final class Connection {
        let fd: Int32
        let deadline: Int64
        /// What arrived, read straight into guarded memory (the callback's code is in it).
        var buffer = SecretBytes()
        init(fd: Int32, deadline: Int64) { self.fd = fd; self.deadline = deadline }
        func headEnd() -> Int? { buffer.withUnsafeBytes { HTTPHead.end($0) } }
    }

    /// Serves until the handler says `.stop`, `deadline` (monotonic milliseconds) passes, or
    /// Ctrl-C. `tick` runs about twice a second (e.g. to reap a browser process).
    public func serve(until deadline: Int64, interrupt: InterruptWatch?, tick: () -> Void = {},
                      handler: (Request) -> (Response, Next)) -> ServeEnd {
        var connections: [Connection] = []
        defer { for c in connections { close(c.fd) } }
        while true {
            let now = Clock.monotonicMillis()
            if now >= deadline { return .timedOut }
            // Drop connections that have not sent a whole request in time.
            connections.removeAll { c in
                if c.deadline <= now { close(c.fd); return true }
                return false
            }
            var wait = min(deadline - now, 500)
            for c in connections { wait = min(wait, c.deadline - now) }
            var set = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            set += connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            if let interrupt { set.append(pollfd(fd: interrupt.fd, events: Int16(POLLIN), revents: 0)) }
            let n = poll(&set, nfds_t(set.count), Int32(max(0, wait)))
            tick()
            if n < 0 {
                if errno == EINTR { if interrupt?.fired == true { return .interrupted }; continue }
                return .timedOut
            }
            if interrupt != nil, set[set.count - 1].revents != 0 { return .interrupted }
            if n == 0 { continue }
            // Read whatever arrived; answer each connection whose request is complete.
            var finished: [Int32] = []
            for (i, c) in connections.enumerated() where set[i + 1].revents != 0 {
                switch readAvailable(c) {
                case .needMore: continue
                case .closed:
                    finished.append(c.fd)
                case .tooLarge:
                    respond(c.fd, Response(status: 431, html: Self.page("Request too large", "The request headers are too large.")))
                    finished.append(c.fd)
                case .complete(let headEnd):
                    finished.append(c.fd)
                    guard let request = c.buffer.withUnsafeBytes({ parse(UnsafeRawBufferPointer(rebasing: $0[..<headEnd])) }) else {
                        respond(c.fd, Response(status: 400, html: Self.page("Bad request", "The request could not be read.")))
                        continue
                    }
                    guard hostAllowed(request.header("host")) else {
                        respond(c.fd, Response(status: 400, html: Self.page("Bad request", "This address only answers requests for localhost:\(port).")))
                        continue
                    }
                    // GET only: a HEAD (or anything else) must not spend the one-time code.
                    guard request.method == "GET" else {
                        respond(c.fd, Response(status: 405, html: Self.page("Method not allowed", "Only GET is supported.")))
                        continue
                    }
                    let (response, next) = handler(request)
                    respond(c.fd, response)
                    if next == .stop {
                        for f in finished { if f != c.fd { close(f) } }
                        close(c.fd)
                        connections.removeAll { finished.contains($0.fd) }
                        return .stopped
                    }
                }
            }
            for f in finished { close(f) }
            connections.removeAll { finished.contains($0.fd) }
            // New connections.
            if set[0].revents != 0 {
                while true {
                    let c = accept(fd, nil, nil)
                    if c < 0 { if errno == EINTR { continue }; break }
                    _ = fcntl(c, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
                    if connections.count >= maxConnections { close(c); continue }
                    connections.append(Connection(fd: c, deadline: Clock.monotonicMillis() + readDeadlineMillis))
                }
            }
        }
    }

    private enum ReadState { case needMore, closed, tooLarge, complete(Int) }

    private func readAvailable(_ c: Connection) -> ReadState {
        while true {
            var n = 0, code: Int32 = 0
            c.buffer.append(upTo: 4096) { room in
                n = recv(c.fd, room.baseAddress, room.count, 0)
                if n < 0 { code = errno }
                return max(n, 0)
            }
            if n < 0 {
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { break }
                return .closed
            }
            if n == 0 { return c.buffer.isEmpty ? .closed : (c.headEnd().map { .complete($0) } ?? .closed) }
            if let end = c.headEnd(), end <= maxHeaderBytes { return .complete(end) }
            if c.buffer.count > maxHeaderBytes { return .tooLarge }
        }
        if let end = c.headEnd(), end <= maxHeaderBytes { return .complete(end) }
        return c.buffer.count > maxHeaderBytes ? .tooLarge : .needMore
    }

    /// The request head, split on bytes (in Swift "\r\n" is one Character, so String.split
    /// would not see it). The query never becomes a String: it is copied from the head's guarded
    /// bytes into a `SecretToken`.
    func parse(_ head: UnsafeRawBufferPointer) -> Request? {
        var lines: [UnsafeRawBufferPointer] = []
        for raw in head.split(separator: 0x0A, omittingEmptySubsequences: false) {
            var line = UnsafeRawBufferPointer(rebasing: raw)
            if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
            lines.append(line)
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let first = lines.first else { return nil }
        let parts = first.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }),
              let version = String(validating: parts[2], as: UTF8.self), version.hasPrefix("HTTP/1.") else { return nil }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        let noFragment = target.prefix { $0 != UInt8(ascii: "#") }
        let question = noFragment.firstIndex(of: UInt8(ascii: "?"))
        let path = String(decoding: noFragment[..<(question ?? noFragment.endIndex)], as: UTF8.self)
        let query = question.map { SecretToken(copying: UnsafeRawBufferPointer(rebasing: noFragment[($0 + 1)...])) } ?? SecretToken()
        var headers: [(String, String)] = []
        for raw in lines.dropFirst() {
            guard let line = String(validating: raw, as: UTF8.self) else { return nil }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
            let name = line[..<colon]
            guard !name.contains(" "), !name.contains("\t") else { return nil }
            let value = String(line[line.index(after: colon)...]).trimmingSpaces()
            headers.append((name.lowercased(), value))
        }
        return Request(method: String(decoding: parts[0], as: UTF8.self), path: path, query: query, headers: headers)
    }

    /// `localhost:PORT` or `127.0.0.1:PORT` (case-insensitive), exactly one Host header's worth.
    func hostAllowed(_ host: String?) -> Bool {
        guard let host = host?.lowercased() else { return false }
        return host == "localhost:\(port)" || host == "127.0.0.1:\(port)"
    }

    private func respond(_ fd: Int32, _ r: Response) {
        let reason: String
        switch r.status {
        case 200: reason = "OK"
        case 400: reason = "Bad Request"
        case 404: reason = "Not Found"
        case 405: reason = "Method Not Allowed"
        case 431: reason = "Request Header Fields Too Large"
        default: reason = "Error"
        }
        let body = Array(r.body.utf8)
        var text = "HTTP/1.1 \(r.status) \(reason)\r\n"
        text += "Content-Type: \(r.contentType)\r\n"
        text += "Content-Length: \(body.count)\r\n"
        text += "Connection: close\r\n"
        text += "Cache-Control: no-store\r\n"
        text += "X-Content-Type-Options: nosniff\r\n"
        text += "Referrer-Policy: no-referrer\r\n"
        text += "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
        if r.status == 405 { text += "Allow: GET\r\n" }
        text += "\r\n"
        var bytes = Array(text.utf8)
        bytes += body
        let stop = Clock.monotonicMillis() + 2000
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { off += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), Clock.monotonicMillis() < stop {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&p, 1, 100)
                continue
            }
            return
        }
        // Half-close, then give the client a moment so unread input does not turn into a reset
        // that could discard the answer.
        shutdown(fd, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 1024)
        let drainUntil = Clock.monotonicMillis() + 200
        while Clock.monotonicMillis() < drainUntil {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) == 1 else { continue }
            let n = sink.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
        }
    }

    // MARK: pages

    /// A small page; `title` and `message` are HTML-escaped here.
    public static func page(_ title: String, _ message: String) -> String {
        let t = htmlEscape(title), m = htmlEscape(message)
        return """
        <!DOCTYPE html>
        <html><head><meta charset="utf-8"><title>\(t)</title>
        <style>body{font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}</style>
        </head><body><h1>\(t)</h1><p>\(m)</p></body></html>

        """
    }

    public static func htmlEscape(_ s: String) -> String {
        // By scalar, not by Character: "<" followed by a combining mark is one Character that is
        // not equal to "<", and slipped through unescaped.
        var out = String.UnicodeScalarView()
        for scalar in Sanitize.line(s, limit: 300).unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}

extension LoopbackListener {
    /// Asks whatever listens on 127.0.0.1:`port` to `GET /cancel` (a stale sign-in of ours
    /// stops). Best effort, bounded by `timeoutMillis`; the answer is not needed.
    public static func sendCancel(port: Int, timeoutMillis: Int64 = 1000) {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { return }
        defer { close(s) }
        let stop = Clock.monotonicMillis() + timeoutMillis
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 {
            guard errno == EINPROGRESS else { return }
            var p = pollfd(fd: s, events: Int16(POLLOUT), revents: 0)
            guard poll(&p, 1, Int32(max(0, stop - Clock.monotonicMillis()))) == 1 else { return }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len)
            guard err == 0 else { return }
        }
        let request = Array("GET /cancel HTTP/1.1\r\nHost: localhost:\(port)\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // Wait (bounded) for the answer or the close, so the old listener has released the port.
        var sink = [UInt8](repeating: 0, count: 1024)
        while Clock.monotonicMillis() < stop {
            var p = pollfd(fd: s, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(max(0, stop - Clock.monotonicMillis()))) == 1 else { return }
            let n = sink.withUnsafeMutableBytes { recv(s, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
        }
    }
}
