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

public enum OutputFormat: String, Sendable {
    case token, accountId = "account-id", idToken = "id-token", json, header, env
}

public enum LoginMode: String, Sendable { case device, browser, paste = "no-browser" }

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

public struct GetOptions: Sendable, Equatable {
    public var format: OutputFormat = .token
    public var minTTL: Int64 = TokenDocument.refreshMargin
    public var forceRefresh = false
    /// The --min-ttl the caller gave, if any: what a stored token must still satisfy to be printed
    /// when a refresh fails. Without it, "not yet expired" is enough (man page REFRESH).
    public var requiredTTL: Int64?
    public init(format: OutputFormat = .token, minTTL: Int64 = TokenDocument.refreshMargin, forceRefresh: Bool = false, requiredTTL: Int64? = nil) {
        self.format = format; self.minTTL = minTTL; self.forceRefresh = forceRefresh; self.requiredTTL = requiredTTL
    }

    /// What the refresh decision needs of these options.
    public var freshness: Freshness { Freshness(minTTL: minTTL, forceRefresh: forceRefresh, requiredTTL: requiredTTL) }
}

/// `serve [--socket PATH] [--idle-exit SECONDS] [--allow-uid UID]…`.
public struct ServeOptions: Sendable, Equatable {
    /// nil: `broker.sock` in the user's runtime directory (or the socket systemd passes).
    public var socket: String?
    /// nil: 0 (never) when started by hand, 60 under socket activation.
    public var idleExit: Int?
    public var allowedUIDs: [UInt32] = []
    public init(socket: String? = nil, idleExit: Int? = nil, allowedUIDs: [UInt32] = []) {
        self.socket = socket; self.idleExit = idleExit; self.allowedUIDs = allowedUIDs
    }
}

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
