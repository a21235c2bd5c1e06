import CredentialCore
import SystemRuntime
import HelperProtocols
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Where `store --from-codex` reads Codex's credential (man page, STORE): PATH when given;
/// otherwise Codex's own choice in `$CODEX_HOME/config.toml` (`cli_auth_credentials_store`):
/// `keyring` → its Secret Service item; `auto` → that item when present, else auth.json; `file`
/// or unset → auth.json, and the item when there is no auth.json.
extension Runner {
    struct CodexCredential: ~Copyable {
        var secret: SecretBytes
        /// For the message: the file's path, or the item's service and account.
        var source: String
    }

    func codexCredential(path: String?, _ g: GlobalOptions) throws -> CodexCredential {
        if let path { return CodexCredential(secret: try FileSystem.readSmallFile(path, limit: TokenImport.maxBytes), source: path) }
        let settings = services.settings
        guard let home = CodexKeyring.home(codexHome: settings.codexHome, home: settings.home),
              let authPath = CodexAuthFile.defaultPath(codexHome: settings.codexHome, home: settings.home) else {
            throw CredentialError.usage("cannot find Codex's auth.json: set CODEX_HOME or HOME, or give its path")
        }
        let configPath = (home.hasSuffix("/") ? home : home + "/") + "config.toml"
        let mode = codexMode(configPath, g)
        var info = stat()
        let fileExists = stat(authPath, &info) == 0
        let account = CodexKeyring.account(canonicalHome: Self.canonicalPath(home))
        let item = "Secret Service item '\(CodexKeyring.service)', account '\(account)'"
        verbose(g, "Codex home \(home): cli_auth_credentials_store = \(mode?.rawValue ?? "(unset)"), auth.json \(fileExists ? "present" : "absent"), keyring account \(account)")
        func fromFile() throws -> CodexCredential {
            CodexCredential(secret: try FileSystem.readSmallFile(authPath, limit: TokenImport.maxBytes), source: authPath)
        }
        func fromKeyring() throws -> CodexCredential? {
            for attributes in CodexKeyring.searches(account: account) {
                if let secret = try services.lookupForeignSecret(attributes) { return CodexCredential(secret: secret, source: "the " + item) }
            }
            return nil
        }

        switch mode {
        case .keyring:
            if let found = try fromKeyring() { return found }
            throw CredentialError.badInput("Codex keeps its credential in the Secret Service (cli_auth_credentials_store = \"keyring\" in \(configPath)), but there is no \(item); run 'codex login', or give the path of an auth.json")
        case .auto:
            do {
                if let found = try fromKeyring() { return found }
            } catch let e as CredentialError where fileExists {
                // Codex's own "auto" falls back to the file when the keyring cannot be used.
                console.err("chatgpt-credential: cannot read the \(item) (\(e.message)); using \(authPath)")
            }
            if fileExists { return try fromFile() }
            throw CredentialError.badInput("no Codex credential: neither \(authPath) nor a \(item) exists; run 'codex login', or give the path of an auth.json")
        case .file, .none:
            if fileExists { return try fromFile() }
            let found: CodexCredential?
            do {
                found = try fromKeyring()
            } catch CredentialError.storeUnavailable(let why, _) {
                // No Secret Service at all: the missing file is the error to report. A locked
                // keyring or one that does not answer may hold the item: that is reported (exit 5).
                verbose(g, "no Codex keyring item: \(why)")
                found = nil
            } catch CredentialError.keyringLocked(let message) {
                throw CredentialError.keyringLocked("there is no \(authPath), and Codex's item may be in the locked keyring: \(message)")
            }
            if let found { return found }
            return try fromFile() // throws: cannot read PATH
        }
    }

    /// Codex's `cli_auth_credentials_store`, nil when config.toml is absent, unreadable or silent.
    private func codexMode(_ configPath: String, _ g: GlobalOptions) -> CodexKeyring.Mode? {
        do {
            let bytes = try FileSystem.readSmallFile(configPath, limit: 1 << 20)
            let text = bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            return CodexKeyring.mode(configTOML: text)
        } catch let e as CredentialError {
            verbose(g, "Codex config: \(e.message)")
            return nil
        } catch {
            return nil
        }
    }

    /// realpath(3) of `path`, or `path` itself when it cannot be resolved (Codex does the same).
    static func canonicalPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
