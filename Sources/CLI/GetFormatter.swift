import CredentialCore
import Stores
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// The output formats of `get` (SPEC "Verbs"): stdout carries only the answer.
public enum GetFormatter {
    public static func format(_ d: TokenDocument, _ format: OutputFormat, profile: Profile = .default) throws -> String {
        func safe(_ value: String, _ what: String) throws -> String { try Self.safe(value, what, profile: profile) }
        switch format {
        case .token:
            return try safe(d.accessToken, "access token") + "\n"
        case .accountId:
            return try safe(d.accountId, "account id") + "\n"
        case .idToken:
            return try safe(d.idToken, "id token") + "\n"
        case .json:
            let v: JSONValue = .object([
                ("access_token", .string(try safe(d.accessToken, "access token"))),
                ("account_id", .string(d.accountId)),
                ("expires_at", .string(Clock.rfc3339(d.expiresAt))),
                ("email", .string(d.email)),
                ("plan", .string(d.plan)),
            ])
            return JSON.serialize(v) + "\n"
        case .header:
            return "Authorization: Bearer \(try safe(d.accessToken, "access token"))\nChatGPT-Account-ID: \(try safe(d.accountId, "account id"))\n"
        case .env:
            // The account id may be unknown (empty) but never carries control bytes to a terminal.
            let account = d.accountId.isEmpty ? "" : try safe(d.accountId, "account id")
            return "CHATGPT_ACCESS_TOKEN=\(shellQuote(try safe(d.accessToken, "access token")))\nCHATGPT_ACCOUNT_ID=\(shellQuote(account))\n"
        }
    }

    /// Refuses to print a value that could break a header or a shell line.
    static func safe(_ value: String, _ what: String, profile: Profile) throws -> String {
        guard !value.isEmpty else { throw CredentialError.failure("the stored credential has no \(what); sign in again: \(profile.loginCommand)") }
        guard Sanitize.isTokenSafe(value) else { throw CredentialError.storeCorrupt("the stored \(what) contains characters a token cannot have; sign in again: \(profile.loginCommand)") }
        return value
    }

    /// POSIX single-quoting: safe for `eval`.
    public static func shellQuote(_ s: String) -> String {
        "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
