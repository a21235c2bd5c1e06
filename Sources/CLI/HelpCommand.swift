import CredentialCore
import SystemRuntime

/// `help [VERB]` and `--help` (man page VERBS): the text comes from `CommandLineSpec`.
struct HelpCommand: Verb {
    static let spec = VerbSpec(
        name: "help", summary: "show help for a verb",
        examples: ["\(CommandLineSpec.programName) help get"],
        operands: .verbName)

    /// nil: the main help.
    var verb: String?
    /// `chatgpt-credential` with no verb: the short help on stderr, exit 2 (man page, "Help").
    var short = false

    init(_ a: VerbArguments) throws {
        if let v = a.operands.first, CommandLineSpec.verb(v) == nil {
            throw CredentialError.usage("unknown verb '\(Sanitize.line(v, limit: 60))'" + Suggestion.forVerb(v), namesItsHelp: true)
        }
        verb = a.operands.first
    }

    /// `--help`, after a verb or not.
    init(verb: String?) { self.verb = verb }

    /// No verb at all: the short help.
    static let short = { var h = HelpCommand(verb: nil); h.short = true; return h }()

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome {
        if short { return runner.shortHelp() }
        return try runner.help(verb)
    }
    static var clientMode: ClientModePolicy<Self> { .needsNoCredential }
}

extension Runner {
    func shortHelp() -> Outcome {
        for line in CommandLineSpec.shortHelp(width: console.errorWidth).split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            console.err(String(line))
        }
        return .exit(2)
    }

    func help(_ verb: String?) throws -> Outcome {
        let width = console.outputWidth
        if let verb, let spec = CommandLineSpec.verb(verb) { try console.out(CommandLineSpec.verbHelp(spec, width: width)) }
        else { try console.out(CommandLineSpec.mainHelp(width: width)) }
        return .exit(0)
    }
}
