import CredentialCore
import Secrets

// HTTPRequest and HTTPResponse are noncopyable: a body may carry a refresh token or fresh tokens,
// so it lives once, in SecretBytes, and is wiped when the exchange is over. Test doubles that must
// keep requests and answers in arrays (Tests/OAuthTests: ScriptedTransport) record copyable
// snapshots of them instead; production code never copies a body.

/// One HTTP exchange, as the issuer client needs it: no redirects, bounded everything.
public struct HTTPRequest: ~Copyable, Sendable {
    public var method: String
    public var url: String
    /// Header lines in order, e.g. ("Content-Type", "application/json"). Never a secret: see
    /// `secretHeader`.
    public var headers: [HTTPHeader]
    /// One header line whose value is a secret (the usage request's `Authorization: Bearer …`),
    /// `Name: value` and a NUL, built in guarded memory by `secretHeaderLine`; empty when none.
    /// It lives once, here, and is wiped with the request; the transport hands libcurl a pointer
    /// into it, never a String.
    public var secretHeader: SecretBytes
    public var body: SecretBytes
    /// Seconds to establish the connection (TCP + TLS).
    public var connectTimeout: Double
    /// Seconds for the whole exchange, body included.
    public var totalTimeout: Double
    /// A response body larger than this is refused (never buffered).
    public var maxResponseBytes: Int
    /// Ignore `http_proxy`/`https_proxy`/`all_proxy` (set for loopback issuers).
    public var bypassProxy: Bool
    /// Where the address came from when a variable overrides the default
    /// (`ServiceURL.originNote`): added to a failure that names the address (man page, DIAGNOSTICS).
    public var addressOrigin: String?

    public init(method: String, url: String, headers: [HTTPHeader] = [], secretHeader: consuming SecretBytes = SecretBytes(),
                body: consuming SecretBytes = SecretBytes(),
                connectTimeout: Double = 10, totalTimeout: Double = 30, maxResponseBytes: Int = 256 * 1024,
                bypassProxy: Bool = false) {
        self.method = method
        self.url = url
        self.headers = headers
        self.secretHeader = secretHeader
        self.body = body
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.maxResponseBytes = maxResponseBytes
        self.bypassProxy = bypassProxy
    }

    public func header(_ name: String) -> String? {
        let n = name.lowercased()
        return headers.first { $0.name.lowercased() == n }?.value
    }

    /// `Name: prefixTOKEN` and a NUL, in guarded memory of exactly that size, for `secretHeader`.
    /// Nil when the token holds a byte a header line cannot carry (a control byte or a space).
    public static func secretHeaderLine(_ name: String, _ valuePrefix: String, _ token: SecretToken) -> SecretBytes? {
        guard Sanitize.isTokenSafe(token) else { return nil }
        var line = SecretBytes(capacity: name.utf8.count + 2 + valuePrefix.utf8.count + token.count + 1)
        line.append(utf8: name)
        line.append(utf8: ": ")
        line.append(utf8: valuePrefix)
        token.withUnsafeBytes { line.append($0) }
        line.append(0)
        return line
    }
}

public struct HTTPHeader: Equatable, Sendable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) { self.name = name; self.value = value }
}

/// What the retry loop reads of an answer: its status and headers (`Retry-After`). An
/// `HTTPResponse`, or what a client made of one (`IssuerAnswer`: the body parsed once).
public protocol RetryableAnswer: ~Copyable {
    var status: Int { get }
    func header(_ name: String) -> String?
}

// @frozen: its clients in other modules take the body out of it (partial consumption).
@frozen public struct HTTPResponse: ~Copyable, Sendable, RetryableAnswer {
    public var status: Int
    /// The response headers the client uses (`retry-after`, `content-type`, `location`), names lower-cased.
    public var headers: [String: String]
    public var body: SecretBytes

    public init(status: Int, headers: [String: String] = [:], body: consuming SecretBytes) {
        self.status = status
        var h: [String: String] = [:]
        for (k, v) in headers { h[k.lowercased()] = v }
        self.headers = h
        self.body = body
    }

    /// A canned answer (test doubles, fuzzing): `bytes` is copied and stays as it was.
    public init(status: Int, headers: [String: String] = [:], bytes: [UInt8] = []) {
        self.init(status: status, headers: headers, body: SecretBytes(copying: bytes))
    }

