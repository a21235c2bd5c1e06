import CredentialCore
import Stores
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// Runs one parsed `Invocation`: the verbs of the plain protocol and the git/docker helper verbs.
/// It decides nothing about refreshing (that is `RefreshCoordinator`) and nothing about exit
/// codes (that is `CredentialError.exitCode`); it formats answers and reports errors in one line.
public final class Runner {
    let console: Console
    let services: Services

    public init(console: Console, services: Services) {
        self.console = console
        self.services = services
    }

    /// Runs the invocation; every error becomes one stderr line and its exit code.
    public func run(_ invocation: Invocation) -> Outcome {
        let g = invocation.globals
        do {
            switch invocation.command {
            case .help, .version: break
            default:
                // A non-loopback http:// issuer is refused before anything could reach the network.
                _ = try IssuerConfig.fromEnvironment(services.environment)
            }
            return try dispatch(invocation.command, g)
        } catch let e as CredentialError {
            report(e, g)
            return .exit(e.exitCode)
        } catch {
            console.err("chatgpt-credential: \(Sanitize.line("\(error)"))")
            return .exit(1)
        }
    }

    func report(_ e: CredentialError, _ g: GlobalOptions) {
        switch g.wire {
        case .docker:
            // docker's helpers report errors on stdout (docker-credential-helpers convention).
            console.out(e.message + "\n")
        case .plain, .git:
            console.err("chatgpt-credential: " + e.message)
        }
    }

    func verbose(_ g: GlobalOptions, _ line: @autoclosure () -> String) {
        if g.verbose { console.err("chatgpt-credential: debug: " + Sanitize.line(line())) }
    }

    func dispatch(_ command: Command, _ g: GlobalOptions) throws -> Outcome {
        switch command {
        case .help(let verb):
            if let verb, let spec = CommandLineSpec.verb(verb) { console.out(CommandLineSpec.verbHelp(spec)) }
            else { console.out(CommandLineSpec.mainHelp()) }
            return .exit(0)
        case .version:
            console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
            return .exit(0)
        case .get(let options):
            let fresh = try freshCredential(g, options)
            console.out(try GetFormatter.format(fresh.document, options.format))
            return .exit(0)
        case .status(let json, let all):
            return try status(g, json: json, all: all)
        case .erase(let revoke):
            return try erase(g, revoke: revoke)
        case .exec(let argv):
            let fresh = try freshCredential(g, GetOptions())
            var env = services.environment
            env["CHATGPT_ACCESS_TOKEN"] = fresh.document.accessToken
            env["CHATGPT_ACCOUNT_ID"] = fresh.document.accountId
            return .replaceProcess(argv: argv, environment: env)
        case .login(let mode):
            return try login(g, mode: mode)
        case .store(let fromCodex):
            return try store(g, fromCodex: fromCodex)
        case .helper(.git, let verb):
            return try gitHelper(g, verb: verb)
        case .helper(.docker, let verb):
            return try dockerHelper(g, verb: verb)
        case .helper(.plain, let verb):
            throw CredentialError.usage("unknown verb '\(Sanitize.line(verb, limit: 60))'")
        }
    }

    // MARK: get

    /// Loads the profile's credential and returns it fresh, refreshing through the coordinator
    /// when needed. Notices go to stderr; the caller prints the answer.
    func freshCredential(_ g: GlobalOptions, _ options: GetOptions) throws -> FreshCredential {
        let selector = services.makeSelector(g)
        guard let (store, document) = try selector.locate(g.profile) else {
            throw CredentialError.notSignedIn(profile: g.profile.name)
        }
        verbose(g, "profile \(g.profile.name) found in \(store.location(for: g.profile)); expires \(Clock.rfc3339(document.expiresAt))")
        let fresh = try coordinator(g, store).fresh(document, options: options.freshness)
        if fresh.refreshed { verbose(g, "refreshed; new token expires \(Clock.rfc3339(fresh.document.expiresAt))") }
        for n in fresh.notices { console.err("chatgpt-credential: " + n) }
        return fresh
    }

    func coordinator(_ g: GlobalOptions, _ store: CredentialStore) -> RefreshCoordinator {
        RefreshCoordinator(profile: g.profile, store: store, lockPath: services.paths.lockFile(for: g.profile),
                           lockTimeout: services.lockTimeout, now: services.now,
                           refresher: { try self.services.makeRefresher(g) })
    }

