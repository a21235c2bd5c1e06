import CredentialCore
import SystemRuntime

/// `help [VERB]` and `--help`/`--version` (man page VERBS): the text comes from `CommandLineSpec`.
enum HelpCommand {
    static let spec = VerbSpec(
        name: "help", synopsis: "help [VERB]", summary: "show help for a verb",
        examples: ["\(CommandLineSpec.programName) help get"],
        operands: .upTo(1),
        parse: { a in
            if let v = a.operands.first, CommandLineSpec.verb(v) == nil {
                throw CredentialError.usage("unknown verb '\(Sanitize.line(v, limit: 60))'" + Suggestion.forVerb(v))
            }
            return .help(verb: a.operands.first)
        })
}

extension Runner {
    func help(_ verb: String?) throws -> Outcome {
        let width = console.outputWidth
        if let verb, let spec = CommandLineSpec.verb(verb) { try console.out(CommandLineSpec.verbHelp(spec, width: width)) }
        else { try console.out(CommandLineSpec.mainHelp(width: width)) }
        return .exit(0)
    }

    func version() throws -> Outcome {
        try console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
        return .exit(0)
    }
}
