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
            switch invocation.command {
            case .help, .version: break
            default:
                // A non-loopback http:// issuer is refused before anything could reach the network.
                _ = try IssuerConfig.fromEnvironment(services.environment)
            }
            let outcome = try dispatch(invocation.command, g)
            // The broker acts on a deferred signal itself (it stops after that answer, exit 0).
            if case .serve = invocation.command { return outcome }
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

    func report(_ e: CredentialError, _ g: GlobalOptions) {
        switch g.wire {
        case .docker:
            // docker's helpers report errors on stdout (docker-credential-helpers convention).
            try? console.out(e.message + "\n")
        case .plain, .git:
            console.err("chatgpt-credential: " + e.message + profileHint(e, g))
        }
    }

    /// A mistyped `--profile` (man page DESCRIPTION, typos): when a named profile is not signed
    /// in but one whose name is a typo away is, say so. Only for a profile other than `default`,
    /// and only on this error path, where listing the stores costs nothing that matters.
    func profileHint(_ e: CredentialError, _ g: GlobalOptions) -> String {
        guard case .notSignedIn(let name) = e, name != Profile.default.name, g.broker == nil else { return "" }
        let others = everyProfile(g).names.map(\.name).filter { $0 != name }
        guard let meant = Suggestion.closest(to: name, among: others) else { return "" }
        return "; did you mean '--profile \(meant)'?"
    }

    func verbose(_ g: GlobalOptions, _ line: @autoclosure () -> String) {
        if g.verbose { console.err("chatgpt-credential: debug: " + Sanitize.line(line())) }
    }

    func dispatch(_ command: Command, _ g: GlobalOptions) throws -> Outcome {
        switch command {
        case .help(let verb):
            let width = console.outputWidth
            if let verb, let spec = CommandLineSpec.verb(verb) { try console.out(CommandLineSpec.verbHelp(spec, width: width)) }
            else { try console.out(CommandLineSpec.mainHelp(width: width)) }
            return .exit(0)
        case .version:
            try console.out("\(CommandLineSpec.programName) \(CommandLineSpec.version)\n")
            return .exit(0)
        case .get(let options):
            let fresh = try freshCredential(g, options)
            try console.out(try GetFormatter.format(fresh.document, options.format, profile: g.profile))
            return .exit(0)
        case .status(let json, let all):
            return try status(g, json: json, all: all)
        case .erase(let revoke):
            return try erase(g, revoke: revoke)
        case .usage(let json, let all):
            return try usage(g, json: json, all: all)
        case .exec(let argv):
            let fresh = try freshCredential(g, GetOptions())
            var env = services.environment
            // EDGE: exec's environment; setenv(3) and the child need the token as a C string.
            env["CHATGPT_ACCESS_TOKEN"] = fresh.document.accessToken.unsafeString()
            env["CHATGPT_ACCOUNT_ID"] = fresh.document.accountId
            return .replaceProcess(argv: argv, environment: env)
        case .refresh(let all, let days):
            return try refresh(g, all: all, ifIdleDays: days)
        case .login(let mode, let clipboard):
            return try login(g, mode: mode, clipboard: clipboard)
        case .store(let fromCodex):
            return try store(g, fromCodex: fromCodex)
        case .serve(let options):
            return try serve(g, options)
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
                        lock: ProfileLock(profile: g.profile, path: services.paths.lockFile(for: g.profile), timeout: services.lockTimeout),
                        now: services.now, cache: services.makeCache(g), refresher: { try self.services.makeRefresher(g) })
        // The back-off names the issuer it is about: a record for another address is ignored.
        owner.backoff.issuer = (try? IssuerConfig.fromEnvironment(services.environment).baseURL) ?? ""
        return owner
    }

    /// The profile's credential, fresh enough for `options` (refreshed through the owner when
    /// needed). Notices go to stderr; the caller prints the answer.
    func freshCredential(_ g: GlobalOptions, _ options: GetOptions) throws -> FreshCredential {
        let fresh: FreshCredential
        do { fresh = try owner(g).fresh(options.freshness) } catch { try stopIfSignalled(after: error); throw error }
        verbose(g, "profile \(g.profile.name) \(fresh.fromCache ? "answered from the access cache" : "read from its store"); expires \(Clock.rfc3339(fresh.document.expiresAt))")
        if fresh.refreshed { verbose(g, "refreshed; new token expires \(Clock.rfc3339(fresh.document.expiresAt))") }
        for n in fresh.notices { console.err("chatgpt-credential: " + n) }
        try stopIfSignalled()
        return fresh
    }

    /// Saves a new credential (login, store) through the owner: where `auto` says, and the
    /// profile's older copy in the other store removed.
    func saveNewCredential(_ document: TokenDocument, _ g: GlobalOptions) throws -> CredentialStore {
        let store = try owner(g).replace(with: document) { console.err("chatgpt-credential: " + $0) }
        if let notice = StoreSelector.volatileWriteNotice(after: store) { console.err("chatgpt-credential: " + notice) }
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
            let codex = try codexCredential(path: path, g)
            input = codex.secret
            console.err("chatgpt-credential: reading Codex's credential from \(codex.source)")
        }
        let imported = try TokenImport.parse(input, profile: g.profile, now: services.now())
        var d = imported.document
        let fromCodexFile = imported.format == .codexAuthFile || fromCodex != nil
        // Codex may still hold the same session: erase must not revoke it.
        if fromCodexFile { d.importedFrom = "codex" }
        let store = try saveNewCredential(d, g)
        console.err("chatgpt-credential: stored the credential for \(Sanitize.line(d.email.isEmpty ? "unknown email" : d.email)), account \(Sanitize.line(d.accountId)) in \(store.location(for: g.profile))")
        if fromCodexFile { console.err("chatgpt-credential: " + CodexAuthFile.sharedRefreshTokenWarning) }
        return .exit(0)
    }

    // MARK: status

    /// Exit 0 when `get` would succeed without a new sign-in, 3 when it would not, 5 when a store
    /// could not be read. With `all`: 5 when a store could not be read, else 3 when no profile
    /// is usable, else 0. Text and JSON say the same.
    func status(_ g: GlobalOptions, json: Bool, all: Bool) throws -> Outcome {
        let now = services.now()
        if all { return try statusOfAll(g, json: json, now: now) }
        let owner = owner(g)
        if let (kind, document) = owner.cached() {
            var report = StatusReport(profile: g.profile.name, store: kind, document: document, now: now)
            report.fromCache = true
            report.collection = collection(of: g.profile, in: services.makeSelector(g).store(of: kind))
            try console.out(json ? JSON.serialize(report.json()) + "\n" : report.text())
            return .exit(0)
        }
        let located: LocatedCredential?
        do {
            located = try owner.locate()
        } catch let e as CredentialError {
            if json { try console.out(JSON.serialize(StatusReport(profile: g.profile.name, store: nil, problem: e).json()) + "\n") }
            throw e
        }
        guard let located else {
            if json { try console.out(JSON.serialize(StatusReport(profile: g.profile.name, store: nil, problem: .notSignedIn(profile: g.profile.name)).json()) + "\n") }
            throw CredentialError.notSignedIn(profile: g.profile.name)
        }
        var report = StatusReport(profile: g.profile.name, store: located.store.kind, document: located.document, now: now)
        report.collection = collection(of: g.profile, in: located.store)
        try console.out(json ? JSON.serialize(report.json()) + "\n" : report.text())
        if let problem = report.unusable { throw problem }
        return .exit(0)
    }

    /// Which Secret Service collection holds the profile's item (one more SearchItems), or nil
    /// for another store or when it cannot be told: `status` names it because a collection that
    /// lives only in memory loses the credential when the keyring daemon restarts.
    private func collection(of profile: Profile, in store: CredentialStore) -> String? {
        guard let secretService = store as? SecretServiceStore else { return nil }
        return try? secretService.collection(of: profile)
    }

    private func statusOfAll(_ g: GlobalOptions, json: Bool, now: Int64) throws -> Outcome {
        let listing = everyProfile(g)
        let problems = listing.problems
        var entries: [StatusReport] = []
        for (profile, kind) in listing.found {
            let name = profile.name
            var g2 = g
            g2.profile = profile
            g2.store = kind == .file ? .file : .secretService
            do {
                if let located = try services.makeSelector(g2).locate(profile) {
                    var entry = StatusReport(profile: name, store: located.store.kind, document: located.document, now: now)
                    entry.collection = collection(of: profile, in: located.store)
                    entries.append(entry)
                }
            } catch let e as CredentialError {
                entries.append(StatusReport(profile: name, store: kind, problem: e))
            }
        }
        for i in entries.indices { entries[i].isDefault = entries[i].profile == g.profile.name }
        for p in problems { console.err("chatgpt-credential: " + p.message) }
        if !json {
            // The table's STATUS says `locked` or `unreadable`; the reason is one stderr line each.
            for e in entries { if let p = e.problem, p.exitCode == 5 { console.err("chatgpt-credential: \(e.profile): " + p.message) } }
        }
        try console.out(json ? StatusReport.jsonList(entries) : StatusReport.textList(entries, storesUnreadable: !problems.isEmpty, defaultProfile: g.profile.name))
        if let first = problems.first ?? entries.compactMap(\.problem).first(where: { $0.exitCode == 5 }) { return .exit(first.exitCode) }
        return .exit(entries.contains { $0.unusable == nil } ? 0 : 3)
    }

    // MARK: erase

    func erase(_ g: GlobalOptions, revoke: Bool) throws -> Outcome {
        _ = try eraseEverywhere(g, revoke: revoke)
        return .exit(0)
    }

    /// `erase` through the owner; true when a copy was removed.
    func eraseEverywhere(_ g: GlobalOptions, revoke: Bool) throws -> Bool {
        let erasure = try owner(g).erase(revoke: revoke ? { self.services.revoke(g, $0) } : nil)
        for n in erasure.notices { console.err("chatgpt-credential: " + n) }
        if erasure.removed.isEmpty {
            console.err("chatgpt-credential: profile '\(g.profile.name)' holds no credential; nothing to erase")
            return false
        }
        let places = erasure.removed.map { $0.location(for: g.profile) }.joined(separator: " and ")
        console.err("chatgpt-credential: erased profile '\(g.profile.name)' from \(places)")
        return true
    }
}
