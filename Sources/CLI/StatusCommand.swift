import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `status` on the command line (man page VERBS).
struct StatusCommand: Verb {
    static let spec = VerbSpec(
        name: "status",
        summary: "show who is signed in (no secrets)",
        details: """
        Shows email, plan, account id, expiry and store of the profile. Exit 0 when get
        would succeed without a new sign-in, 3 when it would not (not signed in, or the
        refresh token was rejected and the access token is no longer usable), 5 when a
        store could not be read.
        """,
        options: [
            OptionSpec("--json", "machine-readable output"),
            OptionSpec("--all", "every profile found in either store"),
        ],
        examples: ["\(CommandLineSpec.programName) status", "\(CommandLineSpec.programName) status --all --json"],
        wordsFromOtherTools: ["whoami": "", "info": "", "list": "--all"])

    var json = false
    var all = false

    init(_ a: VerbArguments) throws { json = a.has("--json"); all = a.has("--all") }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.status(g, json: json, all: all) }
    static var clientMode: ClientModePolicy<Self> {
        .throughTheBroker { verb, runner, g, broker in try runner.statusThroughBroker(broker, g, json: verb.json, all: verb.all) }
    }
    var keyringAdvice: KeyringAdvice { all ? .none : .useTheFileCopy }
}

extension StatusReport {
    /// Where the profile is kept, in words: which Secret Service collection holds its item (one
    /// more SearchItems; nil when it cannot be told), since a collection that lives only in
    /// memory loses the credential when the keyring daemon restarts; or the encrypted file's path.
    mutating func describe(_ store: CredentialStore, _ profile: Profile) {
        collection = try? store.collection(of: profile)
        if store.kind == .file { location = store.location(for: profile) }
    }
}

/// `status [--json] [--all]` (man page VERBS): who is signed in, from the access cache or the
/// store, never a secret.
extension Runner {
    /// Exit 0 when `get` would succeed without a new sign-in, 3 when it would not, 5 when a store
    /// could not be read. With `all`: 5 when a store could not be read, else 3 when no profile
    /// is usable, else 0. Text and JSON say the same.
    func status(_ g: GlobalOptions, json: Bool, all: Bool) throws -> Outcome {
        let now = services.now()
        if all { return try statusOfAll(g, json: json, now: now) }
        let owner = owner(g)
        if let (kind, credential) = owner.cached() {
            var report = StatusReport(profile: g.profile.name, store: kind, cached: credential, now: now)
            report.describe(services.makeSelector(g).store(of: kind), g.profile)
            report.sinks = sinkStates(owner)
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
        report.describe(located.store, g.profile)
        report.sinks = located.document.sinks.map { ($0.format.rawValue, $0.path, SinkState.of($0, located.document, now: now).rawValue) }
        try console.out(json ? JSON.serialize(report.json()) + "\n" : report.text())
        if let problem = report.unusable { throw problem }
        return .exit(0)
    }

    /// The profile's sinks and their states, read from the store (the access cache does not keep
    /// them); none when it cannot be read, or only with a passphrase.
    private func sinkStates(_ owner: CredentialOwner) -> [(format: String, path: String, state: String)] {
        ((try? owner.sinks(onlyIfCheap: true)) ?? []).map { ($0.record.format.rawValue, $0.record.path, $0.state.rawValue) }
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
                    entry.describe(located.store, profile)
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
        try console.out(json ? StatusReport.jsonList(entries) : StatusReport.textList(entries, storesUnreadable: !problems.isEmpty, defaultProfile: g.profile.name, width: console.outputWidth))
        if let first = problems.first ?? entries.compactMap(\.problem).first(where: { $0.exitCode == 5 }) { return .exit(first.exitCode) }
        return .exit(entries.contains { $0.unusable == nil } ? 0 : 3)
    }
}
