import CredentialCore
import SystemRuntime
import UsageBackend
import OAuth
import HelperProtocols
import Broker
import Credentials
import Secrets

/// Client mode (chatgpt-credential(1), BROKER): with `--broker unix:PATH` or
/// `CHATGPT_CREDENTIAL_BROKER`, the verbs that read a credential ask the broker over its socket
/// and touch no store, keyring, lock, access cache or data directory; the verbs that change a
/// credential are refused (exit 2). The answers are printed by the same formatters as on the
/// host (`GetFormatter`, `UsageRenderer`, the git and docker protocols).
extension Runner {
    func clientMode(_ command: Command, _ g: GlobalOptions, _ address: BrokerAddress) throws -> Outcome {
        // Advice names what to run on the broker's side, never a verb refused here (ClientModeAdvice).
        do { return try clientModeVerb(command, g, address) } catch let e as CredentialError { throw e.inClientMode }
    }

    private func clientModeVerb(_ command: Command, _ g: GlobalOptions, _ address: BrokerAddress) throws -> Outcome {
        let broker = BrokerClient(address: address, handoff: services.settings.brokerHandoff)
        verbose(g, "client mode: asking the broker at \(address.description)")
        switch command {
        case .verb(let verb):
            // The verb's own policy: as on the host, refused, or through the broker (its `clientMode`).
            return try verb.runInClientMode(self, g, broker)
        case .version:
            return try version()
        case .helper(.git, let verb):
            return try gitHelperViaBroker(broker, g, verb: verb)
        case .helper(.docker, let verb):
            return try dockerHelperViaBroker(broker, g, verb: verb)
        case .helper(.plain, _):
            return try dispatch(command, g) // not a word of any protocol: the host's usage error
        }
    }

    /// `get` through the broker.
    func getThroughBroker(_ broker: BrokerClient, _ g: GlobalOptions, _ options: GetOptions) throws -> Outcome {
        // A forced refresh spends the refresh token: the broker's owner decides when, not a
        // client in a sandbox (`refresh` on the broker's side does it).
        if options.forceRefresh { throw refused("get --force-refresh", broker.address) }
        let credential = try brokerToken(broker, g, requiredTTL: options.requiredTTL)
        if options.format == .idToken, credential.idToken.isEmpty {
            throw CredentialError.failure("the broker at \(broker.address.description) does not hand out the id token (its answer is what get --json prints)")
        }
        try console.out(try GetFormatter.format(credential, options.format, profile: g.profile))
        return .exit(0)
    }

    /// `exec` through the broker.
    func execThroughBroker(_ broker: BrokerClient, _ g: GlobalOptions, _ argv: [String]) throws -> Outcome {
        try replaceProcess(argv, with: try brokerToken(broker, g, requiredTTL: nil), profile: g.profile)
    }

    /// `status` through the broker.
    func statusThroughBroker(_ broker: BrokerClient, _ g: GlobalOptions, json: Bool, all: Bool) throws -> Outcome {
        if all { throw CredentialError.usage("status --all reads the stores, which client mode never does; run it where the broker runs") }
        return try brokerStatus(broker, g, json: json)
    }

    /// `usage` through the broker.
    func usageThroughBroker(_ broker: BrokerClient, _ g: GlobalOptions, json: Bool, all: Bool) throws -> Outcome {
        if all { throw CredentialError.usage("usage --all lists the stores' profiles, which client mode never does; run it where the broker runs, or ask for each profile with --profile") }
        let value = try broker.usage(profile: g.profile)
        // More limits or windows than the host ever prints is no answer of the host's (man page
        // BROKER, Client mode): exit 1, never passed on.
        if let why = UsageRenderer.oversized(normalized: value) {
            throw CredentialError.failure("the broker at \(broker.address.description) sent a malformed usage answer (\(why))")
        }
        let now = services.now()
        let (report, plan) = UsageRenderer.report(normalized: value, now: now)
        if json {
            // Printed again as the host prints it: what the host would print of this answer.
            try console.out(UsageRenderer.json(report, plan: plan))
        } else {
            try console.out(UsageRenderer(style: usageStyle(), now: now).text(report, plan: plan))
        }
        return .exit(0)
    }

    /// A verb refused here (`login`, `store`, `erase`, and any verb that changes a credential or
    /// serves one: `refresh`, `serve`), named by the word the person typed.
    func refused(_ what: String, _ address: BrokerAddress) -> CredentialError {
        .usage("'\(what)' is refused in client mode (broker \(address.description)): only the broker's side changes or serves the credential; run it there")
    }

