import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Where files live (XDG base directories), resolved once from the settings the executable read
/// (`CLI/Settings.swift`).
public struct Paths: Sendable {
    public let dataDirectory: String?     // $XDG_DATA_HOME/chatgpt-credential
    public let configDirectory: String?   // $XDG_CONFIG_HOME/chatgpt-credential
    /// $XDG_RUNTIME_DIR as given (absolute), before any ownership check. Never used for the
    /// locks (`lockDirectory` depends on the uid alone).
    public let runtimeBase: String?

    /// From `HOME`, `XDG_DATA_HOME`, `XDG_CONFIG_HOME` and `XDG_RUNTIME_DIR` (nil: unset).
    public init(home: String? = nil, dataHome: String? = nil, configHome: String? = nil, runtimeDirectory: String? = nil) {
        func base(_ xdg: String?, _ fallback: String) -> String? {
            // XDG base directories must be absolute; anything else is ignored (XDG spec).
            if let v = xdg, v.hasPrefix("/") { return v }
            if let home, home.hasPrefix("/") { return home + fallback }
            return nil
        }
        dataDirectory = base(dataHome, "/.local/share").map { $0 + "/chatgpt-credential" }
        configDirectory = base(configHome, "/.config").map { $0 + "/chatgpt-credential" }
        if let r = runtimeDirectory, r.hasPrefix("/") { runtimeBase = r } else { runtimeBase = nil }
    }

    /// The default X25519 key of the file store.
    public var identityFile: String? { configDirectory.map { $0 + "/identity" } }

    /// `NAME.age` in the file store's directory.
    public static func encryptedFile(in directory: String, for profile: Profile) -> String {
        directory + "/" + profile.name + ".age"
    }

    public func encryptedFile(for profile: Profile) -> String? {
        dataDirectory.map { Paths.encryptedFile(in: $0, for: profile) }
    }

    /// Where the per-profile locks (and the shared refresh back-off) live (man page FILES). The
    /// place depends only on the uid, never on an environment string, so every process of one
    /// user takes the same lock whatever its XDG_RUNTIME_DIR, XDG_DATA_HOME or bus address:
    /// `/run/user/UID/chatgpt-credential` when `/run/user/UID` is what logind makes (a real
    /// directory of this user that nobody else can write), else `/tmp/chatgpt-credential-UID`
    /// (tmux's model). `LockDirectory.open` then creates it 0700 and refuses it when it is not a
    /// directory of this user that only the user can access; it is never followed nor chmod'ed.
    public func lockDirectory() -> String { Paths.lockDirectory(uid: geteuid()) }

    /// The lock directory is the tool's per-user runtime directory, which the broker's socket
    /// shares.
    public static func lockDirectory(uid: uid_t) -> String { userRuntimeDirectory(uid: uid) }

    /// The per-user runtime directory of this tool (man page FILES): the locks, the back-off and
    /// the broker's default socket. `/run/user/UID/chatgpt-credential` when `/run/user/UID` is
    /// what logind makes (a real directory of this user that nobody else can write), else
    /// `/tmp/chatgpt-credential-UID`; the uid alone decides, never an environment string.
    public static func userRuntimeDirectory(uid: uid_t = geteuid()) -> String {
        let run = "/run/user/\(uid)"
        var st = stat()
        if lstat(run, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid, st.st_mode & 0o022 == 0 {
            return run + "/chatgpt-credential"
        }
        return "/tmp/chatgpt-credential-\(uid)"
    }

    /// The per-profile lock file, `NAME.lock` in `lockDirectory()`.
    public func lockFile(for profile: Profile) -> String {
        lockDirectory() + "/" + profile.name + ".lock"
    }
}
