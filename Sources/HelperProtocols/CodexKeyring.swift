import CredentialCore
import Secrets

/// Where Codex keeps its credential, for `store --from-codex` (man page, STORE): `auth.json` in
/// CODEX_HOME, or, with `cli_auth_credentials_store = "keyring"` (or `"auto"`) in Codex's
/// `config.toml`, the Secret Service item with service `Codex Auth` and account `cli|` + the
/// first 16 hex digits of the SHA-256 of the canonical CODEX_HOME path; its secret is the same
/// JSON as auth.json. Pure: the caller reads the files and the keyring.
public enum CodexKeyring {
    public static let service = "Codex Auth"

    /// Codex's `cli_auth_credentials_store`.
    public enum Mode: String, Sendable, Equatable {
        case file, keyring, auto
    }

    /// `$CODEX_HOME` when set and non-empty, else `$HOME/.codex`; nil when neither is usable.
    public static func home(codexHome: String?, home: String?) -> String? {
        if let codexHome, !codexHome.isEmpty { return codexHome }
        if let home, !home.isEmpty { return (home.hasSuffix("/") ? home : home + "/") + ".codex" }
        return nil
    }

    /// The item's `account` attribute for a canonical (symlink-free, absolute) CODEX_HOME path.
    ///
    ///     CodexKeyring.account(canonicalHome: "/home/ann/.codex")  // "cli|" + 16 hex digits
    public static func account(canonicalHome: String) -> String {
        let digest = Sodium.sha256(Array(canonicalHome.utf8))
        return "cli|" + Hex.encode(digest.prefix(8))
    }

    /// The attribute sets to look for, in order: `account` (what Codex's store names it), then
    /// `username` (the attribute name the Rust `keyring` crate writes for the same value).
    public static func searches(account: String) -> [[(String, String)]] {
        [[("service", service), ("account", account)], [("service", service), ("username", account)]]
    }

    /// The top-level `cli_auth_credentials_store` of a config.toml, nil when absent or not one
    /// of the known values. Only what precedes the first `[table]` is top level; the value is a
    /// basic or literal TOML string, and a `#` comment may follow it.
    public static func mode(configTOML text: String) -> Mode? {
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("[") { return nil }
            guard let eq = line.firstIndex(of: "=") else { continue }
            var key = line[..<eq].trimmingSpaces
            if key.count >= 2, let q = key.first, q == "\"" || q == "'", key.last == q { key = key.dropFirst().dropLast() }
            guard key == "cli_auth_credentials_store" else { continue }
            let value = line[line.index(after: eq)...].trimmingSpaces
            guard let q = value.first, q == "\"" || q == "'" else { return nil }
            let rest = value.dropFirst()
            guard let end = rest.firstIndex(of: q) else { return nil }
            let after = rest[rest.index(after: end)...].trimmingSpaces
            guard after.isEmpty || after.hasPrefix("#") else { return nil }
            return Mode(rawValue: String(rest[..<end]))
        }
        return nil
    }
}

private extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
