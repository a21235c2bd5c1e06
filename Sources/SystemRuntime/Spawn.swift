import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Starts a program without a shell (posix_spawnp): `argv[0]` is looked up on PATH, the URL is
/// one argument and is never interpreted. The child gets stdin (and, with `quiet`, stdout and
/// stderr) on /dev/null, default SIGPIPE/SIGINT dispositions, and none of our descriptors
/// (they are all close-on-exec). The caller reaps it with `Spawned.poll()`.
public struct Spawned {
    public let pid: pid_t

    public enum State: Equatable { case running, exited(Int32), signalled(Int32) }

    /// Non-blocking reap.
    public func poll() -> State {
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == 0 { return .running }
        if r < 0 { return .exited(-1) }
        let sig = status & 0x7F
        if sig == 0 { return .exited((status >> 8) & 0xFF) }
        return .signalled(sig)
    }

    public static func start(_ argv: [String], childEnvironment: [String: String], quiet: Bool) -> Result<Spawned, CredentialError> {
        guard let program = argv.first, !program.isEmpty else { return .failure(.failure("no program to run")) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if quiet { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigaddset(&defaults, SIGINT)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attr, &mask)
        // Its own process group: Ctrl-C in our terminal cancels the sign-in, not the browser.
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        var cargv: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cargv.append(nil)
        var cenv: [UnsafeMutablePointer<CChar>?] = childEnvironment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") }
        cenv.append(nil)
        defer {
            for p in cargv { free(p) }
            for p in cenv { free(p) }
        }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, program, &actions, &attr, cargv, cenv)
        guard rc == 0 else {
            return .failure(.failure("cannot run \(Sanitize.line(program, limit: 80)): \(String(cString: strerror(rc)))"))
        }
        return .success(Spawned(pid: pid))
    }
}
