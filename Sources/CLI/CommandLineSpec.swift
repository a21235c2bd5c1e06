import CredentialCore
import Stores
import OAuth
import HelperProtocols
import Credentials
import AccessCache
import Secrets

/// The command line as data: every verb, every option, its help text. The parser, `--help`,
/// and the test that keeps the man page and completions in step all read this one table.
public struct OptionSpec: Sendable {
    public let long: String
    public let short: Character?
    /// Placeholder for the value (`NAME`), nil for a flag.
    public let value: String?
    /// A value that may be omitted (`--from-codex [PATH]`).
    public let valueOptional: Bool
    public let choices: [String]
    public let env: String?
    /// The value of `env` that means this flag (`CHATGPT_CREDENTIAL_CACHE=off`); nil when any
    /// value is the option's value or a yes/no.
    public let envValue: String?
    public let help: String
    /// May be given more than once (`--allow-uid`); each value is kept.
    public let repeatable: Bool

    init(_ long: String, short: Character? = nil, value: String? = nil, valueOptional: Bool = false,
         choices: [String] = [], env: String? = nil, envValue: String? = nil, repeatable: Bool = false, _ help: String) {
        self.long = long; self.short = short; self.value = value; self.valueOptional = valueOptional
        self.choices = choices; self.env = env; self.envValue = envValue; self.help = help
        self.repeatable = repeatable
    }
}

public struct VerbSpec: Sendable {
    public let name: String
    public let synopsis: String
    public let summary: String
    public let details: String
    public let options: [OptionSpec]
}

public enum CommandLineSpec {
    public static let programName = "chatgpt-credential"
    public static let version = "0.2.0"

    public static let globalOptions: [OptionSpec] = [
        OptionSpec("--profile", value: "NAME", env: "CHATGPT_CREDENTIAL_PROFILE",
                   "which signed-in account (default: default); names are [A-Za-z0-9._-]{1,64}"),
        OptionSpec("--store", value: "STORE", choices: StoreChoice.allCases.map(\.rawValue), env: "CHATGPT_CREDENTIAL_STORE",
                   "where tokens live: auto (default), secret-service or file"),
        OptionSpec("--protocol", value: "PROTOCOL", choices: ["plain", "git", "docker"],
                   "how verbs read stdin and write stdout (default: plain, or from the program name)"),
        OptionSpec("--non-interactive", env: "CHATGPT_CREDENTIAL_NONINTERACTIVE",
                   "never prompt, never open a browser"),
        OptionSpec("--verbose", short: "v", env: "CHATGPT_CREDENTIAL_DEBUG", "diagnostics on stderr, secrets redacted"),
        OptionSpec("--no-cache", env: "CHATGPT_CREDENTIAL_CACHE", envValue: "off",
                   "neither read nor write the access cache in the kernel keyring"),
        OptionSpec("--broker", value: "unix:PATH", env: "CHATGPT_CREDENTIAL_BROKER",
                   "client mode: ask the broker on this socket instead of any store (get, exec, usage, status, git/docker get)"),
        OptionSpec("--version", "print the version and exit"),
        OptionSpec("--help", short: "h", "show help (also after any verb)"),
    ]

