import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// Runs one parsed `Invocation`: the verbs of the plain protocol and the git/docker helper verbs.
/// It changes no stored credential itself (that is `CredentialOwner`, the one owner), decides
/// nothing about refreshing (`RefreshPolicy`) and nothing about exit codes
/// (`CredentialError.exitCode`); it formats answers and reports errors in one line.
public final class Runner {
    let console: Console
    let services: Services

    /// False for the broker's answers: a signal deferred during one client's refresh stops the
    /// server after that answer (`serve`), it does not turn the answer into an exit.
    var stopsOnDeferredSignal = true

    public init(console: Console, services: Services) {
        self.console = console
        self.services = services
    }

    /// Runs the invocation; every error becomes one stderr line and its exit code. A signal that
    /// arrived while a spent token's answer was being saved ends the run with 128 + its number.
    public func run(_ invocation: Invocation) -> Outcome {
        let g = invocation.globals
        do {
            // Client mode reaches nothing but the broker's socket: no issuer, no store.
            if let broker = g.broker { return try clientMode(invocation.command, g, broker) }
            if !invocation.command.needsNoCredential {
                // A non-loopback http:// issuer is refused before anything could reach the network.
                _ = try services.settings.issuer.get()
            }
            let outcome = try dispatch(invocation.command, g)
            // The broker acts on a deferred signal itself (it stops after that answer, exit 0).
            if let verb = invocation.command.verb, type(of: verb).handlesDeferredSignals { return outcome }
            return SignalDeferral.deferredSignal.map { DeferredSignal($0).outcome } ?? outcome
        } catch let s as DeferredSignal {
            return s.outcome
        } catch let e as CredentialError {
            report(advised(e, invocation.command, g), g)
            return SignalDeferral.deferredSignal.map { DeferredSignal($0).outcome } ?? .exit(e.exitCode)
        } catch {
            console.err("chatgpt-credential: \(Sanitize.line("\(error)"))")
            return .exit(1)
        }
    }

    /// A signal deferred during the spend-to-save window (man page, REFRESH): the tokens are
    /// saved; the run ends with 128 + its number and prints nothing more on stdout.
    struct DeferredSignal: Error {
        let signal: Int32
        init(_ signal: Int32) { self.signal = signal }
        var outcome: Outcome { .exit(128 + signal) }
    }

    /// Called once the owner has returned from anything that may have spent a token, before
    /// anything is printed: a signal deferred meanwhile ends the run now.
    /// `error`: what the owner threw, said on stderr (never stdout, whatever the wire) first.
    func stopIfSignalled(after error: Error? = nil) throws {
        guard stopsOnDeferredSignal, let n = SignalDeferral.deferredSignal else { return }
        if let e = error as? CredentialError { console.err("chatgpt-credential: " + e.message) }
        throw DeferredSignal(n)
    }

    /// An error found before a verb could run (the environment's settings, argv): reported as
    /// `report` would under the protocol argv names; the exit status.
    public static func reportBeforeRunning(_ e: CredentialError, arguments: [String], console: Console) -> Int32 {
        guard ArgumentParser.wireNamed(by: arguments) == .docker else {
            console.err("chatgpt-credential: " + e.message)
            return e.exitCode
        }
        try? console.out(e.message + "\n")
        return 1 // docker's helpers: every error on stdout, exit 1 (man page PROTOCOLS, docker)
    }

    func report(_ e: CredentialError, _ g: GlobalOptions) {
        switch g.wire {
        case .docker:
            // docker's helpers report errors on stdout (docker-credential-helpers convention).
            try? console.out(e.message + "\n")
        case .plain, .git:
            console.err("chatgpt-credential: " + e.message + profileHint(e, g) + doctorHint(e))
        }
    }

    /// A keyring that could not be reached or did not answer (no session bus, nothing providing
    /// the Secret Service): `doctor` shows where the bus was looked for and what answers (man
    /// page VERBS, doctor). Said on the same line. A locked keyring's message says it too
    /// (`SecretServiceStore.lockedMessage`), before its unlock command.
    func doctorHint(_ e: CredentialError) -> String {
        switch e {
        case .notFoundKeyringUnreachable, .storeUnavailable(_, secretService: true), .storeNotAnswering:
            return "; see: \(CommandLineSpec.programName) doctor"
        default:
            return ""
        }
    }

