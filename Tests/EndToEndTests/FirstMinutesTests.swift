import Foundation
import Testing

/// The first five minutes through the built binary: typos get a pointed suggestion (exit 2), and
/// help in a real terminal of 80 columns fits and breaks at spaces.
@Suite struct FirstMinutesTests {
    @Test(arguments: [
        (["lgoin"], "did you mean 'login'? (see: chatgpt-credential login --help)"),
        (["staus"], "did you mean 'status'? (see: chatgpt-credential status --help)"),
        (["logout"], "to do that here: chatgpt-credential erase (see: chatgpt-credential erase --help)"),
        (["token"], "to do that here: chatgpt-credential get (see: chatgpt-credential get --help)"),
        (["get", "--jsn"], "did you mean '--json'? (see: chatgpt-credential get --help)"),
        (["login", "--devcie"], "did you mean '--device'? (see: chatgpt-credential login --help)"),
    ])
    func typosAreExit2WithTheNearestWord(_ args: [String], _ hint: String) {
        let s = Sandbox(bus: .none, store: "file")
        let r = s.run(args)
        #expect(r.status == 2, "\(args): exit \(r.status)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("chatgpt-credential: unknown ") && r.stderr.hasSuffix(hint + "\n"), "\(args): \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
    }

    /// Every suggested help command works: exit 0 and the verb's usage line.
    @Test func theSuggestedHelpExists() {
        let s = Sandbox(bus: .none, store: "file")
        for verb in ["login", "status", "erase", "get"] {
            let r = s.run([verb, "--help"])
            #expect(r.status == 0)
            #expect(r.stdout.hasPrefix("Usage: chatgpt-credential [GLOBAL OPTIONS] \(verb)"), "\(r.stdout)")
        }
    }

    /// `script` gives the binary a pty; `stty cols 80` sets its width as a terminal of 80 columns.
    @Test(arguments: ["--help", "get --help", "login --help", "usage --help"])
    func helpInAnEightyColumnTerminalFits(_ args: String) throws {
        let r = Harness.run("/usr/bin/script", ["-qec", "stty cols 80 rows 50; exec \(Harness.binary) \(args)", "/dev/null"],
                            env: ["PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": "/nonexistent"], timeout: 20)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.replacingOccurrences(of: "\r", with: "").split(separator: "\n")
        #expect(lines.count > 5)
        for line in lines { #expect(line.count <= 80, "\(args): \(line.count) columns: \(line)") }
    }
}

extension FirstMinutesTests {
    /// `script` runs `command` in a pty of `cols` columns; stdout and stderr both reach its output.
    static func inTerminal(_ command: String, cols: Int = 80) -> (status: Int32, lines: [Substring]) {
        let r = Harness.run("/usr/bin/script", ["-qec", "stty cols \(cols) rows 50; \(command)", "/dev/null"],
                            env: ["PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": "/nonexistent"], timeout: 20)
        return (r.status, r.stdout.replacingOccurrences(of: "\r", with: "").split(separator: "\n", omittingEmptySubsequences: false).dropLast())
    }

    /// The width is the terminal's: at 100 columns the title stays on one line, at 60 it wraps.
    @Test func helpFollowsTheTerminalsWidth() {
        #expect(Self.inTerminal("exec \(Harness.binary) --help", cols: 100).lines.first == "chatgpt-credential — ChatGPT sign-in and fresh bearer tokens for scripts")
        #expect(Self.inTerminal("exec \(Harness.binary) --help", cols: 60).lines.first == "chatgpt-credential — ChatGPT sign-in and fresh bearer tokens")
    }

    /// Issue 29, first contact in a terminal of 80 columns: `chatgpt-credential` alone prints the
    /// short help on stderr (≤ 15 lines, exit 2, nothing on stdout); `--help` ≤ 40 lines of ≤ 80
    /// columns; no help shows a regular expression; `--protocol` spells out its values.
    @Test func firstContactInAnEightyColumnTerminal() {
        let bare = Self.inTerminal("exec \(Harness.binary) 2>&1 >/dev/null")
        #expect(bare.status == 2, "exit \(bare.status)")
        #expect(bare.lines.count <= 15 && bare.lines.count >= 8, "\(bare.lines.count) lines:\n\(bare.lines.joined(separator: "\n"))")
        #expect(bare.lines.first == "Usage: chatgpt-credential [GLOBAL OPTIONS] VERB [VERB OPTIONS]")
        #expect(bare.lines.contains { $0.hasPrefix("  get ") } && bare.lines.joined().contains("--help"))
        let onStdout = Harness.run(Harness.binary, [], env: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
        #expect(onStdout.status == 2 && onStdout.stdout.isEmpty && onStdout.stderr.hasPrefix("Usage: "), "\(onStdout.stderr)")

        let main = Self.inTerminal("exec \(Harness.binary) --help")
        #expect(main.status == 0)
        #expect(main.lines.count <= 40, "--help is \(main.lines.count) lines")
        #expect(main.lines.contains { $0.contains("--protocol plain|git|docker") })
        for args in ["--help", "get --help", "status --help", "login --help", "serve --help", "refresh --help"] {
            let help = Self.inTerminal("exec \(Harness.binary) \(args)")
            for line in help.lines {
                #expect(line.count <= 80, "\(args): \(line)")
                #expect(!line.contains("[A-Za-z") && !line.contains("{0,"), "\(args) shows a regular expression: \(line)")
            }
        }
    }
}

extension FirstMinutesTests {
    /// `--profile wrok` with `work` signed in: still exit 3, and the line names the profile meant.
    @Test func aMistypedProfileNamesTheOneMeant() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        _ = try s.storeSeeded(issuer, profile: "work")
        let r = s.run(["--profile", "wrok", "get"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "chatgpt-credential: profile 'wrok' is not signed in; run: chatgpt-credential --profile wrok login; did you mean '--profile work'?\n")
        // Nothing close: no suggestion.
        let far = s.run(["--profile", "elsewhere", "get"])
        #expect(far.status == 3 && !far.stderr.contains("did you mean"), "\(far.stderr)")
        // The suggestion works when followed.
        #expect(s.run(["--profile", "work", "get"]).status == 0)
    }
}
