import CredentialCore
import Secrets

/// git's credential-helper wire format (git-credential(1), "INPUT/OUTPUT FORMAT"): `key=value`
/// lines, split at the first `=`, ended by a blank line or EOF. Pure: no I/O of its own.
///
/// git ignores a helper's exit code, so the safety property is not "fail with 2" but "never print
/// a token for a host we did not mean": every malformed, ambiguous or oversized request leads to
/// no answer. Errors are `CredentialError.badInput` (exit 2 in plain use).
public enum GitCredentialProtocol {
    /// Longest line git itself accepts (65535 bytes), excluding the line feed.
    public static let maxLineBytes = 65535
    /// Most bytes read for one request, line feeds included: room for several lines of git's
    /// longest, while the input stays bounded.
    public static let maxTotalBytes = 1024 * 1024

    public enum Verb: String, Sendable, CaseIterable {
        case get, store, erase
        /// nil for any other word: git requires unknown verbs to be ignored (exit 0, no output).
        public init?(argument: String) { self.init(rawValue: argument) }
    }

    /// Parses a complete request already read into memory (at most `maxTotalBytes` are looked at;
    /// anything after the terminating blank line is ignored).
    public static func parse(_ bytes: [UInt8]) throws -> GitCredentialRequest {
        var reader = GitCredentialReader()
        _ = try reader.feed(bytes[...])
        return try reader.finish()
    }

    /// Reads a request from a byte source, asking for at most `maxTotalBytes + 1` bytes in all and
    /// stopping at the blank line (so an interactive terminal is not read to EOF).
    /// `readChunk(n)` returns up to `n` bytes, or an empty array at end of input.
    public static func read(_ readChunk: (_ maxCount: Int) throws -> [UInt8]) throws -> GitCredentialRequest {
        var reader = GitCredentialReader()
        while true {
            let want = min(4096, max(1, maxTotalBytes + 1 - reader.consumed))
            let chunk = try readChunk(want)
            if chunk.isEmpty { break }
            if try reader.feed(chunk[...]) { break }
        }
        return try reader.finish()
    }

    /// The `get` decision, before touching any store: true only for an https (or unspecified)
    /// protocol and a host allowed by `ChatGPTHosts`. The CLI must not load, unlock or refresh
    /// anything when this is false — just exit 0 with no output.
    public static func shouldAnswer(_ request: GitCredentialRequest) -> Bool {
        if let p = request.protocol, p.lowercased() != "https" { return false }
        guard let host = request.host else { return false }
        return ChatGPTHosts.isAllowed(host)
    }

    /// The complete stdout for `get` (in guarded memory), or nil when the request is not for us
    /// (print nothing, exit 0). Re-checks `shouldAnswer`. Throws `storeCorrupt`, naming
    /// `profile`'s sign-in, when the stored values cannot be sent safely.
    ///
    ///     if let out = try GitCredentialProtocol.answer(for: request, credential: served, profile: p) { write(out) }
    public static func answer(for request: GitCredentialRequest, credential: ServedCredential, profile: Profile) throws -> SecretBytes? {
        guard shouldAnswer(request) else { return nil }
        return try GitCredentialAnswer(credential: credential, request: request).formatted(profile: profile)
    }

    /// The `erase` decision: git is reporting that the token it sent was rejected. True only when
    /// the request is for one of our hosts and its `password` or `credential` equals the stored
    /// access token (compared in constant time); the CLI then drops the access token and keeps the
    /// refresh token. A late rejection of an older token, or any other host, changes nothing.
    public static func shouldDropAccessToken(request: GitCredentialRequest, accessToken stored: SecretToken) -> Bool {
        guard shouldAnswer(request), !stored.isEmpty else { return false }
        var match = false
        if let p = request.password, stored.equals(utf8: p) { match = true }
        if let c = request.credential, stored.equals(utf8: c) { match = true }
        return match
    }
}

/// What git asked about. Single-valued keys given twice make the request ambiguous and are
/// rejected (git never sends that; a request that does is not trusted).
public struct GitCredentialRequest: Equatable, Sendable {
    public var `protocol`: String?
    public var host: String?
    public var path: String?
    public var username: String?
    public var password: String?
    public var credential: String?
    public var authtype: String?
    /// Every `capability[]` value, in input order.
    public var capabilities: [String]

    public init(protocol: String? = nil, host: String? = nil, path: String? = nil, username: String? = nil,
                password: String? = nil, credential: String? = nil, authtype: String? = nil,
                capabilities: [String] = []) {
        self.protocol = `protocol`
        self.host = host
        self.path = path
        self.username = username
        self.password = password
        self.credential = credential
        self.authtype = authtype
        self.capabilities = capabilities
    }

    /// git 2.46+ announced `capability[]=authtype`: we may answer with `authtype`/`credential`.
    public var acceptsAuthtype: Bool { capabilities.contains("authtype") }
}

