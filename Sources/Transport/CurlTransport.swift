import CredentialCore
import Secrets
import CCurlShim

/// The real transport: libcurl, loaded with dlopen() on the first request (see Sources/CCurlShim),
/// so processes that never touch the network never map libcurl or OpenSSL.
/// Certificates are verified, redirects are not followed, proxies come from the environment as
/// with curl (`https_proxy`, `no_proxy`, …) except for requests that set `bypassProxy`.
public struct CurlTransport: HTTPTransport, Sendable {
    public init() {}

    /// Whether libcurl has been loaded into this process (for diagnostics and tests).
    public static var isLoaded: Bool { ccurl_is_loaded() != 0 }

    public func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse {
        let lines = request.headers.map { "\($0.name): \($0.value)" }
        if lines.contains(where: { $0.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) }) {
            throw TransportError(.unavailable, "refusing a request header containing a line break")
        }
        // The secret header is one NUL-terminated line in guarded memory; libcurl reads it there.
        let secretHeaderIsLine = request.secretHeader.withUnsafeBytes { line in
            line.isEmpty || (line.last == 0 && !line.dropLast().contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }))
        }
        guard secretHeaderIsLine else { throw TransportError(.unavailable, "refusing a request header containing a line break") }
        guard !request.url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw TransportError(.unavailable, "refusing a URL containing spaces or control bytes")
        }
        var response = ccurl_response()
        defer {
            ccurl_response_free(&response) // zeroes the shim's copy of the body (it carries tokens)
        }
        let kind: Int32 = request.method.withCString { method in
            request.url.withCString { url in
                withCStrings(lines) { plainLines in
                    request.secretHeader.withUnsafeBytes { secretLine in
                        request.body.withUnsafeBytes { body in
                            // The secret line goes to libcurl from its guarded memory, not a copy.
                            let secret: [UnsafePointer<CChar>?] =
                                secretLine.isEmpty ? [] : [UnsafePointer(secretLine.baseAddress!.assumingMemoryBound(to: CChar.self))]
                            return (plainLines + secret).withUnsafeBufferPointer { hp in
                                var req = ccurl_request()
                                req.method = method
                                req.url = url
                                req.headers = hp.baseAddress
                                req.header_count = hp.count
                                // libcurl reads the body from here (CURLOPT_POSTFIELDS, no copy of ours).
                                req.body = body.baseAddress?.assumingMemoryBound(to: UInt8.self)
                                req.body_length = body.count
                                req.connect_timeout_ms = Int(max(1, request.connectTimeout * 1000))
                                req.total_timeout_ms = Int(max(1, request.totalTimeout * 1000))
                                req.max_response_bytes = max(1, request.maxResponseBytes)
                                req.bypass_proxy = request.bypassProxy ? 1 : 0
                                return ccurl_perform(&req, &response)
                            }
                        }
                    }
                }
            }
        }
        let detail = withUnsafeBytes(of: &response.error_message) { raw -> String in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: bytes[..<end], as: UTF8.self)
        }
        // The address, and where it came from when a variable overrides the default (man page,
        // CHATGPT_CREDENTIAL_ISSUER): said next to it, before libcurl's words, so a cut keeps it.
        let host = Self.hostForMessages(request.url) + (request.addressOrigin.map { " (\($0))" } ?? "")
        switch Int(kind) {
        case Int(CCURL_OK):
            var headers: [String: String] = [:]
            if let ra = response.retry_after { headers["retry-after"] = String(cString: ra) }
            if let ct = response.content_type { headers["content-type"] = String(cString: ct) }
            if let loc = response.location { headers["location"] = String(cString: loc) }
            let body = SecretBytes(copying: UnsafeRawBufferPointer(start: response.body, count: response.body == nil ? 0 : response.body_length))
            return HTTPResponse(status: response.status, headers: headers, body: body)
        case Int(CCURL_ERR_TIMEOUT):
            throw TransportError(.timeout, "no answer from \(host) in time (\(detail))")
        case Int(CCURL_ERR_CONNECT):
            throw TransportError(.connect, "cannot reach \(host) (\(detail))")
        case Int(CCURL_ERR_TLS):
            throw TransportError(.tls, "TLS with \(host) failed (\(detail))")
        case Int(CCURL_ERR_TOO_LARGE):
            throw TransportError(.tooLarge, "\(host) sent a response larger than \(request.maxResponseBytes) bytes")
        case Int(CCURL_ERR_NETWORK):
            throw TransportError(.network, "the connection to \(host) failed (\(detail))")
        case Int(CCURL_ERR_UNAVAILABLE):
            throw TransportError(.unavailable, detail)
        default:
            throw TransportError(.unavailable, "request to \(host) failed (\(detail))")
        }
    }

    /// scheme://host[:port] of a URL, for messages (never the path or query).
    static func hostForMessages(_ url: String) -> String {
        guard let r = url.firstRange(of: "://") else { return "the issuer" }
        let rest = url[r.upperBound...]
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        return String(url[..<r.upperBound]) + String(rest[..<end])
    }
}

/// Calls `body` with NUL-terminated copies of `strings` that live for the duration of the call.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    var storage: [UnsafeMutablePointer<CChar>] = []
    storage.reserveCapacity(strings.count)
    for s in strings {
        let bytes = Array(s.utf8CString)
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
        p.initialize(from: bytes, count: bytes.count)
        storage.append(p)
    }
    defer {
        for (p, s) in zip(storage, strings) {
            let n = s.utf8.count + 1
            for i in 0..<n { p[i] = 0 }
            p.deallocate()
        }
    }
    return body(storage.map { UnsafePointer($0) })
}
