import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `get [FORMAT] [--min-ttl SECONDS] [--force-refresh]` (man page VERBS): a fresh token through the
/// one owner, printed in exactly the requested format and nothing else on stdout.
extension Runner {
    func get(_ g: GlobalOptions, _ options: GetOptions) throws -> Outcome {
        let fresh = try freshCredential(g, options)
        try console.out(try GetFormatter.format(fresh.credential, options.format, profile: g.profile))
        return .exit(0)
    }
}
