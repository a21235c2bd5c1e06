import Testing
@testable import CLI
@testable import CredentialCore
import Secrets

@Suite struct ServicesTests {
    @Test func nanLockTimeoutFromTheEnvironmentIsTheDefault() throws {
        for value in ["nan", "NaN", "-nan"] {
            let services = Services.live(settings: try Settings(environment: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": value]), console: SilentConsole())
            #expect(services.lockTimeout == 60)
        }
        #expect(Services.live(settings: try Settings(environment: ["CHATGPT_CREDENTIAL_LOCK_TIMEOUT": "inf"]), console: SilentConsole()).lockTimeout == 600)
    }
}
