import CredentialCore
import OAuth
import Transport
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `login --browser`: PKCE with a loopback listener on 127.0.0.1:1455 (1457 when 1455 stays busy).
/// The browser is opened with `$BROWSER` (one argument: the URL; no shell) or `xdg-open` when a
/// display exists; the URL is always shown too (through the presenter). One successful callback ends the flow: the code
/// is exchanged, `complete` stores the tokens, and only then is the success page served.
public struct BrowserFlow {
    public var client: IssuerClient
    public var presenter: SignInPresenter
    public var interrupt: InterruptWatch?
    /// `$BROWSER` (nil: unset or empty).
    public var browser: String?
    /// `DISPLAY` or `WAYLAND_DISPLAY` is set: `xdg-open` may open a browser.
    public var hasDisplay: Bool
    /// What the browser launcher inherits: this process's environment.
    public var childEnvironment: [String: String]
    /// False with `--non-interactive`: the URL is printed, never opened.
    public var openBrowser: Bool
    /// The profile signing in: messages that say what to run name it.
    public var profile: Profile
    public var ports: [Int] = OAuthConstants.browserCallbackPorts
    public var timeout: Double = 15 * 60
    public var bindRetries = 10
    public var bindRetryDelay = 0.2
    /// Told the port and redirect URI (for --verbose).
    public var debug: (String) -> Void = { _ in }

    public init(client: IssuerClient, presenter: SignInPresenter, interrupt: InterruptWatch?,
                browser: String?, hasDisplay: Bool, childEnvironment: [String: String], openBrowser: Bool,
                profile: Profile) {
        self.client = client
        self.presenter = presenter
        self.interrupt = interrupt
        self.browser = browser
        self.hasDisplay = hasDisplay
        self.childEnvironment = childEnvironment
        self.openBrowser = openBrowser
        self.profile = profile
    }

    public static let cancelledByOther =
        CredentialError.failure("sign-in cancelled by another login (a newer sign-in took over the callback port); nothing was stored")

    public func run(complete: (TokenGrant) throws -> Void) throws {
        let listener = try bindListener()
        let pkce = PKCE()
        let redirectURI = OAuthConstants.browserRedirectURI(port: listener.port)
        debug("listening on \(listener.boundAddress); redirect URI \(redirectURI)")
        let url = client.authorizeURL(redirectURI: redirectURI, pkce: pkce)

        var child: Spawned?
        if openBrowser, let launcher = launchCommand() {
            presenter.showAuthorizeURL(Sanitize.line(url, limit: 4096), use: .openingBrowser)
            // $BROWSER may list several programs separated by ':' (the old convention); the first
            // that starts wins. Each gets the URL as its single argument, without a shell.
            var problem: CredentialError?
            for program in launcher.programs {
                switch Spawned.start([program, url], childEnvironment: childEnvironment, quiet: launcher.quiet) {
                case .success(let s): child = s; problem = nil
                case .failure(let e): problem = e
                }
                if child != nil { debug("started \(program)"); break }
            }
            if let problem { presenter.notice("could not open a browser (\(problem.message)); open the address above yourself") }
        } else {
            presenter.showAuthorizeURL(Sanitize.line(url, limit: 4096), use: .openOnThisMachine(browserDisabled: !openBrowser))
        }
        presenter.notice("waiting for the browser to come back to \(redirectURI) (Ctrl-C to cancel; gives up after \(Int(timeout / 60)) minutes)")

        var outcome: Result<Void, CredentialError>?
        let deadline = Clock.monotonicMillis() + Int64(timeout * 1000)
        let end = listener.serve(until: deadline, interrupt: interrupt, tick: {
            guard let c = child else { return }
            switch c.poll() {
            case .running: return
            case .exited(0): child = nil
            case .exited(let code):
                child = nil
                presenter.notice("the browser command exited with status \(code); open the address above yourself")
            case .signalled:
                child = nil
            }
        }) { request in
            handle(request, pkce: pkce, redirectURI: redirectURI, outcome: &outcome, complete: complete)
        }
        switch end {
        case .stopped:
            switch outcome {
            case .success?: return
            case .failure(let e)?: throw e
            case nil: throw CredentialError.loginFailed("the sign-in ended without an answer")
            }
        case .interrupted:
            throw InterruptWatch.cancelled
        case .timedOut:
            throw CredentialError.loginFailed("no answer from the browser within \(Int(timeout / 60)) minutes; nothing was stored; run '\(profile.loginCommand)' again (or use --device)")
        }
    }

