import CredentialCore
import Secrets

/// The `store` verb's input (man page, `store`): one credential on stdin, at most 64 KiB, either Codex's
/// `auth.json` or a bare token set such as the issuer's token response. Pure: no I/O of its own.
public enum TokenImport {
    public static let maxBytes = 64 * 1024

    public enum Format: Equatable, Sendable {
        /// `{"OPENAI_API_KEY":…,"tokens":{…},"last_refresh":…,"auth_mode"?}`
        case codexAuthFile
        /// `{"access_token","refresh_token","id_token"?}` (other members ignored)
        case tokens
    }

    public struct Result: Equatable, Sendable {
        public var document: TokenDocument
        public var format: Format
    }

    /// Parses and validates `store` input for `profile`. Throws `CredentialError.badInput` (exit 2)
    /// with a one-line reason for anything else.
    ///
    ///     let imported = try TokenImport.parse(stdinBytes, profile: p)   // then save imported.document
    ///
    /// The input becomes the tokens' buffer: each token is a range of it (a token with JSON
    /// escapes is decoded into a guarded buffer of its own), so no token becomes a String.
    ///
    /// The account id comes from the input when present (Codex's `tokens.account_id`), else from
    /// the tokens' claims. `last_refresh` from a Codex file is kept when it is a valid time not in
    /// the future; otherwise, and for a bare token set, the time of the last refresh is unknown (0):
    /// importing is not refreshing, and the 60 s no-refresh-loop guard must not hold it back.
    public static func parse(_ input: consuming SecretBytes, profile: Profile, now: Int64 = Clock.now()) throws -> Result {
        guard input.count <= maxBytes else { throw bad("the input is larger than 64 KiB") }
        guard input.withUnsafeBytes({ $0.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) }) else {
            throw bad("no input; pipe Codex's auth.json or {\"access_token\",\"refresh_token\"} into it")
        }
        let value: JSONValue
        do {
            value = try JSON.parse(sharing: SecretToken.Buffer(input), maxBytes: maxBytes)
        } catch let e as JSONError {
            throw bad("the input is not JSON (\(e.reason) at byte \(e.offset))")
        }
        guard value.isObject else { throw bad("the input is not a JSON object") }

        if let tokensValue = value["tokens"] {
            if value["access_token"] != nil || value["refresh_token"] != nil {
                throw bad("the input has both \"tokens\" and top-level tokens; give one credential")
            }
            guard tokensValue.isObject else {
                if tokensValue == .null {
                    throw bad("this Codex auth.json holds no ChatGPT sign-in (API-key mode?); run 'codex login' first or sign in with: \(profile.loginCommand)")
                }
                throw bad("\"tokens\" is not a JSON object")
            }
            let access = try token(tokensValue, "access_token", prefix: "tokens.")
            let refresh = try token(tokensValue, "refresh_token", prefix: "tokens.")
            let id = try optionalToken(tokensValue, "id_token", prefix: "tokens.")
            let account = try optionalName(tokensValue, "account_id", prefix: "tokens.")
            var when: Int64 = 0
            if let s = value["last_refresh"]?.stringValue, let t = Clock.parseRFC3339(s), t > 0, t <= now { when = t }
            var doc = TokenDocument.fromTokens(accessToken: access, refreshToken: refresh, idToken: id,
                                               accountId: account, now: when)
            doc.lastRefresh = when
            return Result(document: doc, format: .codexAuthFile)
        }

        let access = try token(value, "access_token", prefix: "")
        let refresh = try token(value, "refresh_token", prefix: "")
        let id = try optionalToken(value, "id_token", prefix: "")
        let account = try optionalName(value, "account_id", prefix: "")
        var doc = TokenDocument.fromTokens(accessToken: access, refreshToken: refresh, idToken: id,
                                           accountId: account, now: now)
        doc.lastRefresh = 0
        return Result(document: doc, format: .tokens)
    }

    private static func bad(_ reason: String) -> CredentialError {
        .badInput("store: \(reason)")
    }

    /// A required token: a non-empty string of printable ASCII without spaces.
    private static func token(_ object: JSONValue, _ key: String, prefix: String) throws -> SecretToken {
        guard let v = object[key], v != .null else {
            throw bad("missing \(prefix)\(key); expected Codex's auth.json or {\"access_token\",\"refresh_token\",\"id_token\"?}")
        }
        return try check(v, prefix + key)
    }

    /// An optional token: absent or null → nil; otherwise checked like a required one.
    private static func optionalToken(_ object: JSONValue, _ key: String, prefix: String) throws -> SecretToken? {
        guard let v = object[key], v != .null else { return nil }
        return try check(v, prefix + key)
    }

    /// An optional name checked like a token (the account id, a String: it is no secret).
    private static func optionalName(_ object: JSONValue, _ key: String, prefix: String) throws -> String? {
        guard let v = object[key], v != .null else { return nil }
        guard var s = v.stringValue else { throw bad("\(prefix)\(key) is not a string") }
        try s.withUTF8 { try check(UnsafeRawBufferPointer($0), prefix + key) }
        return s
    }

    private static func check(_ v: JSONValue, _ name: String) throws -> SecretToken {
        guard let t = v.secretValue else { throw bad("\(name) is not a string") }
        try t.withUnsafeBytes { try check($0, name) }
        return t
    }

    /// The characters of a token (its UTF-8, decoded where it lies).
    private static func check(_ utf8: UnsafeRawBufferPointer, _ name: String) throws {
        if utf8.isEmpty { throw bad("\(name) is empty") }
        for scalar in UTF8Scalars(utf8) {
            switch scalar.value {
            case 0: throw bad("\(name) contains a NUL byte")
            case 0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C, 0x85, 0xA0: throw bad("\(name) contains whitespace")
            case 0x01..<0x20, 0x7F, 0x80..<0xA0: throw bad("\(name) contains a control character")
            case 0xA1...: throw bad("\(name) contains a non-ASCII character")
            default: continue
            }
        }
    }
}

/// Codex's own credential file, the usual source for `store`.
public enum CodexAuthFile {
    /// `$CODEX_HOME/auth.json` when `CODEX_HOME` is set and non-empty, else
    /// `$HOME/.codex/auth.json`; nil when neither variable is usable.
    ///
    ///     CodexAuthFile.defaultPath(codexHome: nil, home: "/home/ann")  // "/home/ann/.codex/auth.json"
    public static func defaultPath(codexHome: String?, home: String?) -> String? {
        if let codexHome, !codexHome.isEmpty { return join(codexHome, "auth.json") }
        if let home, !home.isEmpty { return join(home, ".codex/auth.json") }
        return nil
    }

    private static func join(_ dir: String, _ name: String) -> String {
        var d = Substring(dir)
        while d.count > 1, d.last == "/" { d.removeLast() }
        return d == "/" ? "/" + name : d + "/" + name
    }

    /// One line for stderr after a successful `store`: the refresh token is single-use and now
    /// held twice; whichever tool refreshes second is signed out (`refresh_token_reused`).
    public static let sharedRefreshTokenWarning =
        "warning: chatgpt-credential and the tool these tokens came from (e.g. Codex) now hold the same single-use refresh token; only one of them may keep refreshing it, or the other gets signed out (refresh_token_reused); run 'codex login' to give Codex its own sign-in"
}
