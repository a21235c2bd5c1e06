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
        case .login:
            throw CredentialError.notImplemented("login")
        case .store:
            throw CredentialError.notImplemented("store")
        case .helper(let wire, _):
            throw CredentialError.notImplemented("the \(wire.rawValue) protocol")
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
        let coordinator = RefreshCoordinator(profile: g.profile, store: store, lockPath: services.paths.lockFile(for: g.profile),
                                             lockTimeout: services.lockTimeout, now: services.now,
                                             refresher: { try self.services.makeRefresher(g) })
        let fresh = try coordinator.fresh(document, options: options)
        if fresh.refreshed { verbose(g, "refreshed; new token expires \(Clock.rfc3339(fresh.document.expiresAt))") }
        for n in fresh.notices { console.err("chatgpt-credential: " + n) }
        return fresh
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
