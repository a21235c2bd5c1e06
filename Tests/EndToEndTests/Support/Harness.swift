import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built binary the way a user's shell would, inside a throwaway HOME.
/// Every end-to-end test builds on this, so each gets its own files and profile names.
struct RunResult {
    var status: Int32
    var stdoutBytes: [UInt8]
    var stderr: String
    var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }
    var timedOut = false
    /// True when the process died of a signal (`status` is then the signal number).
    var signaled = false
    /// stdout and stderr together, for "the token appears nowhere" checks.
    var allOutput: String { stdout + "\n" + stderr }
}

enum Harness {
    /// Directories outside /usr that the binary's shared libraries live in (a toolchain's Swift
    /// runtime in a debug build), for a sandbox or namespace that must still start the binary.
    static let libraryDirectories: [String] = {
        let r = Harness.run("/usr/bin/ldd", [Harness.binary], env: ["PATH": "/usr/bin:/bin"])
        var dirs: [String] = []
        for line in r.stdout.split(separator: "\n") {
            guard let arrow = line.range(of: "=> /") else { continue }
            let path = String(line[line.index(arrow.lowerBound, offsetBy: 3)...].split(separator: " ")[0])
            let dir = (path as NSString).deletingLastPathComponent
            if !dir.hasPrefix("/usr/"), !dir.hasPrefix("/lib"), !dirs.contains(dir) { dirs.append(dir) }
        }
        return dirs
    }()

    /// Starts `process` as a shell would, with SIGINT, SIGTERM, SIGHUP and SIGQUIT unblocked: the
    /// test runner's threads block most signals, and a child inherits the mask of the thread
    /// that starts it.
    static func runAsAShellWould(_ process: Process) throws {
        var unblock = sigset_t(), previous = sigset_t()
        sigemptyset(&unblock)
        for s in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&unblock, s) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
    }

    /// The directory holding the built products (the test bundle sits beside the binary).
    static let productsDirectory: String = {
        if let dir = ProcessInfo.processInfo.environment["CHATGPT_CREDENTIAL_BIN_DIR"] { return dir }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = (exe as NSString).deletingLastPathComponent
        // swift-testing may run from a nested bundle path; walk up until the binary is found.
        for _ in 0..<4 {
            if FileManager.default.isExecutableFile(atPath: dir + "/chatgpt-credential") { return dir }
            dir = (dir as NSString).deletingLastPathComponent
        }
        return (exe as NSString).deletingLastPathComponent
    }()

    static var binary: String { productsDirectory + "/chatgpt-credential" }

    /// The repository root (for Tests/TestIssuer and fixtures).
    static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() } // Support, EndToEndTests, Tests, root
        return url.path
    }()

    /// The port a loopback test server announces as its first stdout line (`PORT=<n>`), or nil when
    /// none comes within `timeout` seconds.
    static func announcedPort(_ stdout: Pipe, timeout: Double) -> Int? {
        final class Box: @unchecked Sendable { var text = "" }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let reader = stdout.fileHandleForReading
        DispatchQueue.global().async {
            var line = Data()
            while !line.contains(0x0A) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            box.text = String(decoding: line, as: UTF8.self)
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success,
              let first = box.text.split(separator: "\n").first, first.hasPrefix("PORT="),
              let n = Int(first.dropFirst(5)), n > 0 else { return nil }
        return n
    }

    /// Runs an executable with exactly `env`, killing it after `timeout` seconds. stdin comes from
    /// a file holding `stdin` (or /dev/null), not a pipe: a process that stops reading early
    /// (oversized input) must not make the writer in this process fail.
    static func run(_ executable: String, _ args: [String], env: [String: String], stdin: [UInt8]? = nil,
                    directory: String? = nil, timeout: Double = 30) -> RunResult {
        do {
            return try Background(executable, args, env: env, stdin: stdin, directory: directory).finish(timeout: timeout)
        } catch {
            return RunResult(status: -1, stdoutBytes: [], stderr: "spawn failed: \(error)")
        }
    }
}

/// A throwaway HOME with its own XDG directories. The D-Bus session of the test process is
/// passed through (so the Secret Service is the throwaway keyring `make test` started) unless
/// `bus` says otherwise. Its default profile (`CHATGPT_CREDENTIAL_PROFILE`) is a name of its own:
/// the profile locks, the shared back-off and the access-cache entries belong to the user and
/// the profile (man page FILES, ACCESS CACHE), not to a HOME, so sandboxes running at the same
/// time must not share a profile name.
final class Sandbox {
    enum Bus { case inherit, none }

    let root: String
    var env: [String: String]
    /// The profile a run uses unless it says `--profile`.
    let profile = uniqueProfile("sb")

