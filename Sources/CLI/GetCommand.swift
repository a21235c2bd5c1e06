import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `get` on the command line: its formats and options and their parsing (man page VERBS).
struct GetCommand: Verb {
    static let spec = VerbSpec(
        name: "get",
        summary: "print a fresh access token (refreshing first when needed)",
        details: """
        Prints the access token and a newline on stdout, and nothing else. Refreshes first
        when the token expires within max(\(TokenDocument.refreshMargin), --min-ttl) seconds. Never reads stdin.
        An answer that cannot be written to stdout is exit 1.
        """,
        options: [
            OptionSpec("--account-id", exclusiveGroup: "format", "print the ChatGPT account id instead"),
            OptionSpec("--id-token", exclusiveGroup: "format", "print the id token instead"),
            OptionSpec("--json", exclusiveGroup: "format", "print {access_token, account_id, expires_at, email, plan} as JSON"),
            OptionSpec("--header", exclusiveGroup: "format", "print 'Authorization: Bearer TOKEN' and 'ChatGPT-Account-ID: ID'"),
            OptionSpec("--env", exclusiveGroup: "format", "print export CHATGPT_ACCESS_TOKEN=… and export CHATGPT_ACCOUNT_ID=…, shell-quoted, for eval"),
            OptionSpec("--min-ttl", value: "SECONDS", "refresh unless the token is valid this long (default and minimum: \(TokenDocument.refreshMargin))"),
            OptionSpec("--force-refresh", "refresh now, whatever the expiry"),
        ],
        examples: ["curl -H \"Authorization: Bearer $(\(CommandLineSpec.programName) get)\" \\\n     -H \"ChatGPT-Account-ID: $(\(CommandLineSpec.programName) get --account-id)\" URL",
                   "eval \"$(\(CommandLineSpec.programName) get --env)\""],
        wordsFromOtherTools: ["token": "", "print": "", "show": ""])

    var options = GetOptions()

    init(_ a: VerbArguments) throws {
        var o = GetOptions()
        o.format = try a.oneOf([("--account-id", OutputFormat.accountId), ("--id-token", .idToken), ("--json", .json),
                                ("--header", .header), ("--env", .env)]) ?? .token
        if let raw = a.value("--min-ttl") {
            guard let n = Int64(raw), n >= 0, n <= 366 * 86400 else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(raw, limit: 40))' for --min-ttl: a number of seconds from 0 to 31622400")
            }
            o.require(ttl: n)
        }
        o.forceRefresh = a.has("--force-refresh")
        options = o
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.get(g, options) }
    static var clientMode: ClientModePolicy<Self> {
        .throughTheBroker { verb, runner, g, broker in try runner.getThroughBroker(broker, g, verb.options) }
    }
    var keyringAdvice: KeyringAdvice { .useTheFileCopy }
}

/// `get [FORMAT] [--min-ttl SECONDS] [--force-refresh]` (man page VERBS): a fresh token through the
/// one owner, printed in exactly the requested format and nothing else on stdout.
extension Runner {
    func get(_ g: GlobalOptions, _ options: GetOptions) throws -> Outcome {
        let fresh = try freshCredential(g, options)
        try console.out(try GetFormatter.format(fresh.credential, options.format, profile: g.profile))
        return .exit(0)
    }
}

/// What `get` prints.
public enum OutputFormat: String, Sendable {
    case token, accountId = "account-id", idToken = "id-token", json, header, env
}

public struct GetOptions: Sendable, Equatable {
    public var format: OutputFormat = .token
    public var minTTL: Int64 = TokenDocument.refreshMargin
    public var forceRefresh = false
    /// The --min-ttl the caller gave, if any: what a stored token must still satisfy to be printed
    /// when a refresh fails. Without it, "not yet expired" is enough (man page REFRESH).
    public var requiredTTL: Int64?
    public init(format: OutputFormat = .token, minTTL: Int64 = TokenDocument.refreshMargin, forceRefresh: Bool = false, requiredTTL: Int64? = nil) {
        self.format = format; self.minTTL = minTTL; self.forceRefresh = forceRefresh; self.requiredTTL = requiredTTL
    }

    /// `--min-ttl N` (the broker's `min_ttl=N`): refresh unless the token is valid N more seconds,
    /// and never serve one inside the refresh margin (man page REFRESH).
    public mutating func require(ttl n: Int64) {
        minTTL = max(TokenDocument.refreshMargin, n)
        requiredTTL = n
    }

    /// What the refresh decision needs of these options.
    public var freshness: Freshness { Freshness(minTTL: minTTL, forceRefresh: forceRefresh, requiredTTL: requiredTTL) }
}
