import CredentialCore
import SystemRuntime
import OAuth
import UsageBackend
import Secrets
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `usage --all [--json]` (man page, USAGE): every profile `status --all` would list, each asked
/// exactly as `usage --profile NAME` would ask, side by side. One block per profile (or one JSON
/// object keyed by profile) in name order; a profile that fails shows its one-line error and exit
/// code in its place and hides none of the others. Exit 0 when every profile answered, else the
/// code of the first failing profile in that order.
extension Runner {
    /// Backend requests in flight at once: enough to hide the round trips of a handful of
    /// accounts, few enough not to look like a burst to the backend.
    static let usageConcurrency = 4

    /// One profile's answer, or its failure as `usage` would report it.
    enum ProfileUsage {
        case report(UsageReport, plan: String?)
        case failed(message: String, exit: Int32)
    }

    func usageOfAll(_ g: GlobalOptions, json: Bool, backend: BackendConfig) throws -> Outcome {
        let listing = everyProfile(g)
        for p in listing.problems { console.err("chatgpt-credential: " + p.message) }
        let profiles = listing.names
        // Store reads, refreshes and any passphrase prompt happen for one profile at a time (one
        // prompt on the terminal, one scrypt's memory); the backend requests overlap.
        let ownerSteps = ProcessMutex()
        // Each profile's answer and held-back notices, or the signal deferred during a refresh
        // (this profile's or another's) that ends the run.
        let outcomes = BoundedParallel.map(count: profiles.count, width: Self.usageConcurrency) { i -> (Result<ProfileUsage, DeferredSignal>, [String]) in
            var g2 = g
            g2.profile = profiles[i]
            // Each profile's notices are held back and printed with its block, not interleaved.
            let buffered = LineBufferConsole(base: console)
            let runner = Runner(console: buffered, services: services)
            do {
                // Each owner step first asks whether a signal was deferred meanwhile (man page
                // REFRESH): once one was, no other profile's refresh token is spent.
                let (report, plan) = try runner.usageAnswer(g2, backend: backend) { step in
                    try ownerSteps.locked { try runner.stopIfSignalled(); return try step() }
                }
                return (.success(.report(report, plan: plan)), buffered.lines)
            } catch let s as DeferredSignal {
                return (.failure(s), buffered.lines)
            } catch let e as CredentialError {
                return (.success(.failed(message: e.message, exit: e.exitCode)), buffered.lines)
            } catch {
                return (.success(.failed(message: Sanitize.line("\(error)"), exit: 1)), buffered.lines)
            }
        }

        // A deferred signal: its save is done; nothing is printed on stdout, 128 + its number.
        var results: [(ProfileUsage, [String])] = []
        for (outcome, lines) in outcomes {
            switch outcome {
            case .success(let answer): results.append((answer, lines))
            case .failure(let signal):
                for (_, lines) in outcomes { for line in lines { console.err(line) } }
                throw signal
            }
        }
        let entries = zip(profiles.map(\.name), results.map(\.0)).map { ($0, $1) }
        if json {
            try console.out(Self.usageJSON(entries))
        } else {
            try console.out(UsageRenderer(style: usageStyle(), now: services.now()).blocks(entries.map { name, answer in
                switch answer {
                case .report(let report, let plan): return (name, .success((report, plan)))
                case .failed(let message, let exit): return (name, .failure(.init(message: message, exit: exit)))
                }
            }, storesUnreadable: !listing.problems.isEmpty))
        }
        // After the report: each profile's notices, and its failure as `usage` would print it, named.
        for (i, (answer, lines)) in results.enumerated() {
            for line in lines { console.err(line) }
            if case .failed(let message, _) = answer { console.err("chatgpt-credential: \(profiles[i].name): " + message) }
        }
        for (_, answer) in entries { if case .failed(_, let exit) = answer { return .exit(exit) } }
        if let problem = listing.problems.first { return .exit(problem.exitCode) }
        if profiles.isEmpty {
            // Nobody signed in: exit 3, as `usage` without a credential.
            console.err("chatgpt-credential: no profile is signed in; run: \(Profile.default.loginCommand)")
            return .exit(CredentialError.notSignedIn(profile: g.profile.name).exitCode)
        }
        return .exit(0)
    }

    /// `{"profiles":{"NAME":{…as usage --json…} | {"error":"…","exit":N}}}`
    static func usageJSON(_ entries: [(String, ProfileUsage)]) -> String {
        let members: [(String, JSONValue)] = entries.map { name, answer in
            switch answer {
            case .report(let report, let plan): return (name, UsageRenderer.jsonValue(report, plan: plan))
            case .failed(let message, let exit): return (name, .object([("error", .string(message)), ("exit", .number(Double(exit)))]))
            }
        }
        return JSON.serialize(.object([("profiles", .object(members))])) + "\n"
    }
}

/// A mutex around a step; for the threads of one process.
final class ProcessMutex: Sendable {
    private let mutex = Mutex(())

    func locked<T>(_ body: () throws -> T) throws -> T {
        var result: Result<T, any Error>?
        mutex.withLock { _ in result = Result { try body() } }
        return try result!.get()
    }
}

/// A console for one profile's worker in `usage --all`: stderr lines are kept (under a lock) and
/// printed by the caller in profile order; stdout and stdin are not for workers.
/// `@unchecked Sendable`: `kept` is under its Mutex, and `base` is only asked whether the
/// process's streams are terminals (answers that do not change).
final class LineBufferConsole: Console, @unchecked Sendable {
    private let base: Console
    private let kept = Mutex<[String]>([])

    init(base: Console) { self.base = base }

    var lines: [String] { kept.withLock { $0 } }

    func out(_ text: String) throws { throw CredentialError.failure("internal: a usage --all worker wrote to stdout") }
    func out(_ secret: borrowing SecretBytes) throws { throw CredentialError.failure("internal: a usage --all worker wrote to stdout") }
    func err(_ line: String) { kept.withLock { $0.append(line) } }
    func readInput(limit: Int) throws -> SecretBytes { throw CredentialError.badInput("usage --all reads no input") }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { base.stdinIsTerminal }
    var stderrIsTerminal: Bool { base.stderrIsTerminal }
    var stdoutIsTerminal: Bool { base.stdoutIsTerminal }
}
