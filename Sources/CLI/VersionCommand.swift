import CredentialCore
import SystemRuntime

/// `version` (man page VERBS): what `--version` prints, as a verb too (as `gh version` and docker's
/// helpers' `version`).
struct VersionCommand: Verb {
    static let spec = VerbSpec(name: "version", summary: "print the version",
                               examples: ["\(CommandLineSpec.programName) version"])

    init(_ a: VerbArguments) throws {}

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.version() }
    static var clientMode: ClientModePolicy<Self> { .needsNoCredential }
}

extension Runner {
    /// `version` and `--version`.
    func version() throws -> Outcome {
        try console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
        return .exit(0)
    }
}
