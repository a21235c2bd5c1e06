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
        /// A subcommand, one of these words, then at most one operand: `sink add|list|remove|run [PATH]`.
        case subcommands([String])
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
        case .subcommands(let words): s += " " + words.joined(separator: "|") + " [PATH]"
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
                   "which signed-in account (default: default); up to 64 letters, digits, '.', '_' or '-'"),
        OptionSpec("--store", value: "STORE", choices: StoreChoice.allCases.map(\.rawValue), env: "CHATGPT_CREDENTIAL_STORE",
                   "where tokens live (default: auto)"),
        OptionSpec("--protocol", value: "PROTOCOL", choices: WireProtocol.allCases.map(\.rawValue),
                   "how verbs read and write (default: plain)"),
        OptionSpec("--non-interactive", env: "CHATGPT_CREDENTIAL_NONINTERACTIVE",
                   "never prompt, never open a browser"),
        OptionSpec("--verbose", short: "v", env: "CHATGPT_CREDENTIAL_DEBUG", "diagnostics on stderr, secrets redacted"),
        OptionSpec("--no-cache", env: "CHATGPT_CREDENTIAL_CACHE", envValue: "off",
                   "skip the access cache in the kernel keyring"),
        OptionSpec("--broker", value: "unix:PATH", env: "CHATGPT_CREDENTIAL_BROKER",
                   "client mode: ask the broker at PATH, no store"),
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
        SinkCommand.self, VersionCommand.self, DoctorCommand.self,
    ]

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

    /// Help is wrapped to the terminal's width, at most 80 columns, and 80 off a terminal (the
    /// man page's "Help"); never narrower than 40.
    public static let defaultWidth = 80

    static func helpWidth(_ width: Int) -> Int { min(defaultWidth, max(40, width)) }

    /// `Usage: chatgpt-credential [GLOBAL OPTIONS] WORDS`, continued under its first word.
    static func usageLine(_ words: String, width: Int) -> String {
        "Usage:" + wrap("\(programName) [GLOBAL OPTIONS] \(words)", width: width, indent: 7).dropFirst(6) + "\n"
    }

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
    /// An option that takes one of a few words shows them (`--protocol plain|git|docker`), never a
    /// placeholder or a pattern (man page, "Help").
    static func optionWithValue(_ o: OptionSpec) -> String {
        guard let placeholder = o.value else { return o.long }
        let v = o.choices.isEmpty ? placeholder : o.choices.joined(separator: "|")
        return o.long + (o.valueOptional ? " [\(v)]" : " \(v)")
    }

    static func optionHead(_ o: OptionSpec) -> String {
        (o.short.map { "-\($0), " } ?? "    ") + optionWithValue(o)
    }

    /// `  -v, --verbose             diagnostics…`: the head, then the help wrapped in a column
    /// of its own (on the next line when the head is too long).
    static func optionLine(_ o: OptionSpec, width: Int = defaultWidth, withVariable: Bool = true) -> String {
        let head = "  " + optionHead(o)
        var help = o.help
        if withVariable, let env = o.env { help += " [$\(env)\(o.envValue.map { "=" + $0 } ?? "")]" }
        let column = 30
        let body = wrap(help, width: width, indent: column)
        if head.count < column - 1 { return head.padded(to: column) + body.dropFirst(column) }
        return head + "\n" + body
    }

    /// The verbs the short help lists, the most used first: the first six of these that are
    /// registered (man page, "Help").
    static let mostUsedVerbs = ["login", "get", "status", "doctor", "usage", "exec", "refresh", "erase"]

    /// `  login     sign in and store the tokens`, wrapped.
    static func verbLine(_ v: VerbSpec, width: Int) -> String {
        ("  " + v.name).padded(to: 12) + wrap(v.summary, width: width, indent: 12).dropFirst(12) + "\n"
    }

    /// What `chatgpt-credential` alone prints on stderr (exit 2): the usage line, the six most used
    /// verbs and where to read more, in at most 15 lines of 80 columns.
    public static func shortHelp(width: Int = defaultWidth) -> String {
        let width = helpWidth(width)
        var s = usageLine("VERB [VERB OPTIONS]", width: width) + "\nMost used verbs:\n"
        for name in mostUsedVerbs.filter({ verb($0) != nil }).prefix(6) { s += verbLine(verb(name)!, width: width) }
        s += "\n" + wrap("All verbs and options: \(programName) --help; a verb's: \(programName) VERB --help; more: man \(programName).", width: width) + "\n"
        return s
    }

    /// `--help`: every verb, the global options, where to read more; at most 40 lines of 80 columns
    /// (man page, "Help"). The options' variables are named in one paragraph, not on each line.
    public static func mainHelp(width: Int = defaultWidth) -> String {
        let width = helpWidth(width)
        var s = wrap("\(programName) — ChatGPT sign-in and fresh bearer tokens for scripts", width: width) + "\n"
        s += "\n" + usageLine("VERB [VERB OPTIONS]", width: width) + "\nVerbs:\n"
        for v in verbs { s += verbLine(v, width: width) }
        s += "\nGlobal options (before or after the verb):\n"
        for o in globalOptions { s += optionLine(o, width: width, withVariable: false) + "\n" }
        let variables = globalOptions.compactMap(\.env) + ["CHATGPT_CREDENTIAL_ISSUER", "CHATGPT_CREDENTIAL_BACKEND",
                                                          "CHATGPT_CREDENTIAL_PASSPHRASE_FILE", "CHATGPT_CREDENTIAL_CACHE_TTL"]
        let prefix = "CHATGPT_CREDENTIAL_"
        s += "\n" + wrap("Environment: \(prefix)* (" + variables.map { String($0.dropFirst(prefix.count)) }.joined(separator: ", ")
                         + "); empty is unset.", width: width) + "\n"
        s += wrap("Named git-credential-chatgpt or docker-credential-chatgpt: their protocol.", width: width) + "\n"
        s += wrap("Exit: 0 ok, 1 failure, 2 usage, 3 sign in again, 4 retry later, 5 store problem.", width: width) + "\n"
        s += wrap("More: \(programName) VERB --help; man 1 and 7 \(programName)", width: width) + "\n"
        return s
    }

    public static func verbHelp(_ v: VerbSpec, width: Int = defaultWidth) -> String {
        let width = helpWidth(width)
        var s = usageLine(v.synopsis, width: width) + "\n"
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
        let globals = settingOptions.map(optionWithValue)
        s += "\n" + wrap("Global options: " + globals.joined(separator: ", ") + " (see: \(programName) --help).", width: width, indent: 2).dropFirst(2) + "\n"
        return s
    }
}

extension String {
    /// `self` and spaces up to `columns` (at least one space when it is already that long).
    func padded(to columns: Int) -> String { self + String(repeating: " ", count: Swift.max(1, columns - count)) }
}
