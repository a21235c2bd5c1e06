import Foundation
import Testing
import CLI

/// Issue 29: what a person reads, through the built binary (man page, `status`, `status --all`,
/// `login`, DIAGNOSTICS): `status` reads like `gh auth status`, `status --all` never cuts a name.
@Suite struct HumanOutputTests {
    /// A zone that needs no tzdata: local time is UTC+1 and is called CET.
    static let zone = ["TZ": "CET-1"]

    /// `script` runs `command` in a pty of 80 columns; its output with the carriage returns gone.
    static func inTerminal(_ command: String, env: [String: String], cols: Int = 80) -> (status: Int32, text: String, raw: String) {
        let r = Harness.run("/usr/bin/script", ["-qec", "stty cols \(cols) rows 50; \(command)", "/dev/null"], env: env, timeout: 30)
        return (r.status, r.stdout.replacingOccurrences(of: "\r", with: ""), r.stdout)
    }

    /// The value column of `  label:  value` lines: every label's line has its value at one column.
    static func valueColumns(_ text: String) -> Set<Int> {
        Set(text.split(separator: "\n").dropFirst().compactMap { line -> Int? in
            guard line.hasPrefix("  "), let colon = line.firstIndex(of: ":") else { return nil }
            let rest = line[line.index(after: colon)...]
            return line.distance(from: line.startIndex, to: colon) + 1 + rest.prefix { $0 == " " }.count
        })
    }

