import Testing
@testable import CLI
@testable import CredentialCore
import Secrets

@Suite struct ServicesTests {
    @Test func nanLockTimeoutFromTheEnvironmentIsTheDefault() {
        for value in ["nan", "NaN", "-nan"] {
            let services = Services.live(environment: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": value], console: SilentConsole())
            #expect(services.lockTimeout == 60)
        }
        #expect(Services.live(environment: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "inf"], console: SilentConsole()).lockTimeout == 600)
    }
}

private final class SilentConsole: Console {
    func out(_ text: String) {}
    func err(_ line: String) {}
    func readInput(limit: Int) throws -> SecretBytes { SecretBytes() }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { false }
}
