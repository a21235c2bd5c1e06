import Secrets

/// Where files live (XDG base directories), resolved once from the environment.
public struct Paths: Sendable {
    public let dataDirectory: String?     // $XDG_DATA_HOME/chatgpt-credential
    public let configDirectory: String?   // $XDG_CONFIG_HOME/chatgpt-credential
    public let runtimeDirectory: String?  // $XDG_RUNTIME_DIR/chatgpt-credential

    public init(environment env: [String: String]) {
        func base(_ xdg: String, _ fallback: String) -> String? {
            // XDG base directories must be absolute; anything else is ignored (XDG spec).
            if let v = env[xdg], v.hasPrefix("/") { return v }
            if let home = env["HOME"], home.hasPrefix("/") { return home + fallback }
            return nil
        }
        dataDirectory = base("XDG_DATA_HOME", "/.local/share").map { $0 + "/chatgpt-credential" }
        configDirectory = base("XDG_CONFIG_HOME", "/.config").map { $0 + "/chatgpt-credential" }
        if let r = env["XDG_RUNTIME_DIR"], r.hasPrefix("/") { runtimeDirectory = r + "/chatgpt-credential" } else { runtimeDirectory = nil }
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

    /// The per-profile lock file: beside the file store, whichever store holds the credential,
    /// so one lock serialises refreshes for the profile across stores.
    public func lockFile(for profile: Profile) -> String? {
        (dataDirectory ?? runtimeDirectory).map { $0 + "/" + profile.name + ".lock" }
    }
}
