// The executable: argv → Invocation → Runner → exit code (or exec). No policy lives here.
import CLI
import CredentialCore
import Secrets
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// stdout/stderr/stdin of this process.
final class StandardConsole: Console {
    func out(_ text: String) { writeAll(1, Array(text.utf8)) }
    func err(_ line: String) { writeAll(2, Array((line + "\n").utf8)) }

    func readInput(limit: Int) throws -> SecretBytes {
        var data = SecretBytes(capacity: 16384)
        guard try FileSystem.readToEnd(0, into: &data, limit: limit, failure: {
            .badInput("cannot read stdin: \(FileSystem.errorText($0))")
        }) else {
            throw CredentialError.badInput("input on stdin is larger than \(limit / 1024) KiB")
        }
        return data
    }

    func readSome(_ max: Int) throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: max)
        while true {
            let n = buf.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CredentialError.badInput("cannot read stdin: \(String(cString: strerror(errno)))")
            }
            return Array(buf[0..<n])
        }
    }

    var stdinIsTerminal: Bool { isatty(0) == 1 }
    var stderrIsTerminal: Bool { isatty(2) == 1 }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return }
            off += n
        }
    }
}

// Secrets must never land in a core file: no dumps, not ptrace-attachable by other users.
_ = cs_harden_process()
// A closed pipe (`get | head -c0`) must be an error return, not a silent kill mid-write.
signal(SIGPIPE, SIG_IGN)

var environment: [String: String] = [:]
var envp = environ
while let entry = envp.pointee {
    let s = String(cString: entry)
    if let eq = s.firstIndex(of: "=") { environment[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
    envp += 1
}

let console = StandardConsole()
let invocation: Invocation
do {
    invocation = try ArgumentParser.parse(CommandLine.arguments, environment: environment)
} catch let e as CredentialError {
    console.err("chatgpt-credential: " + e.message)
    exit(e.exitCode)
}

let runner = Runner(console: console, services: .live(environment: environment, console: console))
switch runner.run(invocation) {
case .exit(let code):
    exit(code)
case .replaceProcess(let argv, let env):
    // exec: the child gets the tokens in its environment, never in argv.
    for (k, v) in env { setenv(k, v, 1) }
    cs_restore_core_limit() // the child is the user's program: its core-dump limit is its own
    var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
    cargs.append(nil)
    execvp(argv[0], &cargs)
    let e = errno
    console.err("chatgpt-credential: cannot run \(argv[0]): \(String(cString: strerror(e)))")
    exit(e == ENOENT ? 127 : 126)
}
