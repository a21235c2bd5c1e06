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
        var child = services.settings.childEnvironment
        // EDGE: exec's environment; setenv(3) and the child need the token as a C string.
        child["CHATGPT_ACCESS_TOKEN"] = fresh.document.accessToken.unsafeString()
        child["CHATGPT_ACCOUNT_ID"] = fresh.document.accountId
        return .replaceProcess(argv: argv, childEnvironment: child)
    }
}