    private func handle(_ request: LoopbackListener.Request, pkce: PKCE, redirectURI: String,
                        outcome: inout Result<Void, CredentialError>?, complete: (TokenGrant) throws -> Void)
        -> (LoopbackListener.Response, LoopbackListener.Next) {
        typealias R = LoopbackListener.Response
        switch request.path {
        case OAuthConstants.browserCallbackPath:
            guard let pairs = request.queryPairs(secretNames: CallbackParameters.secretNames) else {
                return (R(status: 400, html: LoopbackListener.page("Bad request", "The address could not be read.")), .keepServing)
            }
            let callback = CallbackParameters(pairs)
            guard callback.state == pkce.state else {
                // Not ours (a stale tab, or someone else's request): refuse, keep waiting.
                return (R(status: 400, html: LoopbackListener.page("Sign-in not recognised",
                        "This answer does not belong to the sign-in that is waiting (state mismatch). Start again from the terminal.")), .keepServing)
            }
            if let problem = callback.refusal {
                outcome = .failure(problem)
                return (R(status: 200, html: LoopbackListener.page("Sign-in failed", problem.message + " You can close this tab.")), .stop)
            }
            guard let code = callback.codeToken else {
                return (R(status: 400, html: LoopbackListener.page("Bad request", "The answer carries no authorization code.")), .keepServing)
            }
            do {
                // The spend-to-save window: a signal waits until the grant is saved.
                try SignalDeferral.during {
                    try complete(try client.exchangeCode(code: code, verifier: pkce.verifier, redirectURI: redirectURI))
                }
                outcome = .success(())
                return (R(status: 200, html: LoopbackListener.page("Signed in",
                        "chatgpt-credential is signed in to ChatGPT. You can close this tab and return to the terminal.")), .stop)
            } catch let e as CredentialError {
                outcome = .failure(e)
                return (R(status: 200, html: LoopbackListener.page("Sign-in failed", e.message)), .stop)
            } catch {
                let e = CredentialError.loginFailed("the sign-in could not be completed")
                outcome = .failure(e)
                return (R(status: 200, html: LoopbackListener.page("Sign-in failed", e.message)), .stop)
            }
        case "/cancel":
            outcome = .failure(Self.cancelledByOther)
            return (R(status: 200, html: LoopbackListener.page("Sign-in cancelled", "This sign-in was cancelled by a newer one.")), .stop)
        default:
            return (R(status: 404, html: LoopbackListener.page("Not found", "Nothing here.")), .keepServing)
        }
    }

    /// 1455, else (after asking a stale listener there to cancel and retrying) 1457.
    func bindListener() throws -> LoopbackListener {
        for port in ports {
            do { return try LoopbackListener.bind(port: port) } catch LoopbackListener.BindError.busy {
                debug("127.0.0.1:\(port) is busy; asking a stale sign-in there to cancel")
                LoopbackListener.sendCancel(port: port)
                for _ in 0..<bindRetries {
                    if !Waiter.sleep(bindRetryDelay, interrupt: interrupt) { throw InterruptWatch.cancelled }
                    if let l = try? LoopbackListener.bind(port: port) { return l }
                }
            } catch LoopbackListener.BindError.failed(let why) {
                throw CredentialError.loginFailed("cannot listen for the browser's answer (\(why)); use --device or --no-browser")
            }
        }
        let list = ports.map(String.init).joined(separator: " and ")
        throw CredentialError.loginFailed("ports \(list) on 127.0.0.1 are in use (another sign-in?); stop it, or use --device or --no-browser")
    }

    /// `$BROWSER` when set (a program name or path; several may be separated by ':'), else
    /// `xdg-open` when a display exists. `quiet`: the program's output is discarded (xdg-open).
    func launchCommand() -> (programs: [String], quiet: Bool)? {
        if let b = browser {
            let programs = b.split(separator: ":").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
            if !programs.isEmpty { return (programs, false) }
        }
        return hasDisplay ? (["xdg-open"], true) : nil
    }
}

/// The query of a redirect back from `/oauth/authorize` (browser callback or pasted address).
struct CallbackParameters {
    var state: String?
    /// The authorization code, in guarded memory from the first byte read: the listener reads
    /// the request and the paste-back its line into `SecretBytes`, and the query decoder puts
    /// `code`'s value straight into a token (`FormEncoding.decode(query:secretNames:)`).
    var code: SecretToken?
    var error: String?
    var errorDescription: String?

    /// The query's names whose values are secrets.
    static let secretNames: Set<String> = ["code"]

    init(_ pairs: [(String, FormEncoding.Value)]) {
        func text(_ k: String) -> String? {
            for (name, value) in pairs where name == k {
                if case .text(let t) = value { return t }
                return nil
            }
            return nil
        }
        state = text("state")
        for (name, value) in pairs where name == "code" {
            if case .secret(let t) = value, Sanitize.isTokenSafe(t), t.count <= 2048 { code = t }
            break
        }
        error = text("error").flatMap { $0.isEmpty ? nil : $0 }
        errorDescription = text("error_description")
    }

    /// The code for the exchange.
    var codeToken: SecretToken? { code }

    /// The issuer's refusal (`error=`), as the one line the person sees.
    var refusal: CredentialError? {
        guard let error else { return nil }
        let code = Sanitize.line(error, limit: 80)
        let description = Sanitize.line(errorDescription ?? "", limit: 200)
        if code == "missing_codex_entitlement" || description.contains("missing_codex_entitlement") {
            return .loginFailed("Codex is not enabled for this ChatGPT workspace (missing_codex_entitlement); ask a workspace admin to enable it, or sign in with another account")
        }
        if code == "access_denied" {
            return .loginFailed("the sign-in was declined in the browser (access_denied\(description.isEmpty ? "" : ": " + description)); nothing was stored")
        }
        return .loginFailed("the issuer refused the sign-in (\(code)\(description.isEmpty ? "" : ": " + description)); nothing was stored")
    }
}
