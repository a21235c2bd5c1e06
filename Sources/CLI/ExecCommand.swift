import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `exec` on the command line: everything after its own options is the command (man page VERBS).
struct ExecCommand: Verb {
    static let spec = VerbSpec(
        name: "exec",
        summary: "run CMD with CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID set",
        details: """
        Runs CMD with fresh CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment
        and exits with its exit status. The token never appears in argv.
        """,
        options: [],
        examples: ["\(CommandLineSpec.programName) exec -- sh -c \\\n    'curl -H \"Authorization: Bearer $CHATGPT_ACCESS_TOKEN\" URL'"],
        operands: .command,
        wordsFromOtherTools: ["run": ""])

    /// The command and its arguments.
    var argv: [String]

    init(_ a: VerbArguments) throws {
        guard !a.operands.isEmpty else { throw CredentialError.usage("exec needs a command: chatgpt-credential exec -- CMD [ARG…]") }
        argv = a.operands
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.exec(g, argv) }
    static var clientMode: ClientModePolicy<Self> {
        .throughTheBroker { verb, runner, g, broker in try runner.execThroughBroker(broker, g, verb.argv) }
    }
    var keyringAdvice: KeyringAdvice { .useTheFileCopy }
}

/// `exec -- CMD [ARG…]` (man page VERBS): CMD replaces this process with fresh
/// CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment, never in argv.
extension Runner {
    func exec(_ g: GlobalOptions, _ argv: [String]) throws -> Outcome {
        try replaceProcess(argv, with: try freshCredential(g, GetOptions()).credential, profile: g.profile)
    }

    /// `exec`'s program with the credential in its environment, here and in client mode: the
    /// token checked as `get` checks what it prints (never empty, only token-safe bytes).
    func replaceProcess(_ argv: [String], with credential: ServedCredential, profile: Profile) throws -> Outcome {
        let token = try GetFormatter.safe(credential.accessToken, "access token", profile: profile)
        var inherited = services.settings.childEnvironment
        inherited["CHATGPT_ACCOUNT_ID"] = credential.accountId
        // The token goes from its guarded buffer into the child's envp without a String.
        let image = ProcessImage(argv: argv, inherited: inherited)
        image.setSecret("CHATGPT_ACCESS_TOKEN", to: token)
        return .replaceProcess(image)
    }
}