    @Test func statusLabelsAreAlignedTimesAreLocalAndNothingIsSaidTwice() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        _ = try s.storeSeeded(issuer)
        let r = Self.inTerminal("exec \(Harness.binary) status", env: s.env.merging(Self.zone) { $1 }.merging(["TERM": "xterm"]) { $1 })
        #expect(r.status == 0, "\(r.text)")
        let lines = r.text.split(separator: "\n")
        #expect(lines.first?.hasPrefix("Signed in as user@example.com") == true, "\(r.text)")
        #expect(Self.valueColumns(r.text).count == 1, "labels not aligned:\n\(r.text)")
        #expect(lines.count >= 5, "\(r.text)")
        for label in ["profile:", "store:", "access token:", "refreshed:", "next refresh:"] {
            #expect(lines.contains { $0.hasPrefix("  " + label) }, "no \(label):\n\(r.text)")
        }
        // Local time with the zone, not RFC 3339 UTC.
        #expect(r.text.contains(" CET (") && !r.text.contains("Z ("), "\(r.text)")
        // The store in words: the encrypted file's path.
        #expect(lines.contains { $0.hasPrefix("  store:") && $0.hasSuffix(s.dataDir + "/" + s.profile + ".age") && $0.contains("encrypted file") }, "\(r.text)")
        // No value said twice: "expires … (expires in …)".
        for line in lines {
            let words = line.split(separator: " ").map(String.init)
            #expect(!(words.contains("expires:") && line.contains("expires in")), "said twice: \(line)")
        }
        // JSON stays RFC 3339 UTC.
        let json = s.run(["status", "--json"], env: Self.zone)
        #expect(json.status == 0 && json.stdout.contains(#""expires_at":""#) && json.stdout.contains(#"Z","#), "\(json.stdout)")
    }

    /// After `git credential reject`, the dropped access token reads "the next get refreshes",
    /// never an expiry in 1970; exit 0 (the next get refreshes without a new sign-in).
    @Test func afterGitCredentialRejectTheNextGetRefreshes() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        let t = try s.storeSeeded(issuer)
        var env = s.env
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        env["GIT_TERMINAL_PROMPT"] = "0"
        let reject = Harness.run("/usr/bin/git", ["-c", "credential.helper=", "-c", "credential.helper=!'\(Harness.binary)' --protocol git",
                                                  "credential", "reject"],
                                 env: env, stdin: Array("protocol=https\nhost=chatgpt.com\nusername=\(t.accountId)\npassword=\(t.accessToken)\n\n".utf8))
        #expect(reject.status == 0, "\(reject.stderr)")
        let text = s.run(["status"], env: Self.zone)
        #expect(text.status == 0, "exit \(text.status): \(text.stderr)")
        #expect(!text.stdout.contains("1970") && !text.stdout.contains("20789"), "\(text.stdout)")
        #expect(text.stdout.contains("  access token:  none (dropped after a rejection); the next get refreshes\n"), "\(text.stdout)")
        #expect(Self.valueColumns(text.stdout).count == 1, "\(text.stdout)")
        let json = s.run(["status", "--json"])
        #expect(json.status == 0 && !json.stdout.contains("1970") && json.stdout.contains(#""expires_at":null"#), "\(json.stdout)")
        // What it says happens: the next get refreshes, once.
        #expect(s.run(["get"]).stdout != t.accessToken + "\n")
        #expect(try issuer.counter("refresh_requests") == 1)
    }

    /// `status --all` in 80 columns with a long email and a `sign in again` row: every email and
    /// profile name whole, sorted by profile, within 80 columns (a column dropped instead).
    @Test func statusAllKeepsTheWholeEmailAndSortsByProfile() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        // Before, EMAIL was shortened to `someone.long@en…` once the row was wider than 80.
        let long = "someone.long@eng.example.com.au"
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let zeta = "hz" + tag, alpha = "ha" + tag
        _ = try s.storeSeeded(issuer, profile: zeta, ["email": long])
        _ = try s.storeSeeded(issuer, profile: alpha, ["expires_in": -10, "refresh_expired": true])
        #expect(s.run(["--profile", alpha, "get"]).status == 3) // the issuer rejects: sign in again
        let r = Self.inTerminal("exec \(Harness.binary) status --all", env: s.env.merging(["TERM": "xterm"]) { $1 })
        let lines = r.text.split(separator: "\n").map(String.init)
        let mine = lines.filter { $0.contains(tag) }
        #expect(mine.count == 2, "\(r.text)")
        #expect(mine.first?.contains(alpha) == true && mine.last?.contains(zeta) == true, "not sorted by profile:\n\(r.text)")
        #expect(mine.last?.contains(long) == true, "email cut:\n\(r.text)")
        #expect(mine.first?.hasSuffix("sign in again") == true, "\(r.text)")
        for line in lines { #expect(line.count <= 80, "\(line.count) columns: \(line)") }
        #expect(lines.first?.contains("EMAIL") == true && lines.first?.contains("STATUS") == true)
    }

    /// A credential that names no account (a bare token set stored) is said to be of an
    /// `unknown` account, as its email and plan are, never `account ` and nothing.
    /// `--version`, `version` and help touch nothing a variable sets: a refused variable does not
    /// stop them (man page ENVIRONMENT), whether the warm path or the Swift path answers; every
    /// other verb, and no verb at all, is still exit 2 naming the variable.
    @Test func versionAndHelpAnswerWhateverTheEnvironmentHolds() throws {
        let s = Sandbox(bus: .none, store: "file")
        let version = "chatgpt-credential " + CommandLineSpec.version + "\n"
        for bad in [["CHATGPT_CREDENTIAL_STORE": "bogus"], ["CHATGPT_CREDENTIAL_PROFILE": ".x"], ["CHATGPT_CREDENTIAL_CACHE_TTL": "0"]] {
            for args in [["--version"], ["-v", "--version"], ["get", "--version"], ["version"]] {
                let r = s.run(args, env: bad)
                #expect(r.status == 0 && r.stdout == version && r.stderr.isEmpty, "\(bad) \(args): \(r.status) \(r.stderr)")
            }
            for args in [["--help"], ["help", "get"], ["get", "--help"]] {
                let r = s.run(args, env: bad)
                #expect(r.status == 0 && r.stdout.contains("Usage: chatgpt-credential [GLOBAL OPTIONS]"), "\(bad) \(args): \(r.status) \(r.stderr)")
            }
            for args in [[], ["status"], ["get"]] {
                let r = s.run(args, env: bad)
                #expect(r.status == 2 && r.stderr.contains(bad.keys.first!) && r.stdout.isEmpty, "\(bad) \(args): \(r.status) \(r.stderr)")
            }
        }
    }

    @Test func anAccountNobodyNamedIsSaidToBeUnknown() throws {
        let s = Sandbox(bus: .none, store: "file")
        let stored = s.run(["store"], stdin: #"{"access_token":"opaque-access","refresh_token":"opaque-refresh"}"#)
        #expect(stored.status == 0 && stored.stderr.contains("for unknown email, account unknown in "), "\(stored.stderr)")
        let status = s.run(["status"])
        #expect(status.stdout.hasPrefix("Sign") && status.stdout.contains(" (unknown plan), account unknown\n"), "\(status.stdout)")
    }

    /// Issue 29: `login --device` under NO_COLOR=1 and TERM=dumb writes no escape byte, on a
    /// terminal too; on a terminal the wait is one line updating in place (elapsed, time left);
    /// off a terminal nothing is printed while it waits.
    @Test func deviceSignInHonoursNoColorAndShowsTheWaitOnlyOnATerminal() throws {
        // Three pending polls a second apart: the wait lasts a few seconds.
        let plainTerminal = try LoginFixture(["interval": 1, "approve_after": 3])
        var env = plainTerminal.sandbox.env
        env["NO_COLOR"] = "1"
        env["TERM"] = "dumb"
        let dumb = Self.inTerminal("exec \(Harness.binary) login --device", env: env)
        #expect(dumb.status == 0, "\(dumb.text)")
        #expect(!dumb.text.contains("\u{1B}"), "an escape byte under NO_COLOR=1 TERM=dumb:\n\(dumb.text)")
        #expect(dumb.raw.contains("\rWaiting for approval: 0:0") && dumb.text.contains(" elapsed, ") && dumb.text.contains(" left on the code"),
                "no updating waiting line on the terminal:\n\(dumb.text)")
        #expect(dumb.text.contains("Signed in as "))
        // One line, updated in place: no line feed between the first wait and the last.
        if let first = dumb.raw.range(of: "\rWaiting for approval: "),
           let last = dumb.raw.range(of: " left on the code", options: .backwards) {
            #expect(dumb.raw.components(separatedBy: "Waiting for approval: ").count > 2, "one wait shown:\n\(dumb.raw)")
            #expect(!dumb.raw[first.lowerBound..<last.upperBound].contains("\n"), "the wait scrolls:\n\(dumb.raw)")
        }

        // Control: on the same terminal with colour allowed, the code is bold.
        let coloured = try LoginFixture(["interval": 0, "approve_after": 0])
        let bold = Self.inTerminal("exec \(Harness.binary) login --device", env: coloured.sandbox.env.merging(["TERM": "xterm"]) { $1 })
        #expect(bold.status == 0 && bold.text.contains("\u{1B}[1m"), "\(bold.text)")

        // Off a terminal: no waiting line, no escape.
        let piped = try LoginFixture(["interval": 1, "approve_after": 3])
        let r = piped.run(["login", "--device"], env: ["TERM": "xterm"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("Waiting for approval") && !r.stderr.contains("\r") && !r.stderr.contains("\u{1B}"), "\(r.stderr)")
    }

    /// Issue 29: a failure naming a network address says where the address came from when a
    /// variable overrides the default (exit 4, temporary); `-v` names the store and its path.
    @Test func anOverriddenAddressIsNamedWithItsVariableAndVerboseNamesTheStore() throws {
        let issuer = try TestIssuer()
        let s = Sandbox(bus: .none, store: "file")
        _ = try s.storeSeeded(issuer)
        // Nothing listens on port 1 of the loopback address.
        let dead = "http://127.0.0.1:1"
        let refresh = s.run(["--no-cache", "get", "--force-refresh"], env: ["CHATGPT_CREDENTIAL_ISSUER": dead])
        #expect(refresh.status == 0 || refresh.status == 4, "\(refresh.stderr)") // the stored token may still be printed
        #expect(refresh.stderr.contains("cannot reach \(dead)") && refresh.stderr.contains("set by CHATGPT_CREDENTIAL_ISSUER, overriding the default https://auth.openai.com"),
                "\(refresh.stderr)")
        s.forgetSharedBackoff()
        let usage = s.run(["usage"], env: ["CHATGPT_CREDENTIAL_BACKEND": dead + "/backend-api"])
        #expect(usage.status == 4, "exit 4 (temporary): \(usage.stderr)")
        #expect(usage.stderr.contains("cannot reach \(dead)") && usage.stderr.contains("set by CHATGPT_CREDENTIAL_BACKEND, overriding the default https://chatgpt.com/backend-api"),
                "\(usage.stderr)")
        #expect(!usage.stderr.contains("CHATGPT_CREDENTIAL_ISSUER"), "\(usage.stderr)")

        let verbose = s.run(["-v", "--no-cache", "get"])
        #expect(verbose.status == 0, "\(verbose.stderr)")
        #expect(verbose.stderr.contains("read from the encrypted file \(s.dataDir)/\(s.profile).age"), "\(verbose.stderr)")
        let cached = s.run(["-v", "get"])
        #expect(cached.stderr.contains("the encrypted file \(s.dataDir)/\(s.profile).age"), "\(cached.stderr)")
    }
}
