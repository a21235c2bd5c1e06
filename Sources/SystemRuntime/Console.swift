import CredentialCore
import Secrets

/// The process's standard streams as the library sees them. The executable provides the real
/// one; tests provide a recording one. Everything the user sees goes through here.
public protocol Console: AnyObject {
    /// Writes to stdout exactly as given. A failed write (closed pipe, full disk, closed
    /// descriptor) throws `CredentialError.failure` (exit 1): an answer that did not arrive is
    /// never a success.
    func out(_ text: String) throws
    /// Writes an answer that carries a token to stdout, from its guarded buffer (no String made);
    /// fails as `out` does.
    func out(_ secret: borrowing SecretBytes) throws
    /// Writes one line (a newline is added) to stderr.
    func err(_ line: String)
    /// Writes `text` to stderr as given, no newline added: a line that updates in place on a
    /// terminal (`\r`). Consoles that are not a process's own record it as a line.
    func errInPlace(_ text: String)
    /// Reads all of stdin, at most `limit` bytes; more than that throws `badInput`. What comes in
    /// may be a credential (`store`), so it is read straight into `SecretBytes`.
    func readInput(limit: Int) throws -> SecretBytes
    /// Reads up to `max` bytes of stdin; an empty array at end of input.
    func readSome(_ max: Int) throws -> [UInt8]
    var stdinIsTerminal: Bool { get }
    var stderrIsTerminal: Bool { get }
    var stdoutIsTerminal: Bool { get }
    var terminalColumns: Int? { get }
    var errorColumns: Int? { get }
}

extension Console {
    public func errInPlace(_ text: String) { err(text) }
    /// Consoles that are not a process's own (tests) print plain text.
    public var stdoutIsTerminal: Bool { false }
    /// The width of the terminal on stdout, when it is one and says.
    public var terminalColumns: Int? { nil }
    /// The width to wrap text for stdout at: the terminal's, else 80.
    public var outputWidth: Int { stdoutIsTerminal ? (terminalColumns ?? 80) : 80 }
    /// The width of the terminal on stderr, when it is one and says.
    public var errorColumns: Int? { nil }
    /// The width to wrap messages for stderr at (prompts of the sign-in): the terminal's, else 80.
    public var errorWidth: Int { stderrIsTerminal ? (errorColumns ?? 80) : 80 }
}

/// How a run ends: an exit status, or (for `exec`) replacing this process with another.
public enum Outcome: Equatable, Sendable {
    case exit(Int32)
    /// The image is compared by identity: its secret variables are never compared or copied.
    case replaceProcess(ProcessImage)

    public static func == (a: Outcome, b: Outcome) -> Bool {
        switch (a, b) {
        case let (.exit(x), .exit(y)): return x == y
        case let (.replaceProcess(x), .replaceProcess(y)): return x === y
        default: return false
        }
    }
}
