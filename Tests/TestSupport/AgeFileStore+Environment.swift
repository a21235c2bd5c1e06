import CredentialCore
import SystemRuntime
import Stores
import Secrets

extension AgeFileStore {
    /// The store as the executable builds it from an environment (`CLI/Settings.swift`,
    /// `CLI/LiveServices.swift`; an empty value is unset there, which `Paths` and the store treat
    /// alike). An interactive store gets a prompt that answers nothing; tests that type a
    /// passphrase replace `promptPassphrase`.
    public convenience init(environment env: [String: String], interactive: Bool) {
        let paths = Paths(home: env["HOME"], dataHome: env["XDG_DATA_HOME"], configHome: env["XDG_CONFIG_HOME"],
                          runtimeDirectory: env["XDG_RUNTIME_DIR"])
        self.init(paths: paths, passphraseFile: env["CHATGPT_CREDENTIAL_PASSPHRASE_FILE"],
                  prompt: interactive ? SilentPassphrasePrompt() : nil)
    }
}

/// A prompt nobody answers (an empty passphrase).
public struct SilentPassphrasePrompt: PassphrasePrompt {
    public init() {}
    public func passphrase(_ prompt: String) throws -> SecretBytes { SecretBytes() }
}
