import CredentialCore
import SystemRuntime
import SignIn
import Secrets

/// The sign-in flows' events as the person sees them on stderr (`SignIn` reports, the CLI words):
/// prompts wrapped at spaces to the terminal's width (else 80), the address and the code on lines
/// of their own, verbatim; no per-line program prefix on the prompts, as gh and codex show theirs.
final class SignInPrompts: SignInPresenter {
    let console: Console
    /// Offer the device code to the terminal's clipboard (OSC 52): `login --clipboard`.
    var clipboard: Bool
    /// Columns to wrap the prompts at.
    var width: Int

    init(console: Console, clipboard: Bool = false, width: Int? = nil) {
        self.console = console
        self.clipboard = clipboard
        self.width = width ?? console.errorWidth
    }

    private func say(_ text: String) { for line in TextWrap.lines(text, width: width) { console.err(line) } }

    /// The address (or the code) set off by blank lines and indented, never wrapped.
    private func verbatim(_ text: String) {
        console.err("")
        console.err("    " + text)
        console.err("")
    }

    /// The page, the code once (bold on a terminal), and one warning. The code goes to the
    /// terminal's clipboard only when asked and only when stderr is a terminal (a log file must
    /// not carry escapes).
    func showDeviceCode(url: String, code: String, expiresIn seconds: Double) {
        var shown = code
        var copied = false
        if console.stderrIsTerminal {
            shown = "\u{1B}[1m" + code + "\u{1B}[0m" // bold; our own escape, the code itself is sanitised
            if clipboard {
                shown += "\u{1B}]52;c;" + Base64.encode(Array(code.utf8), alphabet: .standard, padded: true) + "\u{07}"
                copied = true
            }
        }
        say("To sign in, open this page in a browser on any device:")
        verbatim(url)
        say("and enter this one-time code\(copied ? " (also offered to your terminal's clipboard)" : ""):")
        verbatim(shown)
        say("Never share this code: whoever enters it signs in as you. Enter it only on \(Self.host(of: url)).")
        say("The code expires in \(Self.duration(seconds)); waiting for approval (Ctrl-C to cancel).")
    }

    func waiting(remaining seconds: Double) {
        notice("still waiting for approval; the code expires in \(Self.duration(seconds))")
    }

    func showAuthorizeURL(_ url: String, use: AuthorizeURLUse) {
        switch use {
        case .openingBrowser:
            notice("opening the sign-in page in your browser; if it does not open, visit:")
            verbatim(url)
        case .openOnThisMachine(let browserDisabled):
            notice("open this address in a browser on this machine to sign in:")
            verbatim(url)
            if browserDisabled { notice("(--non-interactive: no browser is opened)") }
        case .openAnywhereAndPasteBack:
            say("Open this address in a browser on any machine and sign in:")
            verbatim(url)
        }
    }

    func askForPastedAddress(callback: String, retry: PasteRetry?) {
        if let retry {
            let left = retry.triesLeft
            say("\(retry.reason); paste the address the browser ended on again (\(left) \(left == 1 ? "try" : "tries") left, Ctrl-C to stop):")
        } else {
            say("The browser then tries to open \(callback) and shows an error page. Copy that whole address from the address bar, paste it here and press Enter:")
        }
    }

    func notice(_ text: String) { console.err("chatgpt-credential: " + text) }

    /// "15 minutes", "1 minute", "45 seconds".
    static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.rounded()))
        if s < 60 { return "\(s) second\(s == 1 ? "" : "s")" }
        let m = s / 60
        return "\(m) minute\(m == 1 ? "" : "s")"
    }

    private static func host(of url: String) -> String {
        guard let r = url.firstRange(of: "://") else { return url }
        let rest = url[r.upperBound...]
        return String(rest.prefix { $0 != "/" })
    }
}
