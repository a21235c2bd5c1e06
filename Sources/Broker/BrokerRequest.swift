import CredentialCore
import SystemRuntime
import Transport

/// The broker's protocol (man page BROKER): HTTP/1.1 GET requests on three paths, answered with
/// JSON. Both halves read this: the server parses with it, the client builds its targets from it.
package enum BrokerProtocol {
    package static let tokenPath = "/v1/token"
    package static let usagePath = "/v1/usage"
    package static let healthPath = "/v1/health"
    /// The request head (request line and headers) may be at most this long; a body is never read.
    package static let maxHeadBytes = 8192
    /// The largest `min_ttl`, as for `get --min-ttl`.
    package static let maxMinTTL: Int64 = 366 * 86400

    /// The answer's status for a failure with this exit code (the exit-code table is
    /// `CredentialError.exitCode`): 2 → 400, 3 → 401, 4 → 502, 5 → 503, anything else 500.
    package static func status(forExitCode code: Int32) -> Int {
        switch code {
        case 2: return 400
        case 3: return 401
        case 4: return 502
        case 5: return 503
        default: return 500
        }
    }

    /// The answer's status for a failure: as its exit code says, but a store the broker could not
    /// reach is 503 even where the host's exit code is 3 (man page BROKER): the client is not told
    /// to sign in because the broker's keyring was out of sight.
    package static func status(for error: CredentialError) -> Int {
        if case .notFoundKeyringUnreachable = error { return 503 }
        return status(forExitCode: error.exitCode)
    }

    /// The `error` member of a failure answer with this status.
    package static func errorCode(forStatus status: Int) -> String {
        switch status {
        case 400: return "bad_request"
        case 401: return "login_required"
        case 403: return "peer_refused"
        case 404: return "not_found"
        case 405: return "method_not_allowed"
        case 502: return "temporary"
        case 503: return "store_problem"
        default: return "failure"
        }
    }

    /// The exit code a client reports for an answer with this status: 0 for 200, else the one
    /// table client mode reads too (`CredentialError.exitCode(forBrokerStatus:)`; 403 is 5).
    package static func exitCode(forStatus status: Int) -> Int32 {
        status == 200 ? 0 : CredentialError.exitCode(forBrokerStatus: status)
    }
}

/// One request as the broker understands it, parsed from the request head only.
package struct BrokerRequest: Equatable, Sendable {
    package enum Call: Equatable, Sendable {
        /// `GET /v1/token?profile=NAME&min_ttl=SECONDS`: what `get --json` prints.
        case token(profile: Profile?, minTTL: Int64?)
        /// `GET /v1/usage?profile=NAME`: what `usage --json` prints.
        case usage(profile: Profile?)
        /// `GET /v1/health`: `{"ok":true}`.
        case health
    }

    package var call: Call
    /// The path without the query (already checked: printable ASCII, starts with `/`).
    package var path: String
    /// Whether the connection may carry another request after this answer.
    package var keepAlive: Bool

    package var profile: Profile? {
        switch call {
        case .token(let p, _), .usage(let p): return p
        case .health: return nil
        }
    }
}

/// A request the broker refuses before any handler sees it.
package struct BrokerRequestError: Error, Equatable, Sendable {
    /// 400, 404 or 405.
    package var status: Int
    package var message: String
    /// The path when the request line could be read (for the audit line), else nil.
    package var path: String?
}

