import CredentialCore
import SystemRuntime
import Broker

/// A verb of the plain protocol, as one type in its own `CLI/…Command.swift`: its spec (name,
/// options and their values, help, examples), how it reads what `ArgumentParser` collected for it,
/// what it does, and what it does in client mode. `CommandLineSpec.verbTypes` registers it; the
/// parser, `Runner`, client mode, the typo hints, `--help`, the completions and the man page's
/// synopsis and option lists read that one list (ARCHITECTURE.md, "How to find your way").
/// git's and docker's protocol verbs are words of their wire formats, not verbs of this kind: they
/// keep their own tables (`GitCredentialProtocol.Verb`, `DockerCredentialProtocol.Verb`).
protocol Verb: Sendable {
    /// What `--help`, the completions and the man page say of it, and the options the parser accepts.
    static var spec: VerbSpec { get }
    /// Its options and operands, checked. Usage errors are `CredentialError.usage`, naming the bad word.
    init(_ arguments: VerbArguments) throws
    /// What it does, on the host.
    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome
    /// What it does with `--broker` (man page BROKER, Client mode). No default: each verb says.
    static var clientMode: ClientModePolicy<Self> { get }
    /// What a Secret Service failure's message adds for it (`Runner.advised`). Default: nothing.
    var keyringAdvice: KeyringAdvice { get }
    /// True for a server (`serve`), which stops by itself on a signal deferred during one client's
    /// refresh (exit 0) instead of ending with 128 + its number. Default: false.
    static var handlesDeferredSignals: Bool { get }
}

extension Verb {
    var keyringAdvice: KeyringAdvice { .none }
    static var handlesDeferredSignals: Bool { false }

    /// It runs as on the host, with or without a broker, before the issuer setting is checked.
    static var needsNoCredential: Bool {
        if case .needsNoCredential = clientMode { return true }
        return false
    }

    /// It reads the credential through the broker in client mode.
    static var worksThroughTheBroker: Bool {
        if case .throughTheBroker = clientMode { return true }
        return false
    }

    /// It is refused in client mode.
    static var refusedInClientMode: Bool {
        if case .refused = clientMode { return true }
        return false
    }

    /// In client mode: as on the host, refused (exit 2), or through the broker.
    func runInClientMode(_ runner: Runner, _ g: GlobalOptions, _ broker: BrokerClient) throws -> Outcome {
        switch Self.clientMode {
        case .needsNoCredential: return try run(runner, g)
        case .refused: throw runner.refused(Self.spec.name, broker.address)
        case .throughTheBroker(let run): return try run(self, runner, g, broker)
        }
    }
}

/// A verb's policy in client mode (man page BROKER, Client mode).
enum ClientModePolicy<V: Verb>: Sendable {
    /// It touches no credential, store or network (`help`): it runs as on the host.
    case needsNoCredential
    /// It changes or serves the credential (`login`, `erase`, `serve`…): only the broker's side may,
    /// so it is refused, exit 2, before anything is read.
    case refused
    /// It reads the credential, or checks things, through the broker instead of any store.
    case throughTheBroker(@Sendable (V, Runner, GlobalOptions, BrokerClient) throws -> Outcome)
}