    /// Saves a new credential (login, store) where `auto` says, under the profile's lock, and
    /// removes any older copy from the other store so no stale single-use refresh token is left.
    func saveNewCredential(_ document: TokenDocument, _ g: GlobalOptions) throws -> CredentialStore {
        let selector = services.makeSelector(g)
        let store = try selector.destination(for: g.profile) { console.err("chatgpt-credential: " + $0) }
        try coordinator(g, store).exclusive {
            try store.save(document, for: g.profile)
            for other in selector.others(than: store) { _ = try? other.delete(g.profile) }
        }
        verbose(g, "stored profile \(g.profile.name) in \(store.location(for: g.profile))")
        return store
    }

    // MARK: store

    func store(_ g: GlobalOptions, fromCodex: String??) throws -> Outcome {
        let input: SecretBytes
        switch fromCodex {
        case .none:
            if console.stdinIsTerminal { console.err("chatgpt-credential: paste the credential JSON, then press Ctrl-D") }
            input = try console.readInput(limit: TokenImport.maxBytes)
        case .some(let path):
            guard let path = path ?? CodexAuthFile.defaultPath(env: services.environment) else {
                throw CredentialError.usage("cannot find Codex's auth.json: set CODEX_HOME or HOME, or give its path")
            }
            input = try FileSystem.readSmallFile(path, limit: TokenImport.maxBytes)
        }
        let imported = try TokenImport.parse(input, now: services.now())
        let store = try saveNewCredential(imported.document, g)
        let d = imported.document
        console.err("chatgpt-credential: stored the credential for \(Sanitize.line(d.email.isEmpty ? "unknown email" : d.email)), account \(Sanitize.line(d.accountId)) in \(store.location(for: g.profile))")
        if imported.format == .codexAuthFile || fromCodex != nil { console.err("chatgpt-credential: " + CodexAuthFile.sharedRefreshTokenWarning) }
        return .exit(0)
    }

    // MARK: status

    func status(_ g: GlobalOptions, json: Bool, all: Bool) throws -> Outcome {
        let selector = services.makeSelector(g)
        let now = services.now()
        if all {
            let (found, problems) = selector.allProfiles()
            var entries: [StatusReport] = []
            for (name, kind) in found {
                guard let profile = try? Profile(name) else { continue }
                var g2 = g
                g2.profile = profile
                g2.store = kind == .file ? .file : .secretService
                do {
                    if let (store, doc) = try services.makeSelector(g2).locate(profile) {
                        entries.append(StatusReport(profile: name, store: store.kind, document: doc, now: now))
                    }
                } catch let e as CredentialError {
                    entries.append(StatusReport(profile: name, store: kind, problem: e.message))
                }
            }
            for p in problems { console.err("chatgpt-credential: " + p) }
            console.out(json ? StatusReport.jsonList(entries) : StatusReport.textList(entries))
            return .exit(0)
        }
        guard let (store, doc) = try selector.locate(g.profile) else {
            if json { console.out(StatusReport.notSignedInJSON(g.profile.name)) }
            throw CredentialError.notSignedIn(profile: g.profile.name)
        }
        let report = StatusReport(profile: g.profile.name, store: store.kind, document: doc, now: now)
        console.out(json ? JSON.serialize(report.json()) + "\n" : report.text())
        return .exit(0)
    }

    // MARK: erase

    func erase(_ g: GlobalOptions, revoke: Bool) throws -> Outcome {
        let selector = services.makeSelector(g)
        guard let (store, doc) = try selector.locate(g.profile) else {
            console.err("chatgpt-credential: profile '\(g.profile.name)' holds no credential; nothing to erase")
            return .exit(0)
        }
        if revoke && doc.refreshRejected == nil {
            if let problem = services.revoke(g, doc.refreshToken) {
                console.err("chatgpt-credential: notice: could not revoke the refresh token (\(Sanitize.line(problem, limit: 160))); erasing it here anyway")
            }
        }
        try store.delete(g.profile)
        for other in selector.others(than: store) { _ = try? other.delete(g.profile) }
        console.err("chatgpt-credential: erased profile '\(g.profile.name)' from \(store.location(for: g.profile))")
        return .exit(0)
    }
}
