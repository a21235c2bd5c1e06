import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `exec -- CMD [ARG…]` (man page VERBS): CMD replaces this process with fresh
/// CHATGPT_ACCESS_TOKEN and CHATGPT_ACCOUNT_ID in its environment, never in argv.
extension Runner {
    func exec(_ g: GlobalOptions, _ argv: [String]) throws -> Outcome {
        let fresh = try freshCredential(g, GetOptions())
        var env = services.environment
        // EDGE: exec's environment; setenv(3) and the child need the token as a C string.
        env["CHATGPT_ACCESS_TOKEN"] = fresh.credential.accessToken.unsafeString()
        env["CHATGPT_ACCOUNT_ID"] = fresh.credential.accountId
        return .replaceProcess(argv: argv, environment: env)
    }
}