    public static let verbs: [VerbSpec] = [
        VerbSpec(name: "login", synopsis: "login [--device | --browser | --no-browser]",
                 summary: "sign in and store the tokens",
                 details: """
                 Signs in with OAuth and stores the tokens. Without an option, uses the device code
                 flow over SSH (SSH_CONNECTION/SSH_TTY set) or without a display, and the browser
                 flow otherwise.
                 """,
                 options: [
                    OptionSpec("--device", "device code flow: shows a URL and a code to enter on any device"),
                    OptionSpec("--browser", "browser flow with a loopback listener on 127.0.0.1:1455 (1457 when busy)"),
                    OptionSpec("--no-browser", "print the sign-in URL, then paste the address the browser ended on"),
                 ]),
        VerbSpec(name: "get", synopsis: "get [--account-id | --id-token | --json | --header | --env] [--min-ttl SECONDS] [--force-refresh]",
                 summary: "print a fresh access token (refreshing first when needed)",
                 details: """
                 Prints the access token and a newline on stdout, and nothing else. Refreshes first
                 when the token expires within max(\(TokenDocument.refreshMargin), --min-ttl) seconds. Never reads stdin.
                 An answer that cannot be written to stdout is exit 1.
                 """,
                 options: [
                    OptionSpec("--account-id", "print the ChatGPT account id instead"),
                    OptionSpec("--id-token", "print the id token instead"),
                    OptionSpec("--json", "print {access_token, account_id, expires_at, email, plan} as JSON"),
                    OptionSpec("--header", "print 'Authorization: Bearer TOKEN' and 'ChatGPT-Account-ID: ID'"),
                    OptionSpec("--env", "print CHATGPT_ACCESS_TOKEN=… and CHATGPT_ACCOUNT_ID=…, shell-quoted, for eval"),
                    OptionSpec("--min-ttl", value: "SECONDS", "refresh unless the token is valid this long (default and minimum: \(TokenDocument.refreshMargin))"),
                    OptionSpec("--force-refresh", "refresh now, whatever the expiry"),
                 ]),
        VerbSpec(name: "store", synopsis: "store [--from-codex [PATH]]",
                 summary: "store a credential read from stdin (Codex auth.json or token JSON)",
                 details: """
                 Reads one credential (at most 64 KiB) from stdin: Codex's auth.json shape or
                 {"access_token","refresh_token","id_token"?}, and stores it.
                 """,
                 options: [
                    OptionSpec("--from-codex", value: "PATH", valueOptional: true,
                               "import from Codex's auth.json (default $CODEX_HOME/auth.json or ~/.codex/auth.json)"),
                 ]),
        VerbSpec(name: "erase", synopsis: "erase [--no-revoke]",
                 summary: "revoke the refresh token and remove the stored credential",
                 details: """
                 Removes the profile's credential from every store that holds a copy, damaged
                 copies included, revoking its refresh token at the issuer first (best effort,
                 10 s; not for a credential imported from Codex). Exit 0 when no copy remains,
                 5 naming a copy that could not be removed.
                 """,
                 options: [OptionSpec("--no-revoke", "do not contact the issuer; only remove the stored credential")]),
        VerbSpec(name: "status", synopsis: "status [--json] [--all]",
                 summary: "show who is signed in (no secrets)",
                 details: """
                 Shows email, plan, account id, expiry and store of the profile. Exit 0 when get
                 would succeed without a new sign-in, 3 when it would not (not signed in, or the
                 refresh token was rejected and the access token is no longer usable), 5 when a
                 store could not be read.
                 """,
                 options: [
                    OptionSpec("--json", "machine-readable output"),
                    OptionSpec("--all", "every profile found in either store"),
                 ]),
        VerbSpec(name: "usage", synopsis: "usage [--json]",
                 summary: "show the plan and rate-limit windows (5 h, 7 d) of the signed-in account",
                 details: """
                 Asks the ChatGPT backend (GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage) with a fresh
                 token, as get would; on a 401, refreshes once and retries once. Shows the plan, one
                 line per window with used percent and when it resets, credits when reported, and
                 additional limits under their names; a bar on a terminal, plain lines otherwise
                 (also with NO_COLOR or TERM=dumb). No tokens are printed.
                 """,
                 options: [
                    OptionSpec("--json", "print {plan, allowed, limit_reached, windows, credits, additional_limits} as JSON"),
                 ]),
        VerbSpec(name: "exec", synopsis: "exec -- CMD [ARG…]",
                 summary: "run CMD with CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID set",
                 details: """
                 Runs CMD with fresh CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment
                 and exits with its exit status. The token never appears in argv.
                 """,
                 options: []),
        VerbSpec(name: "serve", synopsis: "serve [--socket PATH] [--idle-exit SECONDS] [--allow-uid UID]…",
                 summary: "answer token requests over a UNIX socket (the broker)",
                 details: """
                 Answers HTTP/1.1 GET requests on a UNIX stream socket, for containers, sandboxes
                 and services: /v1/token?profile=NAME&min_ttl=SECONDS (what get --json prints),
                 /v1/usage?profile=NAME (what usage --json prints) and /v1/health. Every answer
                 goes through the same lock, access cache and refresh as get; the refresh token
                 never leaves. Only processes of this user (or of a uid given with --allow-uid)
                 are answered. One audit line per answer on stderr. Under systemd socket
                 activation it serves the socket it is given.
                 """,
                 options: [
                    OptionSpec("--socket", value: "PATH", "the socket to create (default: broker.sock in the runtime directory, see FILES)"),
                    OptionSpec("--idle-exit", value: "SECONDS", "exit 0 after this long without a connection (default 0 = never; 60 under socket activation)"),
                    OptionSpec("--allow-uid", value: "UID", repeatable: true, "also answer processes of this user id (repeatable)"),
                 ]),
        VerbSpec(name: "help", synopsis: "help [VERB]", summary: "show help for a verb", details: "", options: []),
    ]

