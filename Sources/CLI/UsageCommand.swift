import CredentialCore
import SystemRuntime
import OAuth
import UsageBackend
import Credentials
#if canImport(Glibc)
import Glibc
#endif

/// `usage` on the command line (man page VERBS, USAGE).
struct UsageCommand: Verb {
    static let spec = VerbSpec(
        name: "usage",
        summary: "show the plan and rate-limit windows (5 h, 7 d) of the account",
        details: """
        Asks the ChatGPT backend (GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage) with a fresh
        token, as get would; on a 401, refreshes once and retries once. Shows the plan, one
        line per window with used percent and when it resets, credits when reported, and
        additional limits under their names; a bar on a terminal, plain lines otherwise
        (also with NO_COLOR or TERM=dumb). No tokens are printed.
        With --all, every profile found in either store, up to 4 asked at once: one block
        per profile in name order (JSON: {"profiles":{"NAME":{…} | {"error","exit"}}}); a
        failing profile shows its error and exit code without hiding the others. Exit 0
        when every profile answered, else the code of the first failing profile by name.
        """,
        options: [
            OptionSpec("--json", "print {plan, allowed, limit_reached, windows, credits, additional_limits} as JSON"),
            OptionSpec("--all", "every profile found in either store, side by side"),
        ],
        examples: ["\(CommandLineSpec.programName) usage", "\(CommandLineSpec.programName) usage --json | jq '.windows[]'"],
        wordsFromOtherTools: ["limits": "", "quota": ""])

    var json = false
    var all = false

    init(_ a: VerbArguments) throws { json = a.has("--json"); all = a.has("--all") }
    init(json: Bool, all: Bool) { self.json = json; self.all = all }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.usage(g, json: json, all: all) }
    static var clientMode: ClientModePolicy<Self> {
        .throughTheBroker { verb, runner, g, broker in try runner.usageThroughBroker(broker, g, json: verb.json, all: verb.all) }
    }
    var keyringAdvice: KeyringAdvice { all ? .none : .useTheFileCopy }
}

/// `usage [--json]` (man page, USAGE): the plan and rate-limit windows of the signed-in account,
/// from `GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage` with the token `get` would print. On a 401,
/// one refresh and one retry. Exit codes as for `get`; an answer without windows is exit 0.
/// `usage --all` is in UsageOfAll.swift.
extension Runner {
    func usage(_ g: GlobalOptions, json: Bool, all: Bool = false) throws -> Outcome {
        // Before anything could reach the network, a refresh included.
        let backend = try services.settings.backend.get()
        if all { return try usageOfAll(g, json: json, backend: backend) }
        let (report, plan) = try usageAnswer(g, backend: backend)
        if json {
            try console.out(UsageRenderer.json(report, plan: plan))
        } else {
            try console.out(UsageRenderer(style: usageStyle(), now: services.now()).text(report, plan: plan))
        }
        return .exit(0)
    }

    func usageStyle() -> UsageRenderer.Style {
        UsageRenderer.style(stdoutIsTerminal: console.stdoutIsTerminal, noColor: services.settings.noColor,
                            term: services.settings.term, locale: services.settings.locale)
    }

    /// The profile's usage report and the plan to show: a fresh token, the request, and on a 401
    /// one refresh and one retry. `serialized` runs each step that reaches the owner (see
    /// `usageOfAll`); `usage` runs them directly.
    func usageAnswer(_ g: GlobalOptions, backend: BackendConfig,
                     serialized: (() throws -> FreshCredential) throws -> FreshCredential = { try $0() }) throws -> (UsageReport, String?) {
        let client = UsageClient(config: backend, userAgent: "\(CommandLineSpec.programName)/\(CommandLineSpec.version)")
        var fresh = try serialized { try usageToken(g, rejected: nil) }
        verbose(g, "GET \(backend.url(UsageClient.usagePath)) for account \(fresh.credential.accountId)")
        var answer = try client.fetch(accessToken: fresh.credential.accessToken, accountId: fresh.credential.accountId,
                                      profile: g.profile, now: services.now)
        if answer == .unauthorized {
            verbose(g, "the backend refused the access token (HTTP 401); refreshing once and retrying")
            let rejected = fresh.credential
            fresh = try serialized { try usageToken(g, rejected: rejected) }
            guard fresh.credential.accessToken != rejected.accessToken else {
                // The refresh did not happen; the coordinator has said why on stderr.
                if case .store(.refreshRejected(let code, _)) = fresh.source {
                    throw CredentialError.refreshRejected(profile: g.profile.name, code: code)
                }
                throw CredentialError.temporary("the ChatGPT backend refused the access token (HTTP 401) and it could not be refreshed")
            }
            answer = try client.fetch(accessToken: fresh.credential.accessToken, accountId: fresh.credential.accountId,
                                      profile: g.profile, now: services.now)
        }
        guard case .report(let report) = answer else { throw CredentialError.backendRejected(profile: g.profile.name) }

        let tokenPlan = Sanitize.line(fresh.credential.plan, limit: 40)
        return (report, report.plan ?? (tokenPlan.isEmpty ? nil : tokenPlan))
    }

    /// The one place `usage` reaches the owner. `rejected == nil`: the token `get` would print
    /// (refreshed first when it is inside the refresh window). Otherwise the backend refused
    /// `rejected`: one refresh through the owner, unless another process already replaced that
    /// token (the owner re-reads the store under the lock and returns what it finds).
    func usageToken(_ g: GlobalOptions, rejected: ServedCredential?) throws -> FreshCredential {
        guard let rejected else { return try freshCredential(g, GetOptions()) }
        let fresh: FreshCredential
        do { fresh = try owner(g).freshAfterRejection(of: rejected.accessToken, Freshness()) } catch { try stopIfSignalled(after: error); throw error }
        if fresh.refreshed { verbose(g, "refreshed; new token expires \(Clock.rfc3339(fresh.credential.expiresAt))") }
        for n in fresh.notices { console.err("chatgpt-credential: " + Self.unlessStopping(n)) }
        try stopIfSignalled()
        return fresh
    }
}
