import CredentialCore
import SystemRuntime
import Stores
import Secrets

extension AgeFileStore {
    /// The store as the executable builds it from an environment (`CLI/LiveServices.swift`). An
    /// interactive store gets a prompt that answers nothing; tests that type a passphrase replace
    /// `promptPassphrase`.
    public convenience init(environment env: [String: String], interactive: Bool) {
        self.init(paths: Paths(environment: env), passphraseFile: env["CHATGPT_CREDENTIAL_PASSPHRASE_FILE"],
                  prompt: interactive ? SilentPassphrasePrompt() : nil)
    }
}

/// A prompt nobody answers (an empty passphrase).
public struct SilentPassphrasePrompt: PassphrasePrompt {
    public init() {}
    public func passphrase(_ prompt: String) throws -> SecretBytes { SecretBytes() }
}
