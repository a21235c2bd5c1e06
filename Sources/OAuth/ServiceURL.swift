import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// A base URL the tool may send a token to: the rule `CHATGPT_CREDENTIAL_ISSUER` and
/// `CHATGPT_CREDENTIAL_BACKEND` share (man page, Global options). Only `https://`, or `http://` to a
/// loopback address (127.0.0.0/8, `[::1]`, `localhost`), is accepted; no user information, query
/// or fragment. Anything else is a usage error (exit 2) naming the variable, raised before any
/// network I/O.
public struct ServiceURL: Equatable, Sendable {
    /// Scheme, authority and optional path, without a trailing slash.
    public let baseURL: String
    /// True for `http://` loopback servers (test servers); requests to them bypass proxies.
    public let isLoopback: Bool
    /// The variable that set it, nil for a built-in default.
    public let variable: String?

    /// A URL already known to be valid (the built-in defaults).
    package init(validated: String, loopback: Bool) {
        baseURL = validated
        isLoopback = loopback
        variable = nil
    }

    /// For a failure that names this address: where it came from when a variable overrides
    /// `defaultURL` (`set by CHATGPT_CREDENTIAL_ISSUER, overriding the default …`), else nil.
    public func originNote(defaultURL: String) -> String? {
        variable.map { "set by \($0), overriding the default \(defaultURL)" }
    }

    /// Validates `text`, the value of `variable` (named in the error).
    public init(_ text: String, variable: String) throws {
        func bad(_ why: String) -> CredentialError {
            .usage("\(variable)='\(Sanitize.line(text, limit: 120))' is not allowed: \(why)")
        }
        guard !text.isEmpty, text.utf8.count <= 2048,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw bad("it must be a URL without spaces or control characters")
        }
        guard let sep = text.firstRange(of: "://") else { throw bad("it must start with https://") }
        let scheme = text[..<sep.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw bad("it must start with https://") }
        var rest = Substring(text[sep.upperBound...])
        while rest.hasSuffix("/") { rest.removeLast() }
        guard !rest.contains("?"), !rest.contains("#") else { throw bad("it must not have a query or fragment") }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = rest[slash...]
        guard !authority.contains("@") else { throw bad("it must not contain user information") }
        guard let (host, port) = Self.splitHostPort(authority) else { throw bad("it has no valid host") }
        if let port { guard let p = Int(port), (1...65535).contains(p) else { throw bad("the port is not valid") } }
        let hostLower = host.lowercased()
        let loopback = Self.isLoopbackHost(hostLower)
        if scheme == "http" && !loopback {
            throw bad("use https://, or http:// only to a loopback address (127.0.0.1, [::1], localhost)")
        }
        if !host.hasPrefix("[") {
            let ok = host.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 46 }
            guard ok, !host.hasPrefix("."), !host.hasPrefix("-") else { throw bad("it has no valid host") }
        }
        var url = scheme + "://" + hostLower
        if let port { url += ":" + port }
        url += path
        baseURL = url
        isLoopback = scheme == "http" && loopback
        self.variable = variable
    }

    /// The full URL of an endpoint path such as `/oauth/token`.
    public func url(_ path: String) -> String { baseURL + path }

    private static func splitHostPort(_ authority: Substring) -> (String, String?)? {
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            let host = String(authority[...close])
            let after = authority[authority.index(after: close)...]
            if after.isEmpty { return (host, nil) }
            guard after.hasPrefix(":"), after.count > 1 else { return nil }
            return (host, String(after.dropFirst()))
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard let first = parts.first, !first.isEmpty, parts.count <= 2 else { return nil }
        if parts.count == 2 { guard !parts[1].isEmpty else { return nil }; return (String(first), String(parts[1])) }
        return (String(first), nil)
    }

    /// `localhost`, `[::1]`, or a dotted-quad in 127.0.0.0/8 (strict: four decimal octets).
    static func isLoopbackHost(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return false }
        var values: [Int] = []
        for o in octets {
            guard (1...3).contains(o.count), o.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  o.count == 1 || o.first != "0", let v = Int(o), v <= 255 else { return false }
            values.append(v)
        }
        return values[0] == 127
    }
}
