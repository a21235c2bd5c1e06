import Testing
@testable import CLI
@testable import OAuth
@testable import UsageBackend
@testable import Broker
@testable import CredentialCore
import SystemRuntime
import Secrets

/// Client mode's command line (`--broker`, `CHATGPT_CREDENTIAL_BROKER`) and its reading of the
/// broker's usage answer; the verbs themselves run end to end (BrokerClientEndToEndTests).
@Suite struct BrokerClientModeTests {
    func parse(_ args: [String], env: [String: String] = [:], argv0: String = "chatgpt-credential") throws -> Invocation {
        try ArgumentParser.parse([argv0] + args, settings: Settings(environment: env))
    }

    @Test func brokerIsAGlobalOptionAnywhereOnTheLine() throws {
        for args in [["--broker", "unix:/run/b.sock", "get"], ["get", "--broker=unix:/run/b.sock"],
                     ["exec", "--broker", "unix:/run/b.sock", "--", "sh"], ["usage", "--json", "--broker", "unix:/run/b.sock"]] {
            #expect(try parse(args).globals.broker?.path == "/run/b.sock", "\(args)")
        }
        #expect(try parse(["get"], argv0: "git-credential-chatgpt").globals.broker == nil)
        #expect(try parse(["--broker", "unix:/run/b.sock", "get"], argv0: "git-credential-chatgpt").globals.broker?.path == "/run/b.sock")
    }

    @Test func theEnvironmentSuppliesItEmptyIsUnsetAndTheFlagWins() throws {
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_BROKER": "unix:/e.sock"]).globals.broker?.path == "/e.sock")
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_BROKER": ""]).globals.broker == nil)
        #expect(try parse(["--broker", "unix:/f.sock", "get"], env: ["CHATGPT_CREDENTIAL_BROKER": "unix:/e.sock"]).globals.broker?.path == "/f.sock")
    }

    @Test(arguments: ["/run/b.sock", "unix:run/b.sock", "unix:", "http://localhost/"])
    func aMalformedAddressIsAUsageError(_ value: String) {
        for attempt in [{ try parse(["--broker", value, "get"]) }, { try parse(["get"], env: ["CHATGPT_CREDENTIAL_BROKER": value]) }] {
            do { _ = try attempt(); Issue.record("accepted \(value)") } catch let e as CredentialError {
                #expect(e.exitCode == 2 && e.message.contains("unix:"), "\(e.message)")
            } catch { Issue.record("\(error)") }
        }
    }

    /// Each verb's own policy decides (no list elsewhere): the verbs that change or serve a
    /// credential are refused with exit 2 and named as typed, before the broker is asked.
    @Test func theRefusedVerbsAreThoseThatChangeOrServeACredentialNamedAsTyped() throws {
        let refused = CommandLineSpec.verbTypes.filter { $0.refusedInClientMode }.map { $0.spec.name }
        #expect(refused == ["login", "store", "erase", "refresh", "serve", "sink"])
        #expect(CommandLineSpec.verbTypes.filter { $0.worksThroughTheBroker }.map { $0.spec.name } == ["get", "status", "usage", "exec", "doctor"])
        let address = "unix:/nonexistent/broker.sock"
        for name in refused {
            let console = LinesConsole()
            let runner = Runner(console: console, services: .live(settings: Settings(), console: console))
            #expect(runner.run(try parse(["--broker", address, name])) == .exit(2), "\(name)")
            #expect(console.lines == ["chatgpt-credential: '\(name)' is refused in client mode (broker \(address)): only the broker's side changes or serves the credential; run it there (see: chatgpt-credential --help)"])
        }
    }

    /// What the broker answers for /v1/usage is what `usage --json` prints; read back, it renders
    /// as the host would and prints the same JSON again.
    @Test func theNormalisedUsageObjectReadsBackToTheSameReport() throws {
        let report = UsageRendererTests.report
        let printed = UsageRenderer.json(report, plan: "plus")
        let (back, plan) = UsageRenderer.report(normalized: try JSON.parse(printed), now: UsageRendererTests.now)
        #expect(plan == "plus")
        #expect(UsageRenderer.json(back, plan: plan) == printed)
        let r = UsageRenderer(style: .plain, now: UsageRendererTests.now, localTime: UsageRendererTests.utc)
        #expect(r.text(back, plan: plan) == r.text(report, plan: "plus"))
    }

    @Test func oddValuesInAUsageAnswerAreUnknownNotErrors() throws {
        let (back, plan) = UsageRenderer.report(normalized: try JSON.parse(
            #"{"plan":"pro\u001b[2J","windows":[{"name":"primary","window_seconds":-5,"used_percent":400,"resets_at":"soon"},7,{"name":"secondary","resets_at":"2999-01-01T00:00:00Z"},{"name":"primary"}],"credits":"x","additional_limits":[{"name":3}]}"#),
            now: UsageRendererTests.now)
        #expect(plan == "pro[2J")
        #expect(back.rateLimit?.windows == [UsageWindow(role: .primary), UsageWindow(role: .secondary)])
        #expect(back.credits == nil)
        #expect(back.additional.map(\.name) == ["additional limit"])
    }
}

/// A console that keeps its stderr lines and reads nothing.
final class LinesConsole: Console {
    private(set) var lines: [String] = []
    func out(_ text: String) {}
    func out(_ secret: borrowing SecretBytes) {}
    func err(_ line: String) { lines.append(line) }
    func readInput(limit: Int) throws -> SecretBytes { SecretBytes() }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { false }
}
