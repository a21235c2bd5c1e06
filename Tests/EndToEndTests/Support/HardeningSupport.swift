import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Support for the Hardening* end-to-end tests: reading and crafting the encrypted file as the
/// `age` tool sees it, running the binary in the background to look at it through /proc, other
/// users (uid 65534 through setpriv) and a network namespace without routes (unshare -rn).

struct HardeningFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

enum Hostile {
    static let age = "/usr/bin/age"
    static let ageKeygen = "/usr/bin/age-keygen"
    static let setpriv = "/usr/bin/setpriv"
    static let unshare = "/usr/bin/unshare"
    static let strace = "/usr/bin/strace"
    /// The uid/gid the "another user" cases use (nobody/nogroup).
    static let nobody: UInt32 = 65534

    static var canSwitchUser: Bool { geteuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv) }
    static var haveStrace: Bool { FileManager.default.isExecutableFile(atPath: strace) }

    /// Whether `unshare -rn` works here (a user namespace with an empty network namespace).
    static let canUnshareNetwork: Bool = {
        Harness.run(unshare, ["-rn", "/bin/true"], env: ["PATH": "/usr/bin:/bin"], timeout: 10).status == 0
    }()

    /// Whether this build has `login` (it lands from another branch): `login --device` against a
    /// closed port answers something other than "not implemented".
    static let loginImplemented: Bool = {
        let s = Sandbox(bus: .none, store: "file")
        let r = s.run(["login", "--device", "--non-interactive"],
                      env: ["CHATGPT_CREDENTIAL_ISSUER": "http://127.0.0.1:1"], timeout: 20)
        return !r.stderr.contains("not implemented")
    }()

    /// Everything a terminal could be driven or confused by: C0 but newline and tab, DEL, C1,
    /// bidi overrides and isolates.
    static func controlScalars(_ s: String) -> [UInt32] {
        s.unicodeScalars.map(\.value).filter { v in
            (v < 0x20 && v != 0x0A && v != 0x09) || (0x7F...0x9F).contains(v)
                || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard !n.isEmpty, haystack.count >= n.count else { return false }
        for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<(i + n.count)]) == n { return true }
        return false
    }

    /// The names in a directory (sorted, without . and ..), empty when it does not exist.
    static func listing(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
    }

    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
    }

    static func owner(_ path: String) -> uid_t? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_uid : nil
    }

    /// Whether process `pid` has `path` open (a link in /proc/PID/fd names it, proc(5)): e.g. a
    /// lock file it is waiting to lock, which it opens before its first attempt.
    static func hasOpen(_ pid: Int32, _ path: String) -> Bool {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return listing("/proc/\(pid)/fd").contains { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == target
        }
    }

    /// Open file descriptors of a process (entries of /proc/PID/fd).
    static func openFDs(_ pid: Int32) -> Int { listing("/proc/\(pid)/fd").count }

    /// The raw bytes of a /proc file (nil when unreadable or gone).
    static func procFile(_ pid: Int32, _ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: "/proc/\(pid)/\(name)").map(Array.init)
    }

    /// PIDs whose parent is `pid`.
    static func children(of pid: Int32) -> [Int32] {
        listing("/proc").compactMap(Int32.init).filter { child in
            guard let stat = procFile(child, "stat").map({ String(decoding: $0, as: UTF8.self) }),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && Int32(fields[1]) == pid
        }
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` seconds pass.
    @discardableResult
    static func waitUntil(_ timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(10_000)
        }
        return try condition()
    }

    /// One-line stderr: exactly one non-empty line.
    static func isOneLine(_ s: String) -> Bool {
        s.split(separator: "\n", omittingEmptySubsequences: true).count == 1 && s.hasSuffix("\n")
    }
}

extension Sandbox {
    var identityFile: String { configDir + "/identity" }
    func credentialPath(_ profile: String? = nil) -> String { dataDir + "/\(profile ?? self.profile).age" }

    /// Seeds a token family and stores it for `profile` with `store` ({"access_token","refresh_token","id_token"}).
    @discardableResult
    func storeSeeded(_ issuer: TestIssuer, profile: String? = nil, _ options: [String: Any] = [:]) throws -> TestIssuer.SeededTokens {
        let profile = profile ?? self.profile
        env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        env["CHATGPT_CREDENTIAL_STORE"] = "file"
        let t = try issuer.seed(options)
        let r = run(["--profile", profile, "store"], stdin: t.storeJSON)
        guard r.status == 0 else { throw HardeningFailure("store failed (\(r.status)): \(r.stderr)") }
        return t
    }

    /// The stored document of `profile` decrypted by the `age` tool with the sandbox's identity;
    /// nil when there is no file. Throws when the file exists but is not a complete age file of a
    /// JSON object.
    func storedDocument(_ profile: String? = nil) throws -> [String: Any]? {
        let path = credentialPath(profile)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let r = Harness.run(Hostile.age, ["-d", "-i", identityFile, path], env: env)
        guard r.status == 0, let o = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [String: Any] else {
            throw HardeningFailure("\(path) is not a complete document: age says \(r.stderr)")
        }
        return o
    }

    /// Writes `document` (any JSON object) as the stored credential of `profile`, encrypted by the
    /// `age` tool to the sandbox's identity (which must exist): what a hostile or older writer
    /// could have left there.
    func plantDocument(_ document: [String: Any], profile: String) throws {
        let pub = Harness.run(Hostile.ageKeygen, ["-y", identityFile], env: env)
        guard pub.status == 0 else { throw HardeningFailure("age-keygen -y: \(pub.stderr)") }
        let json = try JSONSerialization.data(withJSONObject: document)
        mkdir(dataDir, 0o700)
        let path = credentialPath(profile)
        let r = Harness.run(Hostile.age, ["-e", "-r", pub.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "-o", path],
                            env: env, stdin: Array(json))
        guard r.status == 0, chmod(path, 0o600) == 0 else { throw HardeningFailure("age -e: \(r.stderr)") }
    }

    /// Hands the whole sandbox to uid/gid 65534, for runs under `asNobody`.
    func giveToNobody() {
        _ = Harness.run("/bin/chown", ["-R", "\(Hostile.nobody):\(Hostile.nobody)", root], env: ["PATH": "/usr/bin:/bin"])
        chmod(root, 0o755)
    }

    /// `setpriv` arguments that run the rest as uid/gid 65534 without supplementary groups.
    static var asNobody: [String] {
        ["--reuid=\(Hostile.nobody)", "--regid=\(Hostile.nobody)", "--clear-groups", "--"]
    }
}

extension TestIssuer.SeededTokens {
    /// The plain {"access_token","refresh_token","id_token"} shape for `store`.
    var storeJSON: String {
        #"{"access_token":"\#(accessToken)","refresh_token":"\#(refreshToken)","id_token":"\#(idToken)"}"#
    }
    var secrets: [String] { [accessToken, refreshToken, idToken] }
}

extension TestIssuer {
    /// The issuer's process id (for counting its open descriptors).
    var pid: Int32 { process.processIdentifier }
}
