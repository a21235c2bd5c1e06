// The executable: argv → Invocation → Runner → exit code (or exec). No policy lives here.
import CLI
import CredentialCore
import SystemRuntime
import Secrets
import CSystemShims
import CWarmPath
import Broker
#if canImport(Glibc)
import Glibc
#endif

/// stdout/stderr/stdin of this process.
final class StandardConsole: Console {
    /// stdout was closed when the process started (`>&-`); fd 1 is held by /dev/null.
    let stdoutClosed: Bool
    init(stdoutClosed: Bool) { self.stdoutClosed = stdoutClosed }

    func out(_ text: String) throws {
        if stdoutClosed { throw CredentialError.failure("cannot write to standard output: it is closed") }
        if let e = writeAll(1, Array(text.utf8)) {
            throw CredentialError.failure("cannot write to standard output: \(String(cString: strerror(e)))")
        }
    }
    /// The answer is written from its guarded buffer: no copy of it is made here.
    func out(_ secret: borrowing SecretBytes) throws {
        if stdoutClosed { throw CredentialError.failure("cannot write to standard output: it is closed") }
        if let e = secret.withUnsafeBytes({ writeAll(1, $0) }) {
            throw CredentialError.failure("cannot write to standard output: \(String(cString: strerror(e)))")
        }
    }
    func err(_ line: String) {
        errInPlace(line + "\n")
    }
    /// As given: the sign-in's waiting line rewrites itself with `\r` (man page, login).
    func errInPlace(_ text: String) {
        var text = text
        _ = text.withUTF8 { writeAll(2, UnsafeRawBufferPointer($0)) }
    }

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
    var stdoutIsTerminal: Bool { !stdoutClosed && isatty(1) == 1 }
    var terminalColumns: Int? { columns(of: 1) }
    var errorColumns: Int? { columns(of: 2) }
    private func columns(of fd: Int32) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// nil when every byte was written, else the errno that stopped it.
    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    private func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var off = 0
        while off < bytes.count {
            let n = write(fd, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 { if errno == EINTR { continue }; return errno }
            off += n
        }
        return nil
    }
}

// The process, as one nonisolated function rather than top-level code: in the Swift 6 language
// mode top-level code and its globals belong to the main actor, and the closures formed there
// carry run-time checks of the executor (swift_task_isCurrentExecutor), which alone link the
// Swift concurrency runtime and libdispatch, whose static initialisers run at every start
// (sysconf, sched_getaffinity; ARCHITECTURE.md, "Rules of thumb", start-up). Nothing here is asynchronous.
func runProcess() -> Never {
    // A standard descriptor closed by the caller (`>&-`) must not be handed out again by the next
    // open(): a lock file or the D-Bus socket would receive the answer. Each is held by /dev/null,
    // and a closed stdout is remembered so that the answer fails (exit 1) instead of vanishing.
    var stdoutClosed = false
    for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
        _ = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) // the lowest free descriptor: this one
        if fd == 1 { stdoutClosed = true }
    }

    // Secrets must never land in a core file: no dumps, not ptrace-attachable by other users.
    _ = cs_harden_process()
    // A closed pipe (`get | head -c0`) must be an error return, not a silent kill mid-write.
    let inheritedSIGPIPE = signal(SIGPIPE, SIG_IGN)
    // What `exec`'s program gets back: the signal mask this process started with.
    var inheritedMask = sigset_t()
    pthread_sigmask(SIG_SETMASK, nil, &inheritedMask)

    var envp = environ
    var count = 0
    while envp[count] != nil { count += 1 }
    // Sized once: growing the dictionary rehashes every entry again at each doubling.
    var environment = [String: String](minimumCapacity: count)
    while let entry = envp.pointee {
        let s = String(cString: entry)
        if let eq = s.firstIndex(of: "=") { environment[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
        envp += 1
    }

    // argv as the kernel handed it to this process (see CSystemShims): CommandLine.arguments would
    // read /proc/self/cmdline, which is not there in a root without /proc.
    var arguments: [String] = []
    if cs_argc() >= 0 {
        for i in 0..<cs_argc() { arguments.append(cs_argv(Int32(i)).map { String(cString: $0) } ?? "") }
    } else {
        arguments = CommandLine.arguments
    }

    let console = StandardConsole(stdoutClosed: stdoutClosed)
    // The environment is read here, once, into typed settings (CLI/Settings.swift); bad values of the
    // command line's defaults are usage errors before argv is looked at.
    var settings: Settings
    let invocation: Invocation
    do {
        var answerableDespiteTheEnvironment: Invocation?
        do {
            settings = try Settings(environment: environment)
        } catch let refusal as CredentialError {
            // --version, version and help still answer (ArgumentParser.parse(_:refusedEnvironment:)).
            settings = Settings()
            answerableDespiteTheEnvironment = try ArgumentParser.parse(arguments, refusedEnvironment: refusal)
        }
        // A client-mode `get` the warm path began (its request sent, its answer unread).
        var handoff = cw_broker_handoff()
        if cw_take_broker_handoff(&handoff) == 1 {
            settings.brokerHandoff = BrokerHandoff(socket: handoff.fd, path: String(cString: handoff.path), target: String(cString: handoff.target),
                                                   requestBytesSent: handoff.request_bytes_sent, deadlineMillis: handoff.deadline_ms)
        }
        invocation = try answerableDespiteTheEnvironment ?? ArgumentParser.parse(arguments, settings: settings)
    } catch let e as CredentialError {
        exit(Runner.reportBeforeRunning(e, arguments: arguments, console: console))
    } catch {
        // Only CredentialError is thrown here; anything else stops the process as an error
        // escaping top-level code did before this became a function.
        fatalError("Error raised at top level: \(String(reflecting: error))")
    }

    let runner = Runner(console: console, services: .live(settings: settings, console: console))
    switch runner.run(invocation) {
    case .exit(let code):
        exit(code)
    case .replaceProcess(let image):
        // exec: the child gets the tokens in its environment (built in guarded memory), never in argv.
        cs_restore_core_limit() // the child is the user's program: its core-dump limit is its own
        // …and so are its signals: SIGPIPE as the caller left it, the mask it started with. (No
        // spend-to-save window is open here: the owner closed it before `get`'s answer was made.)
        signal(SIGPIPE, inheritedSIGPIPE)
        pthread_sigmask(SIG_SETMASK, &inheritedMask, nil)
        let e = image.execute()
        console.err("chatgpt-credential: cannot run \(image.argv[0]): \(String(cString: strerror(e)))")
        exit(e == ENOENT ? 127 : 126)
    }
}

runProcess()
