import CredentialCore
import Secrets
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// What `exec` replaces this process with (man page VERBS, `exec`): the program, its arguments,
/// the environment it inherits, and the variables that carry a secret. Those are kept as
/// `NAME=VALUE` C strings in one guarded buffer from the token's own guarded memory up to
/// execve(2): the child's `envp` points into it, so the token is never a Swift String and never
/// passes through setenv(3)'s heap copy. When the exec fails, the buffer is wiped as it goes.
///
/// A class, not a value: `Outcome` carries it to `main.swift` and compares it by identity, so no
/// secret is ever compared or copied by an `Equatable` payload. `@unchecked Sendable`: it is
/// filled by the one thread that makes it before it is returned, and read once after.
public final class ProcessImage: @unchecked Sendable {
    public let argv: [String]
    /// The environment this process received (`Settings.childEnvironment`), none of it secret.
    public let inherited: [String: String]
    /// The names of the variables held in `secretEntries`, in order, with their values' lengths.
    public private(set) var secretNames: [String] = []
    private var secretLengths: [Int] = []
    /// `NAME=VALUE\0` for each variable in `secretNames`, back to back.
    private var secretEntries = SecretBytes()

    public init(argv: [String], inherited: [String: String]) {
        self.argv = argv
        self.inherited = inherited
    }

    /// Sets `name` to the token's bytes in the child's environment (replacing an inherited value).
    public func setSecret(_ name: String, to value: SecretToken) {
        precondition(!name.isEmpty && !name.contains("=") && !secretNames.contains(name))
        secretEntries.append(utf8: name + "=")
        value.withUnsafeBytes { secretEntries.append($0) }
        secretEntries.append(0)
        secretNames.append(name)
        secretLengths.append(value.count)
    }

    /// The inherited entries the child gets (those not replaced by a secret one), sorted.
    private var plainEntries: [String] {
        let secret = Set(secretNames)
        return inherited.keys.filter { !secret.contains($0) }.sorted().map { "\($0)=\(inherited[$0]!)" }
    }

    /// The child's environment with each secret value shown as `<N bytes>` (tests, diagnostics).
    public var redactedEnvironment: [String] {
        plainEntries + zip(secretNames, secretLengths).map { "\($0)=<\($1) bytes>" }
    }

    /// execvpe(3) with this image; returns the errno of a failed exec (it returns at all only then).
    public func execute() -> Int32 {
        let args: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let plain: [UnsafeMutablePointer<CChar>?] = plainEntries.map { strdup($0) }
        defer { for p in args + plain { free(p) } }
        return secretEntries.withUnsafeBytes { raw -> Int32 in
            var envp = plain
            if let base = raw.baseAddress?.assumingMemoryBound(to: CChar.self) {
                var start = 0
                for (i, byte) in raw.enumerated() where byte == 0 {
                    envp.append(UnsafeMutablePointer(mutating: base + start))
                    start = i + 1
                }
            }
            envp.append(nil)
            _ = cs_execvpe(argv[0], args, envp)
            return errno
        }
    }
}
