import CredentialCore
import Secrets

/// Asks the person for a passphrase, echo off. A store that needs one calls it; the executable
/// provides it (`CLI/TerminalPassphrasePrompt.swift`, on /dev/tty), so no library module opens a
/// terminal or prints. No prompt at all (nil where one is taken) means "not interactive".
public protocol PassphrasePrompt {
    /// The answer, read straight into `SecretBytes` (empty when nothing was entered); throws
    /// `CredentialError.storeUnavailable` when nobody can be asked.
    func passphrase(_ prompt: String) throws -> SecretBytes
}
