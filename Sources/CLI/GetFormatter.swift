import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// The output formats of `get` (man page, `get`): stdout carries only the answer. The answer is
/// built in guarded memory, the tokens copied into it from their own buffers, and written to
/// stdout from there (`Console.out(_: SecretBytes)`): no format turns a token into a String.
public enum GetFormatter {
    public static func format(_ d: ServedCredential, _ format: OutputFormat, profile: Profile = .default) throws -> SecretBytes {
        switch format {
        case .token:
            return line([], try safe(d.accessToken, "access token", profile: profile), [])
        case .accountId:
            return SecretBytes(copying: (try safe(d.accountId, "account id", profile: profile) + "\n").utf8)
        case .idToken:
            return line([], try safe(d.idToken, "id token", profile: profile), [])
        case .json:
            let token: JSONValue = .secret(try safe(d.accessToken, "access token", profile: profile))
            return JSON.serializeSecret(.object([("access_token", token)] + jsonMembersAfterToken(d)), suffix: "\n")
        case .header:
            let token = try safe(d.accessToken, "access token", profile: profile)
            let account = try safe(d.accountId, "account id", profile: profile)
            return line(["Authorization: Bearer "], token, ["\nChatGPT-Account-ID: ", account])
        case .env:
            // The account id may be unknown (empty) but never carries control bytes to a terminal.
            let account = d.accountId.isEmpty ? "" : try safe(d.accountId, "account id", profile: profile)
            let token = try safe(d.accessToken, "access token", profile: profile)
            // `export`, as `ssh-agent -s` prints: `eval "$(… get --env)"` makes both visible to the
            // shell's children too (man page, `get --env`).
            return line(["export CHATGPT_ACCESS_TOKEN="], token, ["\nexport CHATGPT_ACCOUNT_ID=", shellQuote(account)], shellQuoted: true)
        }
    }

    /// What `get --json` prints after the access token, in order.
    private static func jsonMembersAfterToken(_ d: ServedCredential) -> [(String, JSONValue)] {
        [("account_id", .string(d.accountId)),
         ("expires_at", .string(Clock.rfc3339(d.expiresAt))),
         ("email", .string(d.email)),
         ("plan", .string(d.plan))]
    }

    /// `get --json`'s answer as the text before the access token, the token and the text after
    /// it: the same bytes `format(d, .json)` writes, for an answer sent from where the token lies
    /// (the broker's cached answers) without a guarded buffer made for it. The text around the
    /// token holds no secret. Nil when the token has a byte JSON escapes (a token is visible
    /// ASCII, so `"` or `\`): then `format` writes it.
    public static func jsonAroundToken(_ d: ServedCredential, profile: Profile = .default) throws -> TextAroundToken? {
        let token = try safe(d.accessToken, "access token", profile: profile)
        guard token.withUnsafeBytes({ JSON.needsNoEscape($0) }) else { return nil }
        // The other members follow the token's, after its closing quote and a comma.
        var after: [UInt8] = []
        after.reserveCapacity(160)
        after.append(contentsOf: #"","#.utf8)
        JSON.writeMembers(jsonMembersAfterToken(d), into: &after)
        after.append(contentsOf: "}\n".utf8)
        return (Array(#"{"access_token":""#.utf8), token, after)
    }

    /// `before`, the token, `after` and a line feed, in one guarded buffer of exactly that size;
    /// `shellQuoted`: the token single-quoted as `shellQuote` quotes a String.
    static func line(_ before: [String], _ token: SecretToken, _ after: [String], shellQuoted: Bool = false) -> SecretBytes {
        let quote = UInt8(ascii: "'"), escaped = "'\\''"
        let quotes = shellQuoted ? token.withUnsafeBytes { $0.count(where: { $0 == quote }) } : 0
        let texts = before + after + ["\n"]
        var out = SecretBytes(capacity: texts.reduce(token.count) { $0 + $1.utf8.count } + (shellQuoted ? 2 + 3 * quotes : 0))
        for t in before { out.append(utf8: t) }
        if shellQuoted { out.append(quote) }
        token.withUnsafeBytes {
            for b in $0 {
                if shellQuoted && b == quote { out.append(utf8: escaped) } else { out.append(b) }
            }
        }
        if shellQuoted { out.append(quote) }
        for t in after { out.append(utf8: t) }
        out.append(utf8: "\n")
        return out
    }

    /// Refuses to print a value that could break a header or a shell line.
    static func safe(_ value: String, _ what: String, profile: Profile) throws -> String {
        guard !value.isEmpty else { throw missing(what, profile) }
        guard Sanitize.isTokenSafe(value) else { throw unsafe(what, profile) }
        return value
    }

    static func safe(_ token: SecretToken, _ what: String, profile: Profile) throws -> SecretToken {
        guard !token.isEmpty else { throw missing(what, profile) }
        guard Sanitize.isTokenSafe(token) else { throw unsafe(what, profile) }
        return token
    }

    private static func missing(_ what: String, _ profile: Profile) -> CredentialError {
        .failure("the stored credential has no \(what); sign in again: \(profile.loginCommand)")
    }

    private static func unsafe(_ what: String, _ profile: Profile) -> CredentialError {
        .storeCorrupt("the stored \(what) contains characters a token cannot have; sign in again: \(profile.loginCommand)")
    }

    /// POSIX single-quoting: safe for `eval`.
    public static func shellQuote(_ s: String) -> String {
        "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