    /// A canned answer (test doubles, fuzzing).
    public init(status: Int, headers: [String: String] = [:], text: String) {
        self.init(status: status, headers: headers, body: SecretBytes(copying: text.utf8))
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// An HTML page (by its content type or its first non-space byte) where JSON was expected:
    /// usually a proxy, a captive portal or a bot check.
    public var looksLikeHTML: Bool {
        let firstByte = body.withUnsafeBytes { $0.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) } }
        return (header("content-type")?.lowercased() ?? "").contains("html") || firstByte == UInt8(ascii: "<")
    }
}

/// Why a request got no HTTP response. Transports throw this (or `CredentialError.temporary`);
/// `IssuerClient` turns every one into `CredentialError.temporary` (exit 4).
public struct TransportError: Error, Equatable, Sendable {
    public enum Kind: String, Sendable {
        /// The connect or total timeout was reached.
        case timeout
        /// Name resolution or TCP connect failed (also a failing proxy).
        case connect
        /// TLS handshake or certificate verification failed.
        case tls
        /// The response (body or headers) was larger than `maxResponseBytes`.
        case tooLarge
        /// Reset, empty reply, truncated body, HTTP framing error.
        case network
        /// libcurl could not be loaded, or another local problem.
        case unavailable
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = Sanitize.line(message, limit: 200)
    }

    /// Worth trying again after a pause: the issuer may simply not have been reachable.
    public var isTransient: Bool {
        switch kind {
        case .timeout, .connect, .network: return true
        case .tls, .tooLarge, .unavailable: return false
        }
    }

    /// No answer at all is temporary (exit 4), except a local problem that waiting does not
    /// mend — libcurl missing, a request refused before it was sent — which is a failure (exit 1).
    public var credentialError: CredentialError { kind == .unavailable ? .failure(message) : .temporary(message) }
}

/// Sends one request and returns the response, whatever its status. Network failures (no HTTP
/// response at all) are thrown as `TransportError` — or, by simple test transports, as
/// `CredentialError.temporary`; both mean exit 4 to the caller. Never follows redirects.
public protocol HTTPTransport {
    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse
}

extension HTTPTransport {
    /// Sends `request` with `policy`'s retries; a retry's timeouts are cut to what is left of the
    /// budget (the one request is reused: its body is never copied). Throws only `CredentialError`:
    /// no response at all is `.temporary` (exit 4), named by the transport or else by `failure`.
    public func send(_ request: inout HTTPRequest, retrying policy: RetryPolicy,
                     isFinal: (borrowing HTTPResponse) -> Bool = { _ in false }, failure: String) throws -> HTTPResponse {
        try send(&request, retrying: policy, reading: { (response: consuming HTTPResponse) in response }, isFinal: isFinal, failure: failure)
    }

    /// The same, with each response turned by `read` into what the caller works with (the
    /// issuer's answers are parsed once, here, and `isFinal` reads that parse).
    public func send<Answer: RetryableAnswer & ~Copyable>(
        _ request: inout HTTPRequest, retrying policy: RetryPolicy, reading read: (consuming HTTPResponse) -> Answer,
        isFinal: (borrowing Answer) -> Bool = { _ in false }, failure: String
    ) throws -> Answer {
        let connect = request.connectTimeout, total = request.totalTimeout
        do {
            return try policy.run(isFinal: isFinal) { remaining in
                request.totalTimeout = remaining.map { min(total, $0) } ?? total
                request.connectTimeout = min(connect, request.totalTimeout)
                return read(try send(request))
            }
        } catch let e as TransportError {
            throw e.credentialError
        } catch let e as CredentialError {
            throw e
        } catch {
            throw CredentialError.temporary(failure)
        }
    }
}

/// HTTP/1.1 request-head framing, shared by the two servers that read request heads: the
/// browser sign-in's loopback listener and the broker's socket.
package enum HTTPHead {
    /// The index just past the blank line that ends the head (CRLF CRLF, or bare LF LF as HTTP
    /// allows), or nil when none is there yet. An index of `b` (a slice keeps its own).
    /// (Inlinable: the broker looks for the end of every request head it reads, in its own module.)
    @inlinable
    package static func end<C: RandomAccessCollection>(_ b: C) -> Int? where C.Element == UInt8, C.Index == Int {
        var i = b.startIndex
        while i < b.endIndex {
            if b[i] == 0x0A {
                if i + 1 < b.endIndex, b[i + 1] == 0x0A { return i + 2 }
                if i + 2 < b.endIndex, b[i + 1] == 0x0D, b[i + 2] == 0x0A { return i + 3 }
            }
            i += 1
        }
        return nil
    }
}