    /// The broker's `/v1/token` answer as a served credential for the formatters: the access
    /// token (and the id token when the broker sends one) in guarded memory, never a refresh token.
    /// An answer the host would refuse is refused here too (man page BROKER, Client mode): a token
    /// already expired is exit 4, as on the host when it cannot refresh; one valid for less than
    /// `--min-ttl` is printed with the notice the host prints then (`RefreshPolicy.afterRefresh`).
    func brokerToken(_ broker: BrokerClient, _ g: GlobalOptions, requiredTTL: Int64?) throws -> ServedCredential {
        let credential = try Self.credential(fromTokenAnswer: try broker.token(profile: g.profile, minTTL: requiredTTL), broker: broker.address.description)
        let expiresAt = credential.expiresAt
        let now = services.now()
        verbose(g, "the broker answered for profile \(g.profile.name); expires \(Clock.rfc3339(expiresAt))")
        guard expiresAt > now else {
            throw CredentialError.temporary("the broker at \(broker.address.description) answered with an access token that expired at \(Clock.rfc3339(expiresAt)) (\(TimeSpan.expiry(expiresAt - now)))")
        }
        if let requiredTTL, expiresAt - now < requiredTTL,
           let notice = RefreshPolicy.afterRefresh(credential, Freshness(minTTL: requiredTTL, requiredTTL: requiredTTL), now: now) {
            console.err("chatgpt-credential: " + notice)
        }
        return credential
    }

    /// The credential a `/v1/token` answer serves (the object `get --json` prints): it has no
    /// refresh token to hold; the formatters refuse what a token cannot hold. The members the
    /// host always sends are required with their types: an access token, a string account id and
    /// an RFC 3339 expiry; anything else is a malformed answer (exit 1).
    static func credential(fromTokenAnswer value: JSONValue, broker: String) throws -> ServedCredential {
        func malformed(_ why: String) -> CredentialError {
            .failure("the broker at \(broker) sent a malformed token answer (\(why))")
        }
        guard let access = value["access_token"]?.secretValue, !access.isEmpty else {
            throw CredentialError.failure("the broker at \(broker) sent an answer without an access token")
        }
        guard let accountId = value["account_id"]?.stringValue else { throw malformed("account_id is not a string") }
        guard let expiresAt = value["expires_at"]?.stringValue.flatMap(Clock.parseRFC3339) else {
            throw malformed("expires_at is not an RFC 3339 time")
        }
        return ServedCredential(accessToken: access, accountId: accountId,
                                idToken: value["id_token"]?.secretValue ?? SecretToken(),
                                expiresAt: expiresAt,
                                email: value["email"]?.stringValue ?? "", plan: value["plan"]?.stringValue ?? "")
    }

    // MARK: status

    /// Who is signed in, as the broker answers `/v1/token` (which may refresh there, as get
    /// would). No store is named: the broker's is not visible from here. Exit codes as on the
    /// host: 0 signed in, 3 not, 5 the broker's store, 4 the broker not answering.
    func brokerStatus(_ broker: BrokerClient, _ g: GlobalOptions, json: Bool) throws -> Outcome {
        let now = services.now()
        let document: ServedCredential
        do {
            document = try brokerToken(broker, g, requiredTTL: nil)
        } catch let e as CredentialError {
            let e = e.inClientMode
            if json {
                let members: [(String, JSONValue)] = [("profile", .string(g.profile.name)), ("broker", .string(broker.address.description)),
                                                      ("signed_in", .bool(false)), ("needs_login", .bool(e.exitCode == 3)),
                                                      ("error", .string(e.message))]
                try console.out(JSON.serialize(.object(members)) + "\n")
            }
            throw e
        }
        if json {
            let members: [(String, JSONValue)] = [
                ("profile", .string(g.profile.name)), ("broker", .string(broker.address.description)),
                ("signed_in", .bool(true)), ("needs_login", .bool(false)),
                ("email", .string(document.email)), ("plan", .string(document.plan)), ("account_id", .string(document.accountId)),
                ("expires_at", .string(Clock.rfc3339(document.expiresAt))), ("expires_in", .number(Double(document.expiresAt - now))),
                ("last_refresh", .null),
            ]
            try console.out(JSON.serialize(.object(members)) + "\n")
        } else {
            let who = Sanitize.line(document.email.isEmpty ? "unknown email" : document.email)
            let plan = Sanitize.line(document.plan.isEmpty ? "unknown plan" : document.plan)
            var s = "Signed in as \(who) (\(plan)), account \(shownAccount(document.accountId))\n"
            let expires = document.expiresAt > now
                ? "valid until \(LocalClock.dateTime(document.expiresAt)) (in \(TimeSpan.span(document.expiresAt - now)))"
                : "expired \(LocalClock.dateTime(document.expiresAt)) (\(TimeSpan.span(now - document.expiresAt)) ago)"
            s += LabeledLines.render([("profile", g.profile.name),
                                      ("broker", "\(broker.address.description) (answered by the broker; no store read here)"),
                                      ("access token", expires)])
            try console.out(s)
        }
        return .exit(0)
    }

    // MARK: git and docker

