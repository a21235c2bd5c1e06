import Testing
@testable import CLI
@testable import SignIn
@testable import CredentialCore
@testable import SystemRuntime
@testable import Secrets

/// Records stderr; `tty` says whether it is a terminal.
final class RecordingErrConsole: Console {
    var lines: [String] = []
    let tty: Bool
    init(tty: Bool = false) { self.tty = tty }
    func out(_ text: String) { Issue.record("the sign-in prompts must not write to stdout: \(text)") }
    func out(_ secret: borrowing SecretBytes) { Issue.record("the sign-in prompts must not write to stdout (\(secret.count) bytes)") }
    func err(_ line: String) { lines.append(line) }
    func readInput(limit: Int) throws -> SecretBytes { SecretBytes() }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { tty }
    var text: String { lines.joined(separator: "\n") }
}

/// How the CLI words the sign-in flows' events (`SignInPrompts`, the CLI's `SignInPresenter`).
@Suite struct SignInPromptTests {
    @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
    func clipboardOnlyWhenAskedOnATerminalAndOnlyTheCode(tty: Bool, asked: Bool) {
        let console = RecordingErrConsole(tty: tty)
        SignInPrompts(console: console, clipboard: asked).showDeviceCode(url: "http://127.0.0.1:9/codex/device", code: "ABCD-EFGH", expiresIn: 900)
        let osc = "\u{1B}]52;c;" + Base64.encode(Array("ABCD-EFGH".utf8), alphabet: .standard, padded: true) + "\u{07}"
        #expect(console.text.contains(osc) == (tty && asked))
        if !tty { #expect(!console.text.contains("\u{1B}")) }
        // The code is said once.
        #expect(console.lines.filter { $0.contains("ABCD-EFGH") }.count == 1)
        #expect(console.lines.contains { $0.hasSuffix("http://127.0.0.1:9/codex/device") })
        let prose = console.lines.joined(separator: " ")
        #expect(prose.contains("Enter it only on 127.0.0.1:9."))
        #expect(prose.contains("The code expires in 15 minutes;"))
    }

    /// At 80 columns (and narrower) every line of the prompt fits and breaks at spaces.
    @Test(arguments: [80, 60, 40])
    func promptFitsTheWidth(_ width: Int) {
        let console = RecordingErrConsole(tty: false)
        SignInPrompts(console: console, width: width).showDeviceCode(url: "http://127.0.0.1:9/codex/device", code: "ABCD-EFGH", expiresIn: 900)
        #expect(console.lines.count <= (width >= 80 ? 11 : 16), "\(console.lines.count) lines")
        for line in console.lines where !line.hasPrefix("    ") { // the URL and code lines are verbatim
            #expect(line.count <= width, "\(line.count) columns: \(line)")
            #expect(!line.hasPrefix("chatgpt-credential:"))
        }
        let words = console.lines.filter { !$0.hasPrefix("    ") }.joined(separator: " ").split(separator: " ")
        #expect(words.contains("one-time") && words.contains("approval"), "no word cut: \(words)")
    }

    /// Issue 29: off a terminal nothing is printed while waiting (no reminder, no progress line).
    @Test func noticesCarryTheProgramNameAndNothingIsPrintedWhileWaitingOffATerminal() {
        let console = RecordingErrConsole()
        let prompts = SignInPrompts(console: console)
        prompts.waiting(remaining: 61)
        prompts.progress(elapsed: 22, remaining: 878)
        prompts.progressEnded()
        prompts.showAuthorizeURL("http://x.test/a", use: .openOnThisMachine(browserDisabled: true))
        #expect(console.lines == [
            "chatgpt-credential: open this address in a browser on this machine to sign in:",
            "", "    http://x.test/a", "",
            "chatgpt-credential: (--non-interactive: no browser is opened)",
        ])
    }

    /// On a terminal: one line updated in place (elapsed, time left), put away before anything else.
    @Test func onATerminalTheWaitIsOneUpdatingLine() {
        let console = RecordingErrConsole(tty: true)
        let prompts = SignInPrompts(console: console)
        prompts.progress(elapsed: 22, remaining: 878)
        prompts.progress(elapsed: 23, remaining: 877)
        prompts.notice("x")
        #expect(console.lines[0] == "\rWaiting for approval: 0:22 elapsed, 14:38 left on the code")
        #expect(console.lines[1] == "\rWaiting for approval: 0:23 elapsed, 14:37 left on the code")
        #expect(console.lines[2].hasPrefix("\r   ") && console.lines[2].hasSuffix("\r"))
        #expect(console.lines[3] == "chatgpt-credential: x")
        #expect(!console.text.contains("\u{1B}"))
    }

    /// NO_COLOR and TERM=dumb: no bold, no clipboard escape, on a terminal too.
    @Test(arguments: [(true, "xterm"), (false, "dumb"), (false, "")])
    func noColorAndADumbTerminalGetNoEscape(noColor: Bool, term: String) {
        let console = RecordingErrConsole(tty: true)
        SignInPrompts(console: console, clipboard: true, noColor: noColor, term: term)
            .showDeviceCode(url: "http://127.0.0.1:9/codex/device", code: "ABCD-EFGH", expiresIn: 900)
        #expect(!console.text.contains("\u{1B}"), "\(console.text)")
        #expect(console.lines.contains("    ABCD-EFGH"))
    }

    @Test func aRetriedPasteSaysWhyAndHowManyTriesAreLeft() {
        let console = RecordingErrConsole()
        SignInPrompts(console: console, width: 200).askForPastedAddress(
            callback: "http://localhost:1455/auth/callback?code=…&state=…", retry: PasteRetry(reason: "Nothing was pasted", triesLeft: 1))
        #expect(console.lines == ["Nothing was pasted; paste the address the browser ended on again (1 try left, Ctrl-C to stop):"])
    }
}
