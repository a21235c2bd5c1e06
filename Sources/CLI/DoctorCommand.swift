import CredentialCore
import SystemRuntime
import Credentials
import Secrets
import Broker

/// `doctor` on the command line (man page VERBS, doctor): what a sign-in depends on here, one
/// check per line, each warn or fail with the next step.
struct DoctorCommand: Verb {
    static let spec = VerbSpec(
        name: "doctor",
        summary: "check what a sign-in depends on here (no secrets)",
        details: """
        Checks, in order: the session bus, the Secret Service, the encrypted file and its
        key, the lock directory, the access cache, the broker socket, the systemd user
        units, the sinks, the issuer back-off, the sign-in, profiles kept in both stores,
        and other programs that refresh the same sign-in (Codex, ChatMock). One line per
        check: ok, warn or fail, what was found, and for each warn or fail the next step.
        Exit 0 when no check fails, else 1. In client mode it checks the broker only.
        """,
        options: [OptionSpec("--json", "the same checks as a JSON array of {check, status, detail, advice}; advice is null for ok")],
        examples: ["\(CommandLineSpec.programName) doctor", "\(CommandLineSpec.programName) doctor --json"],
        wordsFromOtherTools: ["check": "", "diagnose": "", "health": ""])

    var json = false

    init(_ a: VerbArguments) throws { json = a.has("--json") }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome {
        try runner.report(DoctorChecks(runner: runner, g: g).all(), json: json)
    }
    static var clientMode: ClientModePolicy<Self> {
        .throughTheBroker { verb, runner, _, broker in try runner.report([DoctorChecks.broker(broker)], json: verb.json) }
    }
}

/// One line of `doctor`.
struct DoctorCheck: Equatable {
    enum Status: String { case ok, warn, fail }
    var name: String
    var status: Status
    /// What was found (no secret).
    var detail: String
    /// For warn and fail: the next step. Nil for ok.
    var advice: String?

    static func ok(_ name: String, _ detail: String) -> DoctorCheck { DoctorCheck(name: name, status: .ok, detail: detail, advice: nil) }
    static func warn(_ name: String, _ detail: String, _ advice: String) -> DoctorCheck { DoctorCheck(name: name, status: .warn, detail: detail, advice: advice) }
    static func fail(_ name: String, _ detail: String, _ advice: String) -> DoctorCheck { DoctorCheck(name: name, status: .fail, detail: detail, advice: advice) }
}

extension Runner {
    /// Prints the checks (text: one line each, `STATUS  CHECK  DETAIL; next: ADVICE`; JSON: one
    /// array element each, in the same order). Exit 1 when one failed.
    func report(_ checks: [DoctorCheck], json: Bool) throws -> Outcome {
        try console.out(json ? Self.doctorJSON(checks) : Self.doctorText(checks))
        return .exit(checks.contains { $0.status == .fail } ? 1 : 0)
    }

    static func doctorText(_ checks: [DoctorCheck]) -> String {
        let width = checks.map(\.name.count).max() ?? 0
        return checks.map { c in
            let status = c.status.rawValue + String(repeating: " ", count: 4 - c.status.rawValue.count)
            let name = c.name + String(repeating: " ", count: width - c.name.count)
            var line = "\(status)  \(name)  \(Sanitize.line(c.detail, limit: 2000))"
            if let advice = c.advice { line += "; next: " + Sanitize.line(advice, limit: 2000) }
            return line + "\n"
        }.joined()
    }

    static func doctorJSON(_ checks: [DoctorCheck]) -> String {
        JSON.serialize(.array(checks.map { c in
            .object([("check", .string(c.name)), ("status", .string(c.status.rawValue)),
                     ("detail", .string(Sanitize.line(c.detail, limit: 2000))), ("advice", c.advice.map { .string(Sanitize.line($0, limit: 2000)) } ?? .null)])
        })) + "\n"
    }
}