    public static func verb(_ name: String) -> VerbSpec? { verbs.first { $0.name == name } }

    /// Every long option the binary accepts, for docs/completion drift tests.
    public static var allLongOptions: [String] {
        var seen: [String] = []
        for o in globalOptions + verbs.flatMap(\.options) where !seen.contains(o.long) { seen.append(o.long) }
        return seen
    }

    // MARK: help text

    static func optionLine(_ o: OptionSpec) -> String {
        var head = o.short.map { "-\($0), " } ?? "    "
        head += o.long
        if let v = o.value { head += o.valueOptional ? " [\(v)]" : " \(v)" }
        let pad = head.count < 28 ? String(repeating: " ", count: 28 - head.count) : "\n" + String(repeating: " ", count: 30)
        var line = "  " + head + pad + o.help
        if let env = o.env { line += " [$\(env)\(o.envValue.map { "=" + $0 } ?? "")]" }
        return line
    }

    public static func mainHelp() -> String {
        var s = """
        \(programName) — ChatGPT sign-in and fresh bearer tokens for scripts and tools

        Usage: \(programName) [GLOBAL OPTIONS] VERB [VERB OPTIONS]

        Verbs:

        """
        for v in verbs { s += "  " + v.name + String(repeating: " ", count: max(1, 10 - v.name.count)) + v.summary + "\n" }
        s += "\nGlobal options (before or after the verb):\n"
        for o in globalOptions { s += optionLine(o) + "\n" }
        s += """

        Environment:
          CHATGPT_CREDENTIAL_ISSUER      OAuth issuer (default https://auth.openai.com; https, or http on loopback)
          CHATGPT_CREDENTIAL_BACKEND     ChatGPT backend for usage (default https://chatgpt.com/backend-api; same rule)
          CHATGPT_CREDENTIAL_PASSPHRASE_FILE  file store: encrypt with this passphrase (age scrypt)
          CHATGPT_CREDENTIAL_CACHE_TTL   seconds a cached access token may be served (1-3600, default \(AccessCacheSettings.defaultTTL))

        As git-credential-chatgpt it speaks git's credential protocol; as
        docker-credential-chatgpt, docker's.

        Exit codes: 0 ok, 1 failure, 2 usage, 3 login required, 4 temporary (retry later),
        5 store problem (locked, unreadable, wrong key, corrupt, permissions).

        Typical use:
          \(programName) login
          curl -H "Authorization: Bearer $(\(programName) get)" https://chatgpt.com/backend-api/...

        Run '\(programName) VERB --help' for a verb's options; see also chatgpt-credential(1).

        """
        return s
    }

    public static func verbHelp(_ v: VerbSpec) -> String {
        var s = "Usage: \(programName) [GLOBAL OPTIONS] \(v.synopsis)\n\n\(v.summary.prefix(1).uppercased() + v.summary.dropFirst()).\n"
        if !v.details.isEmpty { s += "\n" + v.details + "\n" }
        if !v.options.isEmpty {
            s += "\nOptions:\n"
            for o in v.options { s += optionLine(o) + "\n" }
        }
        s += "\nGlobal options:\n"
        for o in globalOptions { s += optionLine(o) + "\n" }
        return s
    }
}