extension BrokerRequest {
    /// Parses one request head (everything up to and including its blank line). Refuses, with
    /// 400, a head longer than `maxHeadBytes`, control bytes or anything but printable ASCII in
    /// the request target, malformed header lines, and any sign of a body (`Content-Length`
    /// other than 0, `Transfer-Encoding`); with 404 an unknown path; with 405 a method other
    /// than GET on a known path.
    package static func parse<C: RandomAccessCollection>(_ head: C) -> Result<BrokerRequest, BrokerRequestError> where C.Element == UInt8, C.Index == Int {
        func bad(_ m: String, _ path: String? = nil) -> Result<BrokerRequest, BrokerRequestError> {
            .failure(BrokerRequestError(status: 400, message: m, path: path))
        }
        guard head.count <= BrokerProtocol.maxHeadBytes else {
            return bad("the request head is larger than \(BrokerProtocol.maxHeadBytes / 1024) KiB")
        }
        // Lines end in LF, optionally preceded by CR; a bare CR anywhere else is refused below.
        let bytes = Array(head)
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0x0A {
            var end = i
            if end > start, bytes[end - 1] == 0x0D { end -= 1 }
            lines.append(bytes[start..<end])
            start = i + 1
        }
        guard start == bytes.count, lines.count >= 2, lines.last!.isEmpty else {
            return bad("the request head does not end with a blank line")
        }
        lines.removeLast()

        // Request line: METHOD SP TARGET SP HTTP/1.x
        let parts = lines[0].split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return bad("the request line is not 'METHOD TARGET HTTP/1.1'") }
        let method = parts[0], target = parts[1], version = parts[2]
        guard !method.isEmpty, method.count <= 16, method.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            return bad("the request method is not an upper-case word")
        }
        let http11: Bool
        switch String(decoding: version, as: UTF8.self) {
        case "HTTP/1.1": http11 = true
        case "HTTP/1.0": http11 = false
        default: return bad("only HTTP/1.1 and HTTP/1.0 are spoken here")
        }
        guard target.first == 0x2F, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x23 }) else {
            return bad("the request target must be a path of printable ASCII (no spaces, controls or '#')")
        }
        let targetText = String(decoding: target, as: UTF8.self)
        let path: String, query: String?
        if let q = targetText.firstIndex(of: "?") {
            path = String(targetText[..<q])
            query = String(targetText[targetText.index(after: q)...])
        } else {
            path = targetText
            query = nil
        }

        // Headers: only the framing ones matter; every line must still be well formed.
        var keepAlive = http11
        var sawLength = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else { return bad("a header line has no name", path) }
            let name = line[line.startIndex..<colon]
            guard name.allSatisfy(isTokenChar) else { return bad("a header name has a byte a name cannot have", path) }
            let rawValue = line[(colon + 1)...]
            // Field values: visible bytes, spaces and tabs (obs-text allowed), never a control byte.
            guard rawValue.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                return bad("a header value has a control byte", path)
            }
            // Only the framing headers are read; no string is made for any other.
            guard let framing = FramingHeader(name) else { continue }
            let value = String(decoding: rawValue, as: UTF8.self).trimmingSpaces().lowercased()
            switch framing {
            case .contentLength:
                guard !sawLength, value.utf8.allSatisfy({ $0 == 0x30 }), !value.isEmpty else {
                    return bad("the broker reads no request body (Content-Length must be 0 or absent)", path)
                }
                sawLength = true
            case .transferEncoding:
                return bad("the broker reads no request body (no Transfer-Encoding)", path)
            case .connection:
                let options = value.split(separator: ",").map { String($0).trimmingSpaces() }
                if options.contains("close") { keepAlive = false } else if options.contains("keep-alive") { keepAlive = true }
            }
        }

        guard path == BrokerProtocol.tokenPath || path == BrokerProtocol.usagePath || path == BrokerProtocol.healthPath else {
            let known = [BrokerProtocol.tokenPath, BrokerProtocol.usagePath, BrokerProtocol.healthPath]
            return .failure(BrokerRequestError(status: 404, message: "no such path; the broker answers \(known.joined(separator: ", "))", path: path))
        }
        guard method.elementsEqual("GET".utf8) else {
            return .failure(BrokerRequestError(status: 405, message: "only GET is answered", path: path))
        }

        // Query: NAME=VALUE pairs, percent-decoded; each name at most once, unknown names refused
        // (a misspelt min_ttl must not be silently ignored).
        let allowed: [String]
        switch path {
        case BrokerProtocol.tokenPath: allowed = ["profile", "min_ttl"]
        case BrokerProtocol.usagePath: allowed = ["profile"]
        default: allowed = []
        }
        var params: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(kv[0]), let value = percentDecoded(kv.count > 1 ? kv[1] : "") else {
                return bad("the query has a malformed %-escape or a control byte", path)
            }
            guard allowed.contains(name) else {
                return bad("unknown query parameter '\(Sanitize.line(name, limit: 40))' for \(path)", path)
            }
            guard params[name] == nil else { return bad("query parameter '\(name)' given twice", path) }
            params[name] = value
        }
        var profile: Profile?
        if let p = params["profile"] {
            guard Profile.isValid(p), p.first != ".", p.first != "-" else {
                return bad("invalid profile name '\(Sanitize.line(p, limit: 80))': use 1-64 of A-Z a-z 0-9 . _ -, not starting with . or -", path)
            }
            profile = Profile(unchecked: p)
        }
        let call: BrokerRequest.Call
        switch path {
        case BrokerProtocol.tokenPath:
            var minTTL: Int64?
            if let raw = params["min_ttl"] {
                guard !raw.isEmpty, raw.utf8.count <= 9, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                      let n = Int64(raw), n <= BrokerProtocol.maxMinTTL else {
                    return bad("invalid min_ttl '\(Sanitize.line(raw, limit: 40))': a number of seconds from 0 to \(BrokerProtocol.maxMinTTL)", path)
                }
                minTTL = n
            }
            call = .token(profile: profile, minTTL: minTTL)
        case BrokerProtocol.usagePath:
            call = .usage(profile: profile)
        default:
            call = .health
        }
        return .success(BrokerRequest(call: call, path: path, keepAlive: keepAlive))
    }

    /// RFC 9110 `tchar`.
    static func isTokenChar(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): return true
        default: return false
        }
    }

    /// The headers that frame a request, the only ones read; a name matches in any case.
    enum FramingHeader: CaseIterable {
        case contentLength, transferEncoding, connection

        var name: String {
            switch self {
            case .contentLength: return "content-length"
            case .transferEncoding: return "transfer-encoding"
            case .connection: return "connection"
            }
        }

        init?<C: Collection>(_ name: C) where C.Element == UInt8 {
            guard let match = Self.allCases.first(where: { header in
                header.name.utf8.count == name.count
                    && zip(header.name.utf8, name).allSatisfy { expected, byte in
                        // ASCII letters fold to lower case; '-' is itself.
                        expected == (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
                    }
            }) else { return nil }
            self = match
        }
    }

    /// `%XX` decoded; nil for a malformed escape or a decoded byte outside printable ASCII.
    static func percentDecoded<S: StringProtocol>(_ s: S) -> String? {
        // The one percent-decoder ('+' is no space here); then printable ASCII only.
        guard let out = FormEncoding.percentDecoded(s, plusIsSpace: false), out.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: out, as: UTF8.self)
    }
}
