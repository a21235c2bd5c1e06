import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `store` on the command line (man page VERBS).
struct StoreCommand: Verb {
    static let spec = VerbSpec(
        name: "store",
        summary: "store a credential read from stdin (Codex auth.json or token JSON)",
        details: """
        Reads one credential (at most 64 KiB) from stdin: Codex's auth.json shape or
        {"access_token","refresh_token","id_token"?}, and stores it. With --from-codex and
        no PATH, reads Codex's Secret Service item (service "Codex Auth") instead of
        auth.json when Codex's config.toml says cli_auth_credentials_store = "keyring"
        (or "auto" and the item exists) or there is no auth.json; says which it read.
        """,
        options: [
            OptionSpec("--from-codex", value: "PATH", valueOptional: true, completion: .files,
                      "import Codex's credential: PATH, else $CODEX_HOME/auth.json (~/.codex/auth.json) or Codex's Secret Service item"),
        ],
        examples: ["\(CommandLineSpec.programName) store --from-codex",
                   "\(CommandLineSpec.programName) store < tokens.json"])

    /// nil = read stdin; .some(nil) = the default Codex path; .some(path).
    var fromCodex: String??

    init(_ a: VerbArguments) throws { fromCodex = a.values["--from-codex"] }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.store(g, fromCodex: fromCodex) }
    static var clientMode: ClientModePolicy<Self> { .refused }
    /// Only a credential read from stdin: Codex's keeps its place (man page, STORES).
    var keyringAdvice: KeyringAdvice { fromCodex == nil ? .keepInTheFile : .none }
}

/// `store [--from-codex [PATH]]` (man page VERBS): one credential from stdin or Codex, saved
/// through the one owner.
extension Runner {
    func store(_ g: GlobalOptions, fromCodex: String??) throws -> Outcome {
        let input: SecretBytes
        switch fromCodex {
        case .none:
            if console.stdinIsTerminal { console.err("chatgpt-credential: paste the credential JSON, then press Ctrl-D") }
            input = try console.readInput(limit: TokenImport.maxBytes)
        case .some(let path):
            let codex = try codexCredential(path: path, g)
            input = codex.secret
            console.err("chatgpt-credential: reading Codex's credential from \(codex.source)")
        }
        let imported = try TokenImport.parse(input, profile: g.profile, now: services.now())
        var d = imported.document
        let fromCodexFile = imported.format == .codexAuthFile || fromCodex != nil
        // Codex may still hold the same session: erase must not revoke it.
        if fromCodexFile { d.origin = .codex }
        let store = try saveNewCredential(d, g)
        console.err("chatgpt-credential: stored the credential for \(Sanitize.line(d.email.isEmpty ? "unknown email" : d.email)), account \(shownAccount(d.accountId)) in \(store.location(for: g.profile))")
        if fromCodexFile { console.err("chatgpt-credential: " + CodexAuthFile.sharedRefreshTokenWarning) }
        return .exit(0)
    }
}
