import CredentialCore
import SystemRuntime
import OAuth
import SignIn
import HelperProtocols
import Credentials
import Secrets

/// `login` on the command line: its options and their parsing (man page VERBS).
struct LoginCommand: Verb {
    static let spec = VerbSpec(
        name: "login",
        summary: "sign in and store the tokens",
        details: """
        Signs in with OAuth and stores the tokens. Without an option, uses the device code
        flow over SSH (SSH_CONNECTION/SSH_TTY set) or without a display, and the browser
        flow otherwise.
        """,
        options: [
            OptionSpec("--device", exclusiveGroup: "flow", "device code flow: shows a URL and a code to enter on any device"),
            OptionSpec("--browser", exclusiveGroup: "flow", "browser flow with a loopback listener on 127.0.0.1:1455 (1457 when busy)"),
            OptionSpec("--no-browser", exclusiveGroup: "flow", "print the sign-in URL, then paste the address the browser ended on"),
            OptionSpec("--clipboard", "device code flow: also offer the code to the terminal's clipboard (OSC 52)"),
        ],
        examples: ["\(CommandLineSpec.programName) login    # device code over SSH, else the browser",
                   "\(CommandLineSpec.programName) --profile work login --device"],
        wordsFromOtherTools: ["signin": "", "sign-in": "", "auth": ""])

    /// nil: the device flow over SSH or without a display, else the browser (`Runner.defaultLoginMode`).
    var mode: LoginMode?
    var clipboard = false

    init(_ a: VerbArguments) throws {
        mode = try a.oneOf([("--device", LoginMode.device), ("--browser", .browser), ("--no-browser", .paste)])
        clipboard = a.has("--clipboard")
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.login(g, mode: mode, clipboard: clipboard) }
    static var clientMode: ClientModePolicy<Self> { .refused }
    var keyringAdvice: KeyringAdvice { .keepInTheFile }
}

/// `login [--device | --browser | --no-browser]`: picks a flow, runs it, stores the tokens where
/// `auto` says (under the profile lock) and reports who signed in.
extension Runner {
    /// An explicit flag wins; otherwise the device flow over SSH or without a display, else the browser.
    static func defaultLoginMode(_ settings: Settings) -> LoginMode {
        if settings.overSSH { return .device }
        if settings.hasDisplay { return .browser }
        return .device
    }

    func login(_ g: GlobalOptions, mode: LoginMode?, clipboard: Bool = false) throws -> Outcome {
        let client = IssuerClient(config: try services.settings.issuer.get())
        let chosen = mode ?? Self.defaultLoginMode(services.settings)
        verbose(g, "login: \(chosen.rawValue) flow against \(client.config.baseURL)")

        // Before anything is created (man page STORES): a keyring out of reach means this sign-in
        // goes to the encrypted file, a second one beside whatever that keyring holds.
        let selector = services.makeSelector(g)
        let outOfReach = selector.keyringOutOfReach()
        // A sign-in the encrypted file could not keep is refused before the issuer is asked.
        if g.store == .file || outOfReach != nil, let file = selector.store(of: .file) as? AgeFileStore {
            try file.checkWritable(g.profile)
        }
        if let why = outOfReach {
            let file = selector.store(of: .file).location(for: g.profile)
            console.err(Sanitize.line("chatgpt-credential: warning: \(why); this sign-in will be kept in the encrypted file \(file), separate from any sign-in in a keyring this process cannot see", limit: 1200))
        }

        // Over a live sign-in: say what the new one replaces before the person starts.
        if let current = owner(g).peek() {
            let who = current.email.isEmpty ? "account \(shownAccount(current.accountId))" : current.email
            console.err(Sanitize.line("This replaces the sign-in of \(who) for profile '\(g.profile.name)' once the new one succeeds."))
        }

        let interrupt = InterruptWatch.install()
        defer { interrupt?.restore() }

        var stored: TokenDocument?
        func keep(_ grant: TokenGrant) throws {
            let document = TokenDocument.fromTokens(accessToken: grant.accessToken, refreshToken: grant.refreshToken,
                                                    idToken: grant.idToken, expiresIn: grant.expiresIn, now: services.now())
            _ = try saveNewCredential(document, g)
            stored = document
        }

        do {
            try runFlow(chosen, g, client: client, interrupt: interrupt, clipboard: clipboard, keep: keep)
        } catch let e as CredentialError where e == InterruptWatch.cancelled {
            // The terminal echoed "^C" without a newline; start the message on a line of its own.
            if console.stderrIsTerminal { console.err("") }
            throw e
        }
        guard let d = stored else { throw CredentialError.loginFailed("the sign-in ended without tokens") }
        let email = d.email.isEmpty ? "unknown email" : d.email
        let plan = d.plan.isEmpty ? "unknown plan" : d.plan
        let account = shownAccount(d.accountId)
        // The default profile's line is exactly the man page's; another profile is named after it.
        let named = g.profile == .default ? "" : " (profile \(g.profile.name))"
        console.err(Sanitize.line("Signed in as \(email) (\(plan)), account \(account)\(named)"))
        return .exit(0)
    }

    private func runFlow(_ chosen: LoginMode, _ g: GlobalOptions, client: IssuerClient, interrupt: InterruptWatch?,
                         clipboard: Bool, keep: (TokenGrant) throws -> Void) throws {
        let settings = services.settings
        let prompts = SignInPrompts(console: console, clipboard: clipboard, noColor: settings.noColor, term: settings.term)
        switch chosen {
        case .device:
            var flow = DeviceCodeFlow(client: client, presenter: prompts, interrupt: interrupt, profile: g.profile)
            flow.debug = { if g.verbose { prompts.progressEnded() }; self.verbose(g, $0) }
            try flow.run(complete: keep)
        case .paste:
            let flow = PasteBackFlow(client: client, console: console, presenter: prompts, interrupt: interrupt,
                                     nonInteractive: g.nonInteractive, profile: g.profile)
            try flow.checkUsable()
            try flow.run(complete: keep)
        case .browser:
            var flow = BrowserFlow(client: client, presenter: prompts, interrupt: interrupt,
                                   browser: settings.browser, hasDisplay: settings.hasDisplay,
                                   childEnvironment: settings.childEnvironment, openBrowser: !g.nonInteractive, profile: g.profile)
            flow.debug = { self.verbose(g, $0) }
            try flow.run(complete: keep)
        }
    }
}

/// The sign-in flow `login` was asked for.
public enum LoginMode: String, Sendable { case device, browser, paste = "no-browser" }
