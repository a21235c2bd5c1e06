import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `exec` on the command line: everything after its own options is the command (man page VERBS).
enum ExecCommand {
    static let spec = VerbSpec(
        name: "exec", synopsis: "exec -- CMD [ARG…]",
        summary: "run CMD with CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID set",
        details: """
        Runs CMD with fresh CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment
        and exits with its exit status. The token never appears in argv.
        """,
        options: [],
        examples: ["\(CommandLineSpec.programName) exec -- sh -c \\\n    'curl -H \"Authorization: Bearer $CHATGPT_ACCESS_TOKEN\" URL'"],
        operands: .command,
        parse: { a in
            guard !a.operands.isEmpty else { throw CredentialError.usage("exec needs a command: chatgpt-credential exec -- CMD [ARG…]") }
            return .exec(a.operands)
        })
}

/// `exec -- CMD [ARG…]` (man page VERBS): CMD replaces this process with fresh
/// CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment, never in argv.
extension Runner {
    func exec(_ g: GlobalOptions, _ argv: [String]) throws -> Outcome {
        let fresh = try freshCredential(g, GetOptions())
        var child = services.settings.childEnvironment
        // EDGE: exec's environment; setenv(3) and the child need the token as a C string.
        child["CHATGPT_ACCESS_TOKEN"] = fresh.credential.accessToken.unsafeString()
        child["CHATGPT_ACCOUNT_ID"] = fresh.credential.accountId
        return .replaceProcess(argv: argv, childEnvironment: child)
    }
}
