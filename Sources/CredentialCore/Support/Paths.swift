import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Where files live (XDG base directories), resolved once from the environment.
public struct Paths: Sendable {
    public let dataDirectory: String?     // $XDG_DATA_HOME/chatgpt-credential
    public let configDirectory: String?   // $XDG_CONFIG_HOME/chatgpt-credential
    /// $XDG_RUNTIME_DIR as given (absolute), before any ownership check.
    public let runtimeBase: String?

    public init(environment env: [String: String]) {
        func base(_ xdg: String, _ fallback: String) -> String? {
            // XDG base directories must be absolute; anything else is ignored (XDG spec).
            if let v = env[xdg], v.hasPrefix("/") { return v }
            if let home = env["HOME"], home.hasPrefix("/") { return home + fallback }
            return nil
        }
        dataDirectory = base("XDG_DATA_HOME", "/.local/share").map { $0 + "/chatgpt-credential" }
        configDirectory = base("XDG_CONFIG_HOME", "/.config").map { $0 + "/chatgpt-credential" }
        if let r = env["XDG_RUNTIME_DIR"], r.hasPrefix("/") { runtimeBase = r } else { runtimeBase = nil }
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

    /// Where the per-profile locks (and the shared refresh back-off) live. They belong to the user
    /// and the profile, not to the caller's data directory (SPEC "Changes to a credential: one
    /// owner"), so two processes of one user that share a keyring share the lock whatever their
    /// XDG_DATA_HOME: `$XDG_RUNTIME_DIR/chatgpt-credential` when XDG_RUNTIME_DIR is a directory
    /// of this user, else `/run/user/UID/chatgpt-credential` when that is, else beside the file
    /// store. (FileLock then creates the directory 0700 and refuses it if it is loose or foreign.)
    public func lockDirectory() -> String? {
        func ours(_ dir: String) -> Bool {
            var st = stat()
            return stat(dir, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && st.st_uid == geteuid()
        }
        if let r = runtimeBase, ours(r) { return r + "/chatgpt-credential" }
        let run = "/run/user/\(geteuid())"
        if ours(run) { return run + "/chatgpt-credential" }
        return dataDirectory
    }

    /// The per-profile lock file, `NAME.lock` in `lockDirectory()`.
    public func lockFile(for profile: Profile) -> String? {
        lockDirectory().map { $0 + "/" + profile.name + ".lock" }
    }
}
