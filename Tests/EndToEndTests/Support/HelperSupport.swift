import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Support for the git/docker helper end-to-end tests: a runner that feeds stdin from a file and
/// tells a signal death from an exit status, the sandbox's helper symlinks and git environment,
/// and signing a sandbox in through the test issuer with the file store.

typealias ProcessResult = RunResult

enum Proc {
    /// Runs `executable` with exactly `env` (see `Harness.run`).
    static func run(_ executable: String, _ args: [String], env: [String: String], stdin: [UInt8]? = nil,
                    directory: String? = nil, timeout: Double = 60) -> ProcessResult {
        Harness.run(executable, args, env: env, stdin: stdin, directory: directory, timeout: timeout)
    }

    /// The first executable named `name` on the test process's PATH (or nil).
    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        return nil
    }
}

/// Debian's own tools, by absolute path so that a pyenv/Homebrew shim earlier on PATH is not used.
enum Tools {
    static let git = "/usr/bin/git"
    static let python3 = "/usr/bin/python3"
    static let openssl = "/usr/bin/openssl"
    static var haveGit: Bool { FileManager.default.isExecutableFile(atPath: git) }
    static var haveOpenSSL: Bool { FileManager.default.isExecutableFile(atPath: openssl) }
    static var haveGitHTTPBackend: Bool { FileManager.default.isExecutableFile(atPath: "/usr/lib/git-core/git-http-backend") }
    static var haveDockerPyCreds: Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dockerpycreds/store.py")
            && FileManager.default.isExecutableFile(atPath: python3)
    }
}

extension Sandbox {
    static let gitHelperName = "git-credential-chatgpt"
    static let dockerHelperName = "docker-credential-chatgpt"

    /// `ROOT/bin`, holding `git-credential-chatgpt` and `docker-credential-chatgpt` → the built
    /// binary (busybox style, as `make install` lays them out).
    var binDir: String { root + "/bin" }

    @discardableResult
    func installHelperLinks() -> String {
        mkdir(binDir, 0o755)
        for name in [Self.gitHelperName, Self.dockerHelperName] {
            let link = binDir + "/" + name
            if !FileManager.default.fileExists(atPath: link) { symlink(Harness.binary, link) }
        }
        return binDir
    }

    /// The sandbox environment with the helper links first on PATH and git isolated from the
    /// machine's configuration: HOME is the sandbox's, no system config, never a prompt.
    var helperEnv: [String: String] {
        installHelperLinks()
        var e = env
        e["PATH"] = binDir + ":/usr/bin:/bin"
        e["GIT_TERMINAL_PROMPT"] = "0"
        e["GIT_CONFIG_NOSYSTEM"] = "1"
        return e
    }

    /// Runs `chatgpt-credential ARGS` (or the binary under a helper name via its PATH symlink)
    /// with stdin from bytes. `env` entries are added to `helperEnv`.
    func runHelper(_ args: [String], stdin: [UInt8]? = nil, env extra: [String: String] = [:],
                   as name: String? = nil, timeout: Double = 60) -> ProcessResult {
        var e = helperEnv
        for (k, v) in extra { e[k] = v }
        let exe = name.map { binDir + "/" + $0 } ?? Harness.binary
        return Proc.run(exe, args, env: e, stdin: stdin, timeout: timeout)
    }

    /// Runs Debian's git with `helperEnv` (+ `env`).
    func git(_ args: [String], stdin: String? = nil, env extra: [String: String] = [:], directory: String? = nil) -> ProcessResult {
        var e = helperEnv
        for (k, v) in extra { e[k] = v }
        return Proc.run(Tools.git, args, env: e, stdin: stdin.map { Array($0.utf8) }, directory: directory)
    }

    /// Seeds a token family at the issuer and stores it in this sandbox's file store through
    /// `chatgpt-credential store` (the bare token shape with the account id; `codex: true` for
    /// Codex's auth.json, which `erase` then does not revoke), so `get` finds it. Points the
    /// sandbox at the issuer and the file store.
    func signIn(_ issuer: TestIssuer, _ options: [String: Any] = [:], codex: Bool = false) throws -> TestIssuer.SeededTokens {
        env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        env["CHATGPT_CREDENTIAL_STORE"] = "file"
        let tokens = try issuer.seed(options)
        let shape = codex ? tokens.codexAuthJSON
            : #"{"access_token":"\#(tokens.accessToken)","refresh_token":"\#(tokens.refreshToken)","id_token":"\#(tokens.idToken)","account_id":"\#(tokens.accountId)"}"#
        let r = runHelper(["store"], stdin: Array(shape.utf8))
        guard r.status == 0, !r.signaled else {
            throw TestIssuer.Failure(description: "store failed (\(r.status)): \(r.stderr)")
        }
        return tokens
    }

    /// The encrypted credential file of the sandbox's profile.
    var credentialFile: String { dataDir + "/\(profile).age" }
    func fileBytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

    /// What `chatgpt-credential get` prints now (the stored token, refreshed when needed).
    func currentToken() -> String {
        runHelper(["get"]).stdout.trimmingCharacters(in: .newlines)
    }
}

/// A deterministic generator for the garbage-input tests (SplitMix64), so a failure replays.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}