/// The `get` answer. Without the authtype capability (git ≤ 2.45, Debian 12's 2.39):
///
///     username=ACCOUNT_ID
///     password=ACCESS_TOKEN
///     password_expiry_utc=EXP
///
/// With it (git 2.46+), `capability[]=authtype` first, as git requires, then the bearer credential
/// instead of username/password:
///
///     capability[]=authtype
///     authtype=Bearer
///     credential=ACCESS_TOKEN
///     ephemeral=1
///     password_expiry_utc=EXP
///
/// `password_expiry_utc` is kept in both forms: git documents it for passwords ("git credential
/// fill ignores expired passwords") and applies it only to `password`, so with `credential` it is
/// inert for git itself, but `git credential fill` passes it on to its caller and it is the only
/// lifetime signal the protocol has. It is left out when the expiry is unknown (0).
/// `ephemeral=1` tells git not to hand the token to storage helpers.
public struct GitCredentialAnswer: Equatable, Sendable {
    public var accountId: String
    public var accessToken: SecretToken
    /// Unix seconds; 0 = unknown (the line is omitted).
    public var expiresAt: Int64
    public var useAuthtype: Bool

    public init(accountId: String, accessToken: SecretToken, expiresAt: Int64, useAuthtype: Bool) {
        self.accountId = accountId
        self.accessToken = accessToken
        self.expiresAt = expiresAt
        self.useAuthtype = useAuthtype
    }

    public init(credential: ServedCredential, request: GitCredentialRequest) {
        self.init(accountId: credential.accountId, accessToken: credential.accessToken,
                  expiresAt: credential.expiresAt, useAuthtype: request.acceptsAuthtype)
    }

    /// The lines for stdout, each ended by `\n`, in guarded memory (the token is copied from its
    /// buffer, never through a String). Throws `storeCorrupt`, naming `profile`'s sign-in, rather
    /// than emit a value that is empty or holds anything but printable ASCII (a newline or NUL
    /// would let a value inject further keys). In username/password form the account id is
    /// required: git would otherwise go on to prompt for a username.
    public func formatted(profile: Profile) throws -> SecretBytes {
        guard Sanitize.isTokenSafe(accessToken) else {
            throw CredentialError.storeCorrupt("the stored access token contains characters that cannot be sent; sign in again: \(profile.loginCommand)")
        }
        let before: String, after: String
        if useAuthtype {
            before = "capability[]=authtype\nauthtype=Bearer\ncredential="
            after = "\nephemeral=1\n"
        } else {
            guard Sanitize.isTokenSafe(accountId) else {
                throw CredentialError.storeCorrupt("the stored credential has no usable account id; sign in again: \(profile.loginCommand)")
            }
            before = "username=\(accountId)\npassword="
            after = "\n"
        }
        let expiry = expiresAt > 0 ? "password_expiry_utc=\(expiresAt)\n" : ""
        var out = SecretBytes(capacity: before.utf8.count + accessToken.count + after.utf8.count + expiry.utf8.count)
        out.append(utf8: before)
        accessToken.withUnsafeBytes { out.append($0) }
        out.append(utf8: after)
        out.append(utf8: expiry)
        return out
    }
}

/// Incremental, bounded reader behind `GitCredentialProtocol.parse`/`read`.
struct GitCredentialReader {
    private(set) var consumed = 0
    private var line: [UInt8] = []
    private var lineNumber = 0
    private var done = false
    private var request = GitCredentialRequest()
    private var seen = Set<String>()

    /// Feeds bytes; returns true once the terminating blank line has been seen.
    mutating func feed(_ bytes: ArraySlice<UInt8>) throws -> Bool {
        for b in bytes {
            if done { return true }
            consumed += 1
            if b == 0 {
                throw CredentialError.badInput("git credential input line \(lineNumber + 1) contains a NUL byte")
            }
            if b != 0x0A && line.count >= GitCredentialProtocol.maxLineBytes {
                throw CredentialError.badInput("git credential input line \(lineNumber + 1) is longer than \(GitCredentialProtocol.maxLineBytes) bytes")
            }
            if consumed > GitCredentialProtocol.maxTotalBytes {
                throw CredentialError.badInput("git credential input is larger than \(GitCredentialProtocol.maxTotalBytes / (1024 * 1024)) MiB")
            }
            if b == 0x0A {
                try endLine()
            } else {
                line.append(b)
            }
        }
        return done
    }

    /// End of input: a last line without a line feed still counts.
    mutating func finish() throws -> GitCredentialRequest {
        if !done && !line.isEmpty { try endLine() }
        done = true
        return request
    }

    private mutating func endLine() throws {
        lineNumber += 1
        var bytes = line
        line.removeAll(keepingCapacity: true)
        if bytes.last == 0x0D { bytes.removeLast() } // git's strbuf_getline accepts CRLF
        if bytes.isEmpty { done = true; return }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CredentialError.badInput("git credential input line \(lineNumber) is not valid UTF-8")
        }
        guard let eq = text.firstIndex(of: "=") else {
            throw CredentialError.badInput("git credential input line \(lineNumber) has no '='")
        }
        let key = String(text[..<eq])
        let value = String(text[text.index(after: eq)...])
        if key.hasSuffix("[]") {
            if key == "capability[]" { request.capabilities.append(value) }
            return // wwwauth[], state[], … may repeat and are not used
        }
        let known = ["protocol", "host", "path", "username", "password", "credential", "authtype"]
        guard known.contains(key) else { return } // unknown keys are ignored
        guard seen.insert(key).inserted else {
            throw CredentialError.badInput("git credential input gives '\(key)' more than once")
        }
        switch key {
        case "protocol": request.protocol = value
        case "host": request.host = value
        case "path": request.path = value
        case "username": request.username = value
        case "password": request.password = value
        case "credential": request.credential = value
        default: request.authtype = value
        }
    }
}
