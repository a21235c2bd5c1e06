import CredentialCore
import SystemRuntime
import Secrets

/// A console that prints nothing and reads nothing, for tests that need one.
final class SilentConsole: Console {
    func out(_ text: String) {}
    func out(_ secret: borrowing SecretBytes) {}
    func err(_ line: String) {}
    func readInput(limit: Int) throws -> SecretBytes { SecretBytes() }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { false }
}
