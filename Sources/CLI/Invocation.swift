import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import AccessCache
import Secrets
import Broker

/// What the user asked for, fully parsed and validated. Produced by `ArgumentParser`.
public enum WireProtocol: String, Sendable { case plain, git, docker }

public struct GlobalOptions: Sendable {
    public var profile: Profile = .default
    public var store: StoreChoice = .auto
    public var wire: WireProtocol = .plain
    public var nonInteractive = false
    public var verbose = false
    /// `--no-cache`, `CHATGPT_CREDENTIAL_CACHE`, `CHATGPT_CREDENTIAL_CACHE_TTL`.
    public var cache = AccessCacheSettings()
    /// `--broker unix:PATH`, `CHATGPT_CREDENTIAL_BROKER`: client mode (ask the broker, touch no store).
    package var broker: BrokerAddress?
}

/// The verb asked for, with its options checked: made by the verb's `spec.parse` in its
/// `…Command.swift`, run by `Runner.dispatch`.
public enum Command: Sendable {
    case help(verb: String?)
    case version
    case login(LoginMode?, clipboard: Bool = false)
    case get(GetOptions)
    /// `fromCodex`: nil = read stdin; .some(nil) = default Codex path; .some(path).
    case store(fromCodex: String??)
    case erase(revoke: Bool)
    case status(json: Bool, all: Bool)
    case usage(json: Bool, all: Bool)
    case exec([String])
    /// `refresh [--all] [--if-idle DAYS]`: `ifIdleDays` nil = refresh whatever the age.
    case refresh(all: Bool, ifIdleDays: Int?)
    /// `serve`: the broker (man page BROKER).
    case serve(ServeOptions)
    /// A git/docker protocol verb (any word; unknown ones are ignored by the protocol).
    case helper(WireProtocol, verb: String)
}

public struct Invocation: Sendable {
    public var globals: GlobalOptions
    public var command: Command
}