    /// A mistyped `--profile` (man page DESCRIPTION, typos): when a named profile is not signed
    /// in but one whose name is a typo away is, say so. Only for a profile other than `default`,
    /// and only on this error path, where listing the stores costs nothing that matters.
    func profileHint(_ e: CredentialError, _ g: GlobalOptions) -> String {
        let name: String
        switch e {
        case .notSignedIn(let p), .notFoundKeyringUnreachable(let p, _, _): name = p
        default: return ""
        }
        guard name != Profile.default.name, g.broker == nil else { return "" }
        let others = everyProfile(g).names.map(\.name).filter { $0 != name }
        guard let meant = Suggestion.closest(to: name, among: others) else { return "" }
        return "; did you mean '--profile \(meant)'?"
    }

    func verbose(_ g: GlobalOptions, _ line: @autoclosure () -> String) {
        if g.verbose { console.err("chatgpt-credential: debug: " + Sanitize.line(line())) }
    }

    /// The registered verb's `run`, `--version`, or git's or docker's protocol verb.
    func dispatch(_ command: Command, _ g: GlobalOptions) throws -> Outcome {
        switch command {
        case .verb(let verb):
            return try verb.run(self, g)
        case .version:
            return try version()
        case .helper(.git, let verb):
            return try gitHelper(g, verb: verb)
        case .helper(.docker, let verb):
            return try dockerHelper(g, verb: verb)
        case .helper(.plain, let verb):
            throw CredentialError.usage("unknown verb '\(Sanitize.line(verb, limit: 60))'")
        }
    }

    // MARK: get

    /// The one owner of the profile's credential, for this invocation's store choice.
    func owner(_ g: GlobalOptions) -> CredentialOwner {
        let owner = CredentialOwner(profile: g.profile, selector: services.makeSelector(g),
                        lock: ProfileLock(profile: g.profile, path: self.services.paths.lockFile(for: g.profile),
                                          storeDirectory: services.paths.dataDirectory, timeout: services.lockTimeout),
                        now: services.now, cache: services.makeCache(g),
                        // The back-off names the issuer it is about: a record for another address is ignored.
                        issuer: (try? services.settings.issuer.get().baseURL) ?? "",
                        refresher: { try self.services.makeRefresher(g) })
        owner.sinkNotice = { self.console.err("chatgpt-credential: " + $0) }
        owner.childEnvironment = services.settings.childEnvironment
        return owner
    }

    /// The profile's credential, fresh enough for `options` (refreshed through the owner when
    /// needed). Notices go to stderr; the caller prints the answer.
    func freshCredential(_ g: GlobalOptions, _ options: GetOptions) throws -> FreshCredential {
        let fresh: FreshCredential
        do { fresh = try owner(g).fresh(options.freshness) } catch { try stopIfSignalled(after: error); throw error }
        if g.verbose {
            // Which store and where (man page, DIAGNOSTICS): the file's path, or the keyring's item.
            let place = fresh.store.map { kind -> String in
                switch kind {
                case .file: return "the encrypted file " + services.makeSelector(g).store(of: .file).location(for: g.profile)
                case .secretService: return "the Secret Service item service=chatgpt-credential profile=\(g.profile.name)"
                }
            } ?? "its store"
            verbose(g, "profile \(g.profile.name) \(fresh.fromCache ? "answered from the access cache entry of " + place : "read from " + place); expires \(Clock.rfc3339(fresh.credential.expiresAt))")
        }
        if fresh.refreshed { verbose(g, "refreshed; new token expires \(Clock.rfc3339(fresh.credential.expiresAt))") }
        for n in fresh.notices { console.err("chatgpt-credential: " + Self.unlessStopping(n)) }
        try stopIfSignalled()
        return fresh
    }

    /// A notice as said before a deferred signal ends the run: nothing is printed then, so the
    /// stored token a fallback would print is not announced (man page REFRESH).
    static func unlessStopping(_ notice: String) -> String {
        guard SignalDeferral.deferredSignal != nil else { return notice }
        var at = notice.startIndex
        while at < notice.endIndex {
            if notice[at...].hasPrefix("; printing the stored") { return String(notice[..<at]) }
            at = notice.index(after: at)
        }
        return notice
    }

    /// Saves a new credential (login, store) through the owner: where `auto` says, and the
    /// profile's older copy in the other store removed.
    func saveNewCredential(_ document: TokenDocument, _ g: GlobalOptions) throws -> CredentialStore {
        let store = try owner(g).replace(with: document) { console.err("chatgpt-credential: " + $0) }
        if let notice = StoreSelector.volatileWriteNotice(after: store) { console.err("chatgpt-credential: " + notice) }
        verbose(g, "stored profile \(g.profile.name) in \(store.location(for: g.profile))")
        return store
    }
}
