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
    /// Bold and the clipboard's escape are written: stderr is a terminal, `NO_COLOR` is unset and
    /// `TERM` is set and not `dumb` (as `usage` decides; man page, `login`).
    var styled: Bool
    /// The columns of the updating waiting line now on the terminal (0: none).
    private var progressShown = 0

    init(console: Console, clipboard: Bool = false, width: Int? = nil, noColor: Bool = false, term: String? = "xterm") {
        self.console = console
        self.clipboard = clipboard
        self.width = width ?? console.errorWidth
        styled = console.stderrIsTerminal && !noColor && !(term ?? "").isEmpty && term != "dumb"
    }

    private func say(_ text: String) {
        progressEnded()
        for line in TextWrap.lines(text, width: width) { console.err(line) }
    }

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
        if styled {
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

    /// The periodic reminder: on a terminal the updating line says it already; off one nothing
    /// is printed while waiting (a log gets no progress lines).
    func waiting(remaining seconds: Double) {}

    /// On a terminal, one line updated in place (a carriage return and spaces, no escape):
    /// `Waiting for approval: 0:22 elapsed, 14:38 left on the code`. Nothing off a terminal.
    func progress(elapsed: Double, remaining: Double) {
        guard console.stderrIsTerminal else { return }
        let line = "Waiting for approval: \(Self.clock(elapsed)) elapsed, \(Self.clock(remaining)) left on the code"
        let shown = String(line.prefix(max(10, width - 1)))
        console.errInPlace("\r" + shown + String(repeating: " ", count: max(0, progressShown - shown.count)))
        progressShown = shown.count
    }

    func progressEnded() {
        guard progressShown > 0 else { return }
        console.errInPlace("\r" + String(repeating: " ", count: progressShown) + "\r")
        progressShown = 0
    }

    /// `14:38`, `1:02:03`.
    static func clock(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.rounded(.down)))
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return s >= 3600 ? "\(s / 3600):\(two(s % 3600 / 60)):\(two(s % 60))" : "\(s / 60):\(two(s % 60))"
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

    func notice(_ text: String) {
        progressEnded()
        console.err("chatgpt-credential: " + text)
    }

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