    init(bus: Bus = .inherit, store: String? = nil) {
        var template = Array("/tmp/ccred-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        root = dir
        let parent = ProcessInfo.processInfo.environment
        var e: [String: String] = [
            "HOME": dir + "/home",
            "XDG_DATA_HOME": dir + "/data",
            "XDG_CONFIG_HOME": dir + "/config",
            "XDG_RUNTIME_DIR": dir + "/run",
            "PATH": parent["PATH"] ?? "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "SWIFT_BACKTRACE": "enable=no",
        ]
        for d in ["home", "data", "config", "run"] {
            mkdir(dir + "/" + d, 0o700)
        }
        if bus == .inherit, let addr = parent["DBUS_SESSION_BUS_ADDRESS"] { e["DBUS_SESSION_BUS_ADDRESS"] = addr }
        if let store { e["CHATGPT_CREDENTIAL_STORE"] = store }
        e["CHATGPT_CREDENTIAL_PROFILE"] = profile
        env = e
    }

    deinit {
        _ = Harness.run("/bin/rm", ["-rf", root], env: ["PATH": "/usr/bin:/bin"])
    }

    var dataDir: String { env["XDG_DATA_HOME"]! + "/chatgpt-credential" }
    /// Where the profile locks (and the shared refresh back-off) live: chosen by the uid alone
    /// (man page FILES), whatever the sandbox's XDG directories.
    var lockDir: String { Sandbox.userLockDir }
    static var userLockDir: String {
        let uid = geteuid()
        var st = stat()
        if lstat("/run/user/\(uid)", &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid, st.st_mode & 0o022 == 0 {
            return "/run/user/\(uid)/chatgpt-credential"
        }
        return "/tmp/chatgpt-credential-\(uid)"
    }
    func lockFile(_ profile: String? = nil) -> String { lockDir + "/\(profile ?? self.profile).lock" }
    /// Forgets a transient refresh failure another run recorded, so the next get asks the issuer.
    func forgetSharedBackoff(_ profile: String? = nil) { unlink(lockDir + "/\(profile ?? self.profile).backoff") }
    /// This sandbox's files in the shared lock directory (its profile's lock and back-off).
    var ownLockFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: lockDir)) ?? []).filter { $0.hasPrefix(profile + ".") }.sorted()
    }
    var configDir: String { env["XDG_CONFIG_HOME"]! + "/chatgpt-credential" }

    /// Runs `chatgpt-credential ARGS…` (or the same binary under another argv[0] via a symlink).
    func run(_ args: [String], stdin: String? = nil, env extra: [String: String] = [:], timeout: Double = 30,
             as name: String? = nil) -> RunResult {
        var e = env
        for (k, v) in extra { e[k] = v }
        var exe = Harness.binary
        if let name {
            let link = root + "/bin/" + name
            if !FileManager.default.fileExists(atPath: link) {
                mkdir(root + "/bin", 0o755)
                symlink(Harness.binary, link)
            }
            exe = link
        }
        return Harness.run(exe, args, env: e, stdin: stdin.map { Array($0.utf8) }, timeout: timeout)
    }
}

/// Unique names so tests that share the one throwaway keyring never see each other's items.
func uniqueProfile(_ prefix: String = "t") -> String {
    "\(prefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
}

/// A JWT the tool can read claims from (signature is not checked by the tool).
func makeJWT(exp: Int64, accountId: String = "acct-123", plan: String = "plus", email: String = "user@example.com") -> String {
    func b64(_ s: String) -> String {
        Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    let payload = #"{"exp":\#(exp),"email":"\#(email)","https://api.openai.com/auth":{"chatgpt_account_id":"\#(accountId)","chatgpt_plan_type":"\#(plan)","chatgpt_user_id":"user-1"}}"#
    return b64(#"{"alg":"RS256","typ":"JWT"}"#) + "." + b64(payload) + ".c2lnbmF0dXJl"
}

/// A process started as a shell would start it (`Harness.runAsAShellWould`), stdin from a
/// temporary file (removed when it is done) or /dev/null, stdout and stderr drained into memory;
/// `Harness.run` waits for one at once, signal tests keep it running to signal it.
final class Background {
    let process = Process()
    private let out = Pipe(), err = Pipe()
    private final class Box: @unchecked Sendable { var data = Data() }
    private let outBox = Box(), errBox = Box()
    private let group = DispatchGroup()
    private var inputPath: String?

    init(_ executable: String, _ args: [String], env: [String: String], stdin: [UInt8]? = nil, directory: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.environment = env
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if let stdin {
            var template = Array("/tmp/ccred-stdin-XXXXXX".utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            inputPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            var off = 0
            while off < stdin.count {
                let n = stdin[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                off += n
            }
            close(fd)
            process.standardInput = FileHandle(forReadingAtPath: inputPath!)
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        process.standardOutput = out
        process.standardError = err
        do { try Harness.runAsAShellWould(process) } catch { removeInput(); throw error }
        let (o, e, ob, eb) = (out, err, outBox, errBox)
        group.enter(); DispatchQueue.global().async { [group] in ob.data = o.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter(); DispatchQueue.global().async { [group] in eb.data = e.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    }

    deinit {
        if process.isRunning { kill(pid, SIGKILL); process.waitUntilExit() }
        removeInput()
    }

    private func removeInput() {
        if let inputPath { unlink(inputPath) }
        inputPath = nil
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits (bounded: SIGKILL after `timeout`) and returns what it wrote; `signaled`: killed by
    /// signal `status`.
    func finish(timeout: Double = 30) -> RunResult {
        let deadline = Date().addingTimeInterval(timeout)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline { timedOut = true; kill(pid, SIGKILL); break }
            usleep(2_000)
        }
        process.waitUntilExit()
        group.wait()
        removeInput()
        return RunResult(status: process.terminationStatus, stdoutBytes: Array(outBox.data),
                         stderr: String(decoding: errBox.data, as: UTF8.self), timedOut: timedOut,
                         signaled: process.terminationReason == .uncaughtSignal)
    }

    func kill9() -> RunResult {
        kill(pid, SIGKILL)
        return finish()
    }
}
