import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import AccessCache
import Secrets

/// The command line as data: every verb, every option, its help text. The parser, `--help`, the
/// completions and the man page's synopsis and option lists (`make docs`) all read these tables.
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
    /// Options of one group exclude each other (`get --json | --env`); the verb's `init` says which
    /// was chosen. A group's options stand next to each other in the verb's list.
    public let exclusiveGroup: String?
    /// What a shell offers for the value, besides `choices`.
    public let completion: ValueCompletion

    /// What the completions offer for an option's value.
    public enum ValueCompletion: Sendable, Equatable {
        /// Nothing (a number, an address): the person types it.
        case none
        /// File names.
        case files
        /// The profiles `status --all --json` lists.
        case profiles
    }

    init(_ long: String, short: Character? = nil, value: String? = nil, valueOptional: Bool = false,
         choices: [String] = [], env: String? = nil, envValue: String? = nil, repeatable: Bool = false,
         exclusiveGroup: String? = nil, completion: ValueCompletion = .none, _ help: String) {
        self.long = long; self.short = short; self.value = value; self.valueOptional = valueOptional
        self.choices = choices; self.env = env; self.envValue = envValue; self.help = help
        self.repeatable = repeatable; self.exclusiveGroup = exclusiveGroup; self.completion = completion
    }
}

/// One verb as data (its `Verb` type's `spec`): what `--help`, the completions and the man page
/// read, and the options and operands the parser accepts for it.
public struct VerbSpec: Sendable {
    public let name: String
    public let summary: String
    public let details: String
    public let options: [OptionSpec]
    /// One or two examples, shown at the end of its `--help` (the man page's EXAMPLES has more).
    public let examples: [String]
    /// Operands it takes besides its options.
    package let operands: Operands
    /// Words other tools use for this verb's job (gh, codex, docker: `logout`, `token`), each with
    /// the options that do it here ("" for none): the typo hints point them here; they are not aliases.
    package let wordsFromOtherTools: [String: String]

    package enum Operands: Sendable, Equatable {
        case none
        /// One optional operand, a verb's name: `help [VERB]`.
        case verbName
        /// The whole rest of the command line, everything after its own options or after `--`:
        /// `exec -- CMD [ARG…]`.
        case command
    }

    init(name: String, summary: String, details: String = "", options: [OptionSpec] = [],
         examples: [String], operands: Operands = .none, wordsFromOtherTools: [String: String] = [:]) {
        self.name = name; self.summary = summary; self.details = details
        self.options = options; self.examples = examples; self.operands = operands
        self.wordsFromOtherTools = wordsFromOtherTools
    }

    /// Its options, one element each, but the options of an exclusive group together, in order.
    package var optionGroups: [[OptionSpec]] {
        var groups: [[OptionSpec]] = []
        for o in options {
            if let g = o.exclusiveGroup, let last = groups.last?.last, last.exclusiveGroup == g { groups[groups.count - 1].append(o) }
            else { groups.append([o]) }
        }
        return groups
    }

    /// `get [--account-id | --id-token | --json | --header | --env] [--min-ttl SECONDS] [--force-refresh]`:
    /// its `--help`'s usage line, from its options and operands.
    public var synopsis: String {
        var s = name
        for group in optionGroups {
            s += " [" + group.map(CommandLineSpec.optionWithValue).joined(separator: " | ") + "]"
            if group.count == 1, group[0].repeatable { s += "…" }
        }
        switch operands {
        case .none: break
        case .verbName: s += " [VERB]"
        case .command: s += " -- CMD [ARG…]"
        }
        return s
    }
}

/// What `ArgumentParser` collected for a verb: its options by long name (a flag's value is nil),
/// the values of a repeatable one in order, and its operands.
public struct VerbArguments: Sendable {
    var values: [String: String?] = [:]
    var lists: [String: [String]] = [:]
    var operands: [String] = []

    /// Whether the option was given.
    func has(_ option: String) -> Bool { values[option] != nil }
    /// The option's value, when it was given with one.
    func value(_ option: String) -> String? { values[option] ?? nil }
    /// Every value of a repeatable option, in order.
    func all(_ option: String) -> [String] { lists[option] ?? [] }

