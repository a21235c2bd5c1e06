import CredentialCore
import Secrets

/// docker's credential-helper wire format (docker/docker-credential-helpers): `get` and `erase`
/// read a bare server URL on stdin, `store` reads `{"ServerURL","Username","Secret"}`, answers are
/// JSON on stdout. Pure: no I/O of its own.
///
/// docker prints a helper's errors from stdout and expects exit 1 for them; the not-found answer is
/// exactly `credentials not found in native keychain`.
public enum DockerCredentialProtocol {
    /// Most bytes accepted on stdin for any verb.
    public static let maxInputBytes = 64 * 1024
    /// The exact message docker recognises as "no credential" (without the line feed).
    public static let notFoundMessage = "credentials not found in native keychain"
    /// What `get` prints on stdout, with exit 1, for a server that is not ours.
    public static let notFoundOutput = notFoundMessage + "\n"
    /// The key `list` reports the credential under.
    public static let listServerURL = "https://chatgpt.com"

    public enum Verb: String, Sendable, CaseIterable {
        case get, store, erase, list, version
        public init?(argument: String) { self.init(rawValue: argument) }
    }

    /// The server URL of a `get` or `erase` request: stdin trimmed of surrounding whitespace.
    /// Throws `badInput` when it is empty, too large, not UTF-8, or contains control bytes.
    ///
    ///     let url = try DockerCredentialProtocol.parseServerURL(stdinBytes)
    public static func parseServerURL(_ input: borrowing SecretBytes) throws -> String {
        guard input.count <= maxInputBytes else {
            throw CredentialError.badInput("docker credential input is larger than \(maxInputBytes) bytes")
        }
        return try input.withUnsafeBytes { try serverURL($0[...]) }
    }

    private static func serverURL(_ bytes: Slice<UnsafeRawBufferPointer>) throws -> String {
        var slice = bytes
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        while let f = slice.first, isSpace(f) { slice.removeFirst() }
        while let l = slice.last, isSpace(l) { slice.removeLast() }
        guard !slice.isEmpty else { throw CredentialError.badInput("no credentials server URL") }
        guard let text = String(validating: slice, as: UTF8.self) else {
            throw CredentialError.badInput("the server URL is not valid UTF-8")
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw CredentialError.badInput("the server URL contains a control character")
        }
        return text
    }

    /// True when the server URL names chatgpt.com (or a subdomain) or api.openai.com by the shared
    /// host rule (default port only). Accepts `chatgpt.com`, `chatgpt.com:443/x`, `https://chatgpt.com`,
    /// `https://api.openai.com/v1`; the scheme, when present, must be https. Refuses userinfo
    /// (`https://chatgpt.com@evil.com`), hosts that only appear in the path or query
    /// (`https://evil.com/chatgpt.com`), look-alikes (`chatgpt.com.evil.com`), another port
    /// (`https://chatgpt.com:8080`) and anything else
    /// `ChatGPTHosts` refuses.
    public static func isChatGPTServer(_ serverURL: String) -> Bool {
        guard let host = host(of: serverURL) else { return false }
        return ChatGPTHosts.isAllowed(host)
    }

    /// The `host[:port]` of a server URL with or without scheme, or nil when it has a scheme other
    /// than https, a userinfo part, or no host.
    static func host(of serverURL: String) -> String? {
        var rest = Substring(serverURL)
        // A scheme is `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` before "://"; a "://" further on
        // (in a path or query) does not make one.
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let scheme = rest[..<colon]
            let isScheme = !scheme.isEmpty && scheme.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "+" || $0 == "-" || $0 == "."
            }
            if isScheme {
                guard scheme.lowercased() == "https" else { return nil }
                rest = rest[rest.index(colon, offsetBy: 3)...]
            }
        }
        // The authority ends at the first '/', '?' or '#' (RFC 3986); a backslash also ends it in
        // browsers' URL parsers, so it is left inside and refused by the host rule.
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<end]
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        return String(authority)
    }

    /// The `get` answer: `{"ServerURL":URL,"Username":ACCOUNT_ID,"Secret":ACCESS_TOKEN}` and a line
    /// feed, echoing the URL as docker sent it, in guarded memory (the token never becomes a
    /// String). Throws `storeCorrupt`, naming `profile`'s sign-in, when the token or account id
    /// holds anything but printable ASCII.
    ///
    ///     try console.out(try DockerCredentialProtocol.getAnswer(serverURL: url, credential: served, profile: p))
    public static func getAnswer(serverURL: String, credential: ServedCredential, profile: Profile) throws -> SecretBytes {
        guard Sanitize.isTokenSafe(credential.accessToken) else {
            throw CredentialError.storeCorrupt("the stored access token contains characters that cannot be sent; sign in again: \(profile.loginCommand)")
        }
        guard credential.accountId.isEmpty || Sanitize.isTokenSafe(credential.accountId) else {
            throw CredentialError.storeCorrupt("the stored account id contains characters that cannot be sent; sign in again: \(profile.loginCommand)")
        }
        let body: JSONValue = .object([
            ("ServerURL", .string(serverURL)),
            ("Username", .string(credential.accountId)),
            ("Secret", .secret(credential.accessToken)),
        ])
        return JSON.serializeSecret(body, suffix: "\n")
    }

    /// The `list` answer: `{"https://chatgpt.com":"ACCOUNT_ID"}` when signed in (nil document →
    /// `{}`), and a line feed.
    public static func listAnswer(accountId: String?) -> String {
        guard let accountId else { return "{}\n" }
        return JSON.serialize(.object([(listServerURL, .string(accountId))])) + "\n"
    }
}

/// The body of `docker-credential-… store`. The verb is a no-op for us (the credential is managed
/// by `login`); parsing only checks that docker sent what it should.
public struct DockerStoreRequest: Equatable, Sendable {
    public var serverURL: String
    public var username: String
    public var secret: SecretToken

    /// Throws `badInput` unless the input is a JSON object (≤ 64 KiB) whose `ServerURL` is a
    /// non-empty string; `Username` and `Secret`, when present, must be strings.
    ///
    ///     _ = try DockerStoreRequest.parse(stdinBytes)   // then exit 0
    public static func parse(_ input: borrowing SecretBytes) throws -> DockerStoreRequest {
        guard input.count <= DockerCredentialProtocol.maxInputBytes else {
            throw CredentialError.badInput("docker credential input is larger than \(DockerCredentialProtocol.maxInputBytes) bytes")
        }
        let value: JSONValue
        do { value = try JSON.parse(input, maxBytes: DockerCredentialProtocol.maxInputBytes) } catch let e as JSONError {
            throw CredentialError.badInput("docker store input is not JSON (\(e.reason) at byte \(e.offset))")
        }
        guard value.isObject else { throw CredentialError.badInput("docker store input is not a JSON object") }
        func field(_ key: String) throws -> String {
            guard let v = value[key], v != .null else { return "" }
            guard let s = v.stringValue else { throw CredentialError.badInput("docker store input: \(key) is not a string") }
            return s
        }
        let url = try field("ServerURL")
        guard !url.isEmpty else { throw CredentialError.badInput("no credentials server URL") }
        let secret: SecretToken
        switch value["Secret"] {
        case nil, .null?: secret = SecretToken()
        case .secret(let t)?: secret = t
        default: throw CredentialError.badInput("docker store input: Secret is not a string")
        }
        return DockerStoreRequest(serverURL: url, username: try field("Username"), secret: secret)
    }
}
