import CredentialCore
import SystemRuntime
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
                   "which signed-in account (default: default); names are [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
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
        VerbSpec(name: "login", synopsis: "login [--device | --browser | --no-browser] [--clipboard]",
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
                    OptionSpec("--clipboard", "device code flow: also offer the code to the terminal's clipboard (OSC 52)"),
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
                 {"access_token","refresh_token","id_token"?}, and stores it. With --from-codex and
                 no PATH, reads Codex's Secret Service item (service "Codex Auth") instead of
                 auth.json when Codex's config.toml says cli_auth_credentials_store = "keyring"
                 (or "auto" and the item exists) or there is no auth.json; says which it read.
                 """,
                 options: [
                    OptionSpec("--from-codex", value: "PATH", valueOptional: true,
                               "import Codex's credential: PATH, else $CODEX_HOME/auth.json (~/.codex/auth.json) or Codex's Secret Service item"),
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
        VerbSpec(name: "usage", synopsis: "usage [--json] [--all]",
                 summary: "show the plan and rate-limit windows (5 h, 7 d) of the signed-in account",
                 details: """
                 Asks the ChatGPT backend (GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage) with a fresh
                 token, as get would; on a 401, refreshes once and retries once. Shows the plan, one
                 line per window with used percent and when it resets, credits when reported, and
                 additional limits under their names; a bar on a terminal, plain lines otherwise
                 (also with NO_COLOR or TERM=dumb). No tokens are printed.
                 With --all, every profile found in either store, up to 4 asked at once: one block
                 per profile in name order (JSON: {"profiles":{"NAME":{…} | {"error","exit"}}}); a
                 failing profile shows its error and exit code without hiding the others. Exit 0
                 when every profile answered, else the code of the first failing profile by name.
                 """,
                 options: [
                    OptionSpec("--json", "print {plan, allowed, limit_reached, windows, credits, additional_limits} as JSON"),
                    OptionSpec("--all", "every profile found in either store, side by side"),
                 ]),
        VerbSpec(name: "refresh", synopsis: "refresh [--all] [--if-idle DAYS]",
                 summary: "refresh now, as get --force-refresh would, printing nothing on stdout",
                 details: """
                 Refreshes the profile's tokens now through the one owner (the lock, reserve before
                 spend, the shared back-off) and prints one line per profile on stderr: refreshed,
                 not idle (skipped), or the error. Exit status: the worst of the profiles', in the
                 order 5, 3, 1, 4, 0; with --all and no profile found, 0. A daily systemd user timer
                 runs 'refresh --all --if-idle 7' (see KEEP AN IDLE SIGN-IN ALIVE in the man page).
                 """,
                 options: [
                    OptionSpec("--all", "every profile found in either store"),
                    OptionSpec("--if-idle", value: "DAYS", "only profiles last refreshed at least DAYS days ago (1-365)"),
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

    /// One or two examples per verb, shown at the end of its `--help` (the man page's EXAMPLES
    /// has more).
    public static let examples: [String: [String]] = [
        "login": ["\(programName) login    # device code over SSH, else the browser",
                  "\(programName) --profile work login --device"],
        "get": ["curl -H \"Authorization: Bearer $(\(programName) get)\" \\\n     -H \"ChatGPT-Account-ID: $(\(programName) get --account-id)\" URL",
                "eval \"$(\(programName) get --env)\""],
        "store": ["\(programName) store --from-codex",
                  "\(programName) store < tokens.json"],
        "erase": ["\(programName) erase",
                  "\(programName) --profile work erase --no-revoke"],
        "status": ["\(programName) status", "\(programName) status --all --json"],
        "usage": ["\(programName) usage", "\(programName) usage --json | jq '.windows[]'"],
        "exec": ["\(programName) exec -- sh -c \\\n    'curl -H \"Authorization: Bearer $CHATGPT_ACCESS_TOKEN\" URL'"],
        "refresh": ["\(programName) refresh", "\(programName) refresh --all --if-idle 7   # what the daily timer runs"],
        "serve": ["systemctl --user enable --now chatgpt-credential.socket   # on demand",
                  "curl --unix-socket \"$XDG_RUNTIME_DIR/chatgpt-credential/broker.sock\" \\\n     http://localhost/v1/token"],
        "help": ["\(programName) help get"],
    ]

    /// Help is wrapped to the terminal's width, 80 columns off a terminal (the man page's "Help").
    public static let defaultWidth = 80

    static func wrap(_ text: String, width: Int, indent: Int = 0) -> String {
        TextWrap.wrap(text, width: width, indent: indent)
    }

    /// A paragraph of `details` (lines joined) wrapped to `width`.
    static func paragraph(_ text: String, width: Int) -> String {
        text.split(separator: "\n\n", omittingEmptySubsequences: true)
            .map { wrap($0.split(separator: "\n").joined(separator: " "), width: width) }
            .joined(separator: "\n\n")
    }

    static func optionHead(_ o: OptionSpec) -> String {
        var head = o.short.map { "-\($0), " } ?? "    "
        head += o.long
        if let v = o.value { head += o.valueOptional ? " [\(v)]" : " \(v)" }
        return head
    }

    /// `  -v, --verbose             diagnostics…`: the head, then the help wrapped in a column
    /// of its own (on the next line when the head is too long).
    static func optionLine(_ o: OptionSpec, width: Int = defaultWidth) -> String {
        let head = "  " + optionHead(o)
        var help = o.help
        if let env = o.env { help += " [$\(env)\(o.envValue.map { "=" + $0 } ?? "")]" }
        let column = 30
        let body = wrap(help, width: width, indent: column)
        if head.count < column - 1 { return head.padded(to: column) + body.dropFirst(column) }
        return head + "\n" + body
    }

    public static func mainHelp(width: Int = defaultWidth) -> String {
        let width = max(40, width)
        var s = wrap("\(programName) — ChatGPT sign-in and fresh bearer tokens for scripts and tools", width: width) + "\n"
        s += """

        Usage: \(programName) [GLOBAL OPTIONS] VERB [VERB OPTIONS]

        Verbs:

        """
        for v in verbs {
            s += ("  " + v.name).padded(to: 12) + wrap(v.summary, width: width, indent: 12).dropFirst(12) + "\n"
        }
        s += "\nGlobal options (before or after the verb):\n"
        for o in globalOptions { s += optionLine(o, width: width) + "\n" }
        s += "\nEnvironment:\n"
        let environment = [
            ("CHATGPT_CREDENTIAL_ISSUER", "OAuth issuer (default https://auth.openai.com; https, or http on loopback)"),
            ("CHATGPT_CREDENTIAL_BACKEND", "ChatGPT backend for usage (default https://chatgpt.com/backend-api; same rule)"),
            ("CHATGPT_CREDENTIAL_PASSPHRASE_FILE", "file store: encrypt with this passphrase (age scrypt)"),
            ("CHATGPT_CREDENTIAL_CACHE_TTL", "seconds a cached access token may be served (1-3600, default \(AccessCacheSettings.defaultTTL))"),
        ]
        for (name, help) in environment { s += "  " + name + "\n" + wrap(help, width: width, indent: 6) + "\n" }
        s += "  A variable set but empty counts as unset.\n\n"
        s += wrap("As git-credential-chatgpt it speaks git's credential protocol; as docker-credential-chatgpt, docker's.", width: width) + "\n\n"
        s += wrap("Exit codes: 0 ok, 1 failure, 2 usage, 3 login required, 4 temporary (retry later), 5 store problem (locked, unreadable, wrong key, corrupt, permissions).", width: width) + "\n"
        s += """

        Typical use:
          \(programName) login
          curl -H "Authorization: Bearer $(\(programName) get)" \\
               -H "ChatGPT-Account-ID: $(\(programName) get --account-id)" \\
               https://chatgpt.com/backend-api/...


        """
        s += wrap("Run '\(programName) VERB --help' for a verb's options; see also chatgpt-credential(1).", width: width) + "\n"
        return s
    }

    public static func verbHelp(_ v: VerbSpec, width: Int = defaultWidth) -> String {
        let width = max(40, width)
        var s = "Usage:" + wrap("\(programName) [GLOBAL OPTIONS] \(v.synopsis)", width: width, indent: 7).dropFirst(6) + "\n\n"
        s += wrap(v.summary.prefix(1).uppercased() + v.summary.dropFirst() + ".", width: width) + "\n"
        if !v.details.isEmpty { s += "\n" + paragraph(v.details, width: width) + "\n" }
        if !v.options.isEmpty {
            s += "\nOptions:\n"
            for o in v.options { s += optionLine(o, width: width) + "\n" }
        }
        if let examples = examples[v.name], !examples.isEmpty {
            s += "\nExamples:\n"
            for e in examples { s += e.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n" }
        }
        let globals = globalOptions.filter { $0.long != "--help" && $0.long != "--version" }.map { o in
            o.value.map { "\(o.long) \($0)" } ?? o.long
        }
        s += "\n" + wrap("Global options: " + globals.joined(separator: ", ") + " (see: \(programName) --help).", width: width, indent: 2).dropFirst(2) + "\n"
        return s
    }
}

extension String {
    /// `self` and spaces up to `columns` (at least one space when it is already that long).
    func padded(to columns: Int) -> String { self + String(repeating: " ", count: Swift.max(1, columns - count)) }
}