    /// At most one of `choices` (their options) was given: its value, else nil.
    func oneOf<T>(_ choices: [(String, T)]) throws -> T? {
        let chosen = choices.filter { has($0.0) }
        if chosen.count > 1 { throw CredentialError.usage("choose one of " + choices.map(\.0).joined(separator: ", ")) }
        return chosen.first?.1
    }
}

public enum CommandLineSpec {
    public static let programName = "chatgpt-credential"
    public static let version = "0.2.0"

    public static let globalOptions: [OptionSpec] = [
        OptionSpec("--profile", value: "NAME", env: "CHATGPT_CREDENTIAL_PROFILE", completion: .profiles,
                   "which signed-in account (default: default); names are [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
        OptionSpec("--store", value: "STORE", choices: StoreChoice.allCases.map(\.rawValue), env: "CHATGPT_CREDENTIAL_STORE",
                   "where tokens live: auto (default), secret-service or file"),
        OptionSpec("--protocol", value: "PROTOCOL", choices: WireProtocol.allCases.map(\.rawValue),
                   "how verbs read stdin and write stdout (default: plain, or from the program name)"),
        OptionSpec("--non-interactive", env: "CHATGPT_CREDENTIAL_NONINTERACTIVE",
                   "never prompt, never open a browser"),
        OptionSpec("--verbose", short: "v", env: "CHATGPT_CREDENTIAL_DEBUG", "diagnostics on stderr, secrets redacted"),
        OptionSpec("--no-cache", env: "CHATGPT_CREDENTIAL_CACHE", envValue: "off",
                   "neither read nor write the access cache in the kernel keyring"),
        OptionSpec("--broker", value: "unix:PATH", env: "CHATGPT_CREDENTIAL_BROKER",
                   "client mode: ask the broker on this socket instead of any store (\(clientModeVerbs), git/docker get)"),
        OptionSpec("--version", "print the version and exit"),
        OptionSpec("--help", short: "h", "show help (also after any verb)"),
    ]

    /// The global options that set something, as opposed to `--version` and `--help`, which
    /// print something and exit: what a verb's `--help` and the man page's synopsis list.
    package static var settingOptions: [OptionSpec] {
        globalOptions.filter { $0.long != "--help" && $0.long != "--version" }
    }

    /// Every verb, in the order `--help` lists them: the one list of verbs. Each is a `Verb` type
    /// in its own `…Command.swift`, its spec, parsing and behaviour next to each other.
    static let verbTypes: [any Verb.Type] = [
        LoginCommand.self, GetCommand.self, StoreCommand.self, EraseCommand.self, StatusCommand.self,
        UsageCommand.self, RefreshCommand.self, ExecCommand.self, ServeCommand.self, HelpCommand.self,
        VersionCommand.self, DoctorCommand.self,
    ]

    /// The verbs that work in client mode through the broker, for `--broker`'s help.
    static var clientModeVerbs: String {
        verbTypes.filter { $0.worksThroughTheBroker }.map { $0.spec.name }.joined(separator: ", ")
    }

    /// The verbs' specs, in that order.
    public static let verbs: [VerbSpec] = verbTypes.map { $0.spec }

    static func verbType(_ name: String) -> (any Verb.Type)? { verbTypes.first { $0.spec.name == name } }

    public static func verb(_ name: String) -> VerbSpec? { verbType(name)?.spec }

    /// Every long option the binary accepts.
    public static var allLongOptions: [String] {
        var seen: [String] = []
        for o in globalOptions + verbs.flatMap(\.options) where !seen.contains(o.long) { seen.append(o.long) }
        return seen
    }

    // MARK: help text

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

    /// `--min-ttl SECONDS`, `--from-codex [PATH]`, `--json`.
    static func optionWithValue(_ o: OptionSpec) -> String {
        guard let v = o.value else { return o.long }
        return o.long + (o.valueOptional ? " [\(v)]" : " \(v)")
    }

    static func optionHead(_ o: OptionSpec) -> String {
        (o.short.map { "-\($0), " } ?? "    ") + optionWithValue(o)
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
        s += wrap("Run '\(programName) VERB --help' for a verb's options; see also chatgpt-credential(1), and chatgpt-credential(7) for how a sign-in is kept.", width: width) + "\n"
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
        if !v.examples.isEmpty {
            s += "\nExamples:\n"
            for e in v.examples { s += e.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n" }
        }
        let globals = settingOptions.map { o in
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
