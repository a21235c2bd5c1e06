import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import AccessCache
import Secrets
import Broker

/// What the user asked for, fully parsed and validated. Produced by `ArgumentParser`.
public enum WireProtocol: String, Sendable, CaseIterable { case plain, git, docker }

public struct GlobalOptions: Sendable {
    public var profile: Profile = .default
    /// The profile was named (`--profile`, `CHATGPT_CREDENTIAL_PROFILE`), not the default: verbs
    /// that can act on every profile (`sink list`, `sink remove`) keep to it then.
    public var profileNamed = false
    public var store: StoreChoice = .auto
    public var wire: WireProtocol = .plain
    public var nonInteractive = false
    public var verbose = false
    /// `--no-cache`, `CHATGPT_CREDENTIAL_CACHE`, `CHATGPT_CREDENTIAL_CACHE_TTL`.
    public var cache = AccessCacheSettings()
    /// `--broker unix:PATH`, `CHATGPT_CREDENTIAL_BROKER`: client mode (ask the broker, touch no store).
    package var broker: BrokerAddress?
}

/// What the command line asks for: a registered verb (one of `CommandLineSpec.verbTypes`) with its
/// options checked, made by `ArgumentParser` through the verb's `init`; `--version`; or a word of
/// git's or docker's protocol.
enum Command: Sendable {
    case verb(any Verb)
    case version
    /// A git/docker protocol verb (any word; unknown ones are ignored by the protocol).
    case helper(WireProtocol, verb: String)

    /// The registered verb, if it is one.
    var verb: (any Verb)? {
        if case .verb(let v) = self { return v }
        return nil
    }

    /// `--version` and verbs such as `help` touch no credential: they run before anything is checked.
    var needsNoCredential: Bool {
        switch self {
        case .verb(let v): return type(of: v).needsNoCredential
        case .version: return true
        case .helper: return false
        }
    }
}

public struct Invocation: Sendable {
    public var globals: GlobalOptions
    var command: Command
}