    func gitHelperViaBroker(_ broker: BrokerClient, _ g: GlobalOptions, verb word: String) throws -> Outcome {
        guard let verb = GitCredentialProtocol.Verb(argument: word) else { return .exit(0) } // git: ignore unknown verbs
        let request = try GitCredentialProtocol.read { try console.readSome($0) }
        switch verb {
        case .store:
            return .exit(0) // the credential is managed by `login`, where the broker runs
        case .get:
            guard GitCredentialProtocol.shouldAnswer(request) else { return .exit(0) }
            let credential = try brokerToken(broker, g, requiredTTL: nil)
            if let answer = try GitCredentialProtocol.answer(for: request, credential: credential, profile: g.profile) {
                try console.out(answer)
            }
            return .exit(0)
        case .erase:
            // Other hosts are none of this helper's business, as on the host.
            guard GitCredentialProtocol.shouldAnswer(request) else { return .exit(0) }
            throw refused("erase", broker.address)
        }
    }

    func dockerHelperViaBroker(_ broker: BrokerClient, _ g: GlobalOptions, verb word: String) throws -> Outcome {
        // Not signed in where the broker runs (exit 3) is docker's "not found", as on the host.
        let token: () throws -> ServedCredential? = {
            do { return try self.brokerToken(broker, g, requiredTTL: nil) } catch let e as CredentialError where e.exitCode == 3 { return nil }
        }
        return try dockerHelper(g, verb: word, DockerCredentials(
            fresh: token, storedAccount: { try token()?.accountId }, erase: { false }, eraseRefused: refused("erase", broker.address)))
    }
}

extension UsageRenderer {
    /// Why a usage answer is not one the host prints (more windows in a limit, or more
    /// additional limits, than `usage --json` ever holds); nil when it could be.
    static func oversized(normalized v: JSONValue) -> String? {
        func count(_ j: JSONValue?) -> Int {
            if case .array(let items)? = j { return items.count }
            return 0
        }
        let windowsPerLimit = UsageWindow.Role.allCases.count
        if count(v["windows"]) > windowsPerLimit { return "\(count(v["windows"])) windows, at most \(windowsPerLimit) a limit" }
        guard case .array(let extra)? = v["additional_limits"] else { return nil }
        if extra.count > UsageReport.maxAdditional { return "\(extra.count) additional limits, at most \(UsageReport.maxAdditional)" }
        for a in extra where count(a["windows"]) > windowsPerLimit {
            return "\(count(a["windows"])) windows, at most \(windowsPerLimit) a limit"
        }
        return nil
    }

    /// A report from the normalised object `usage --json` prints (what the broker's `/v1/usage`
    /// answers), so client mode renders it exactly as the host would. Values of the wrong type
    /// are unknown, with the same bounds as `UsageReport` (two windows a limit, a reset at most a
    /// day ago and a year ahead of `now`); strings are sanitised again.
    static func report(normalized v: JSONValue, now: Int64) -> (UsageReport, plan: String?) {
        func text(_ j: JSONValue?, _ limit: Int = 64) -> String? {
            guard let s = j?.stringValue else { return nil }
            let clean = Sanitize.line(s, limit: limit)
            return clean.isEmpty ? nil : clean
        }
        func windows(_ j: JSONValue?) -> [UsageWindow] {
            guard case .array(let items)? = j else { return [] }
            return items.filter(\.isObject).prefix(UsageWindow.Role.allCases.count).compactMap { w in
                guard w.isObject else { return nil }
                let role = UsageWindow.Role(rawValue: w["name"]?.stringValue ?? "") ?? .primary
                let seconds = w["window_seconds"]?.doubleValue.flatMap { $0.isFinite && $0 >= 1 && $0 <= Double(UsageReport.maxWindowSeconds) ? Int64($0) : nil }
                let percent = w["used_percent"]?.doubleValue.flatMap { $0.isFinite && $0 >= 0 && $0 <= 100 ? $0 : nil }
                let resets = w["resets_at"]?.stringValue.flatMap(Clock.parseRFC3339)
                    .flatMap { $0 >= now - UsageReport.maxResetAge && $0 <= now + UsageReport.maxWindowSeconds ? $0 : nil }
                return UsageWindow(role: role, windowSeconds: seconds, usedPercent: percent, resetsAt: resets)
            }
        }
        func limit(_ j: JSONValue) -> UsageLimit {
            UsageLimit(allowed: j["allowed"]?.boolValue, limitReached: j["limit_reached"]?.boolValue, windows: windows(j["windows"]))
        }
        var report = UsageReport()
        let main = limit(v)
        if main.allowed != nil || main.limitReached != nil || !main.windows.isEmpty { report.rateLimit = main }
        if let c = v["credits"], c.isObject {
            var balance = text(c["balance"], 32)
            if balance == nil, let d = c["balance"]?.doubleValue, d.isFinite, abs(d) < 1e15 { balance = JSON.serialize(.number(d)) }
            report.credits = UsageCredits(hasCredits: c["has_credits"]?.boolValue, unlimited: c["unlimited"]?.boolValue, balance: balance)
        }
        if case .array(let items)? = v["additional_limits"] {
            report.additional = items.prefix(UsageReport.maxAdditional).compactMap { a in
                guard a.isObject else { return nil }
                return NamedUsageLimit(name: text(a["name"]) ?? "additional limit", meteredFeature: text(a["metered_feature"]), limit: limit(a))
            }
        }
        return (report, text(v["plan"], 40))
    }
}
