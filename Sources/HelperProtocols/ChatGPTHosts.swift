import CredentialCore
import Secrets

/// The one rule deciding which hosts may receive the ChatGPT access token, shared by the git and
/// docker protocols. git runs a globally configured helper for every host it talks to and ignores
/// the helper's exit code, so this rule is what keeps the token from leaving for anywhere else.
///
/// Allowed: `chatgpt.com`, any subdomain of it, and `api.openai.com` — compared case-insensitively,
/// with one trailing dot removed — on the default HTTPS port only: no port, or `:443`. Another
/// port is another server (a proxy, a local test service, someone's tunnel) and gets nothing
/// (man page, GIT CREDENTIAL HELPER and DOCKER CREDENTIAL HELPER).
/// Everything else is refused, deliberately narrowly: a host may contain only ASCII letters, digits,
/// `-` and `.`, with no empty label. So userinfo (`@`), paths, percent-encoding, backslashes,
/// spaces, control bytes (CR, LF, NUL), IPv6 literals and non-ASCII (IDN look-alikes) never match.
public enum ChatGPTHosts {
    /// The domains we answer for; a subdomain of the first also matches.
    public static let primaryDomain = "chatgpt.com"
    public static let exactHosts: [String] = ["chatgpt.com", "api.openai.com"]

    /// True when `host` (as git sends it: `name` or `name:port`) may receive the token.
    public static func isAllowed(_ host: String) -> Bool {
        guard let name = normalizedName(host) else { return false }
        if exactHosts.contains(name) { return true }
        return name.hasSuffix("." + primaryDomain)
    }

    /// The only port a host may name: HTTPS's default.
    public static let defaultPort = 443

    /// Lower-cased host name without port or trailing dot, or nil when `host` is not a plain
    /// DNS name, optionally with `:443`, by the rule above.
    public static func normalizedName(_ host: String) -> String? {
        var bytes = Array(host.utf8)
        guard !bytes.isEmpty, bytes.count <= 300 else { return nil }
        // Optional ":PORT" at the end, which must be the default port.
        if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
            let port = bytes[(colon + 1)...]
            guard (1...5).contains(port.count), port.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            var value = 0
            for d in port { value = value * 10 + Int(d - 48) }
            guard value == defaultPort else { return nil }
            bytes.removeSubrange(colon...)
        }
        if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
        guard !bytes.isEmpty, bytes.count <= 253 else { return nil }
        var labelLength = 0
        for (n, b) in bytes.enumerated() {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                labelLength += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                bytes[n] = b + 32
                labelLength += 1
            case UInt8(ascii: "-"):
                labelLength += 1
            case UInt8(ascii: "."):
                guard labelLength > 0 else { return nil }
                labelLength = 0
            default:
                return nil
            }
            guard labelLength <= 63 else { return nil }
        }
        guard labelLength > 0 else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
