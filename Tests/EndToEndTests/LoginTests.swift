import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `login` through the real binary against the loopback test issuer. Only loopback traffic.
final class LoginFixture {
    let issuer: TestIssuer
    let sandbox: Sandbox

    init(_ config: [String: Any] = [:]) throws {
        issuer = try TestIssuer()
        if !config.isEmpty { try issuer.configure(config) }
        sandbox = Sandbox(bus: .none, store: "file")
        sandbox.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
    }

    func run(_ args: [String], stdin: String? = nil, env: [String: String] = [:], timeout: Double = 60) -> RunResult {
        sandbox.run(args, stdin: stdin, env: env, timeout: timeout)
    }

    /// `get` fails with "not signed in" and the store directory holds no credential file.
    func nothingStored() -> Bool {
        let get = run(["get"])
        let files = (try? FileManager.default.contentsOfDirectory(atPath: sandbox.dataDir)) ?? []
        return get.status == 3 && get.stdout.isEmpty && !files.contains { $0.hasSuffix(".age") }
    }

    var stats: [String: Any] { (try? issuer.stats()) ?? [:] }
    func counter(_ name: String) -> Int { (try? issuer.counter(name)) ?? -1 }

    /// The redirect_uri of the last /oauth/authorize request.
    var lastRedirectURI: String? { (stats["last_authorize_query"] as? [String: Any])?["redirect_uri"] as? String }

    /// A BROWSER program (python3, urllib: follows the issuer's redirect to our listener). It logs
    /// what it saw, one JSON list, to `log`. With `badStateFirst` it first calls the callback
    /// with a forged state and records that status.
    func browserScript(badStateFirst: Bool = false, marker: String? = nil) -> (program: String, log: String) {
        let path = sandbox.root + "/browser-\(UInt32.random(in: 0...UInt32.max)).py"
        let log = path + ".log"
        let script = """
        #!/usr/bin/env python3
        import json, sys, urllib.error, urllib.parse, urllib.request
        url = sys.argv[1]
        log = []
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        redirect = q["redirect_uri"][0]
        if \(badStateFirst ? "True" : "False"):
            try:
                r = opener.open(redirect + "?code=forged&state=wrong", timeout=10)
                log.append("bad-state:%d" % r.status)
            except urllib.error.HTTPError as e:
                log.append("bad-state:%d" % e.code)
        try:
            r = opener.open(url, timeout=60)
            log.append("final:%d:%s:%s" % (r.status, r.headers.get("Connection"), r.read().decode("utf-8", "replace")))
        except urllib.error.HTTPError as e:
            log.append("final:%d" % e.code)
        except Exception as e:
            log.append("error:%r" % (e,))
        with open(\(#""\#(log)""#), "w") as f:
            json.dump(log, f)
        """
        _ = FileManager.default.createFile(atPath: path, contents: Data(script.utf8), attributes: [.posixPermissions: 0o755])
        return (path, log)
    }

    /// Waits (bounded) for the browser script's log.
    func browserLog(_ path: String, timeout: Double = 15) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let d = FileManager.default.contents(atPath: path), let list = try? JSONSerialization.jsonObject(with: d) as? [String] {
                return list
            }
            usleep(20_000)
        }
        return []
    }
}

func hasNoEscape(_ s: String) -> Bool { !s.utf8.contains(0x1B) }

/// The one-line error (the line starting "chatgpt-credential: sign-in failed").
func failureLine(_ stderr: String) -> String {
    stderr.split(separator: "\n").last { $0.contains("sign-in failed") || $0.contains("try again later") }.map(String.init) ?? ""
}

let signedInLine = "Signed in as user@example.com (plus), account acct-test-0001"

/// The line a sign-in ends with in `s`: a profile other than `default` is named after it.
func signedIn(_ s: Sandbox) -> String {
    signedInLine + (s.profile == "default" ? "" : " (profile \(s.profile))")
}

// MARK: device flow (no ports: runs in parallel)

@Suite struct DeviceLoginTests {
    @Test(arguments: [false, true])
    func deviceFlowStoresWhatGetPrints(intervalAsString: Bool) throws {
        let f = try LoginFixture(["interval": 1, "interval_as_string": intervalAsString, "approve_after": 2])
        let start = Date()
        let r = f.run(["login", "--device"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.last == signedIn(f.sandbox))
        #expect(lines.contains("    " + f.issuer.url + "/codex/device"))
        #expect(r.stderr.contains("Never share this code: whoever enters it signs in as you."))
        #expect(r.stderr.contains("The code expires in 15 minutes"))
        // 80 columns, broken at spaces, no program prefix on the prompt's lines.
        for line in lines.dropLast() { #expect(line.count <= 80 && !line.hasPrefix("chatgpt-credential:"), "\(line)") }
        #expect(hasNoEscape(r.stderr), "no OSC 52 when stderr is not a terminal")
        // The user code stands alone on its line.
        #expect(lines.contains { $0.range(of: #"^ +[A-Z0-9]{4}-[A-Z0-9]{5}$"#, options: .regularExpression) != nil })
        // Polled at the issuer's interval: 2 pending + 1 approval, none too fast.
        #expect(f.counter("device_polls") == 3)
        #expect(f.counter("device_polls_too_fast") == 0)
        #expect(Date().timeIntervalSince(start) >= 2.5)
        let body = f.stats["last_token_request_body"] as? String ?? ""
        let redirect = f.issuer.url + "/deviceauth/callback"
        #expect(body.contains("redirect_uri=" + redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~")))!))
        #expect(f.counter("code_exchanges") == 1)

        let get = f.run(["get"])
        #expect(get.status == 0)
        let active = (f.stats["active_refresh_tokens"] as? [String]) ?? []
        #expect(active.count == 1)
        let json = f.run(["get", "--json"])
        #expect(json.stdout.contains(#""account_id":"acct-test-0001""#))
        #expect(get.stdout.hasPrefix("eyJ") && get.stdout.hasSuffix("\n"))
    }

    @Test(.enabled(if: hasSessionBus, "no D-Bus session bus: run under scripts/with-keyring (make test does)"))
    func autoStoresInTheSecretService() throws {
        let issuer = try TestIssuer()
        try issuer.configure(["interval": 0, "approve_after": 0])
        let sb = Sandbox(bus: .inherit)
        sb.env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
        let name = uniqueProfile("login")
        defer { _ = sb.run(["--profile", name, "erase", "--no-revoke"]) }
        let r = sb.run(["--profile", name, "login", "--device"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.hasSuffix(signedInLine + " (profile \(name))\n")) // another profile is named
        let status = sb.run(["--profile", name, "status", "--json"])
        #expect(status.stdout.contains("secret-service"), "\(status.stdout)")
        #expect(sb.run(["--profile", name, "get"]).status == 0)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: sb.dataDir)) ?? []
        #expect(!files.contains { $0.hasSuffix(".age") })
    }

    @Test func pendingUntilApprovedAfterNPolls() throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 5])
        let r = f.run(["login", "--device"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(f.counter("device_polls") == 6)
        #expect(f.run(["get"]).status == 0)
    }

    @Test func defaultIsDeviceOverSSHAndWithoutDisplay() throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 0])
        let ssh = f.run(["login"], env: ["SSH_CONNECTION": "10.0.0.1 5000 10.0.0.2 22", "DISPLAY": ":0", "BROWSER": "/bin/false"])
        #expect(ssh.status == 0, "\(ssh.stderr)")
        #expect(ssh.stderr.contains("one-time code"))
        let headless = f.run(["login"])
        #expect(headless.status == 0)
        #expect(headless.stderr.contains("one-time code"))
        #expect(f.counter("authorize_requests") == 0)
    }

    @Test func expiredCodeStoresNothing() throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 100, "device_expires_in": 0])
        let r = f.run(["login", "--device"])
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("expired"))
        #expect(f.counter("code_exchanges") == 0)
        #expect(f.nothingStored())
    }

    @Test func issuerExpiryIsShownAndHonoured() throws {
        let f = try LoginFixture(["interval": 1, "approve_after": 1000, "device_expires_in": 3, "device_send_expires_in": true])
        let start = Date()
        let r = f.run(["login", "--device"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("The code expires in 3 seconds"))
        #expect(failureLine(r.stderr).contains("expired"))
        #expect(Date().timeIntervalSince(start) < 8)
        #expect(f.nothingStored())
    }

    @Test func deviceSignInDisabledIsExplained() throws {
        let f = try LoginFixture(["device_disabled": true])
        let r = f.run(["login", "--device"])
        #expect(r.status == 1)
        let line = failureLine(r.stderr)
        #expect(line.contains("not enabled"))
        #expect(line.contains("Settings > Security"))
        #expect(line.contains("admin"))
        #expect(line.contains("--browser") && line.contains("--no-browser"))
        #expect(f.nothingStored())
    }

    @Test func deniedStoresNothing() throws {
        let f = try LoginFixture(["interval": 0, "device_deny": true])
        let r = f.run(["login", "--device"])
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("declined"))
        #expect(f.nothingStored())
    }

    @Test func rateLimitedPollBacksOff() throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 0, "device_faults": [["status": 429]]])
        let start = Date()
        let r = f.run(["login", "--device"])
        #expect(r.status == 0, "\(r.stderr)")
        // interval 0 + 5 s after the 429.
        #expect(Date().timeIntervalSince(start) >= 4.5)
        #expect(f.counter("device_polls") == 2)
    }

    @Test func ctrlCCancelsWithNothingStored() throws {
        let f = try LoginFixture(["interval": 1, "approve_after": 1000])
        let live = try LiveRun(f.sandbox, ["login", "--device"])
        #expect(live.waitFor("waiting for approval"))
        // The fact waited for: the polling has begun (the issuer saw a poll).
        #expect(Hostile.waitUntil(15) { f.counter("device_polls") >= 1 }, "no poll reached the issuer")
        let t0 = Date()
        live.interrupt()
        let status = live.wait(timeout: 10)
        #expect(status == 130) // 128 + SIGINT, as a shell reports Ctrl-C
        #expect(Date().timeIntervalSince(t0) < 3)
        #expect(live.stderr.contains("sign-in cancelled"))
        #expect(f.nothingStored())
    }

    @Test(arguments: ["esc", "newline"])
    func poisonedTokensAreRefused(_ poison: String) throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 0, "poison": poison])
        let r = f.run(["login", "--device"])
        #expect(r.status == 1)
        #expect(hasNoEscape(r.stderr))
        #expect(!r.stderr.contains("X-Injected"))
        #expect(failureLine(r.stderr).contains("unsafe characters"))
        #expect(f.nothingStored())
    }

    /// A sign-in the encrypted file could not keep — HOME and the XDG variables unset, the data
    /// directory on a read-only mount — is refused (exit 5) before the issuer is asked anything:
    /// the person never approves a code whose tokens would be thrown away.
    @Test func aSignInTheFileCannotKeepIsRefusedBeforeTheIssuerIsAsked() throws {
        let f = try LoginFixture(["interval": 0, "approve_after": 0])
        func requests() -> Int {
            guard let all = f.stats["requests"] as? [String: Int] else { return -1 }
            return all.filter { !$0.key.hasPrefix("/__admin") }.values.reduce(0, +)
        }
        let homeless = f.run(["login", "--device"], env: ["HOME": "", "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""])
        #expect(homeless.status == 5 && homeless.stderr.contains("HOME is not set"), "\(homeless.stderr)")
        #expect(!homeless.stderr.contains("the encrypted file the encrypted file store"), "\(homeless.stderr)")
        #expect(requests() == 0, "\(f.stats)")

        guard geteuid() == 0 else { return }
        let data = f.sandbox.env["XDG_DATA_HOME"]!
        let script = #"mount --bind "$D" "$D" && mount -o remount,bind,ro "$D" && exec "$BIN" login --device"#
        var env = f.sandbox.env
        env["D"] = data
        env["BIN"] = Harness.binary
        let readOnly = Harness.run(Hostile.unshare, ["-m", "--", "/bin/sh", "-c", script], env: env, timeout: 60)
        #expect(readOnly.status == 5 && readOnly.stderr.contains("Read-only file system"), "\(readOnly.status) \(readOnly.stderr)")
        #expect(requests() == 0, "\(f.stats)")
        // Where it can be kept, the same sign-in goes through.
        let ok = f.run(["login", "--device"])
        #expect(ok.status == 0 && requests() > 0, "\(ok.stderr)")
    }

    /// An answer that is not JSON (a captive portal's page) is temporary (exit 4, man page EXIT
    /// STATUS): one while polling is outlived, the sign-in goes on; three in a row give up,
    /// saying so and naming the page.
    @Test func htmlPollAnswersAreTemporary() throws {
        let once = try LoginFixture(["interval": 0, "device_faults": [["html": true]]])
        let ok = once.run(["login", "--device"])
        #expect(ok.status == 0 && ok.stderr.contains("Signed in as "), "\(ok.stderr)")
        let html: [String: Any] = ["html": true]
        let f = try LoginFixture(["interval": 0, "device_faults": [html, html, html]])
        let r = f.run(["login", "--device"])
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("gave up polling") && r.stderr.contains("HTML"), "\(r.stderr)")
        #expect(hasNoEscape(r.stderr))
        #expect(f.nothingStored())
    }

    @Test func hugeDeviceAnswersGiveUp() throws {
        let huge: [String: Any] = ["huge": 10 * 1024 * 1024]
        let f = try LoginFixture(["interval": 0, "device_faults": [huge, huge, huge]])
        let start = Date()
        let r = f.run(["login", "--device"])
        #expect(r.status == 4)
        #expect(Date().timeIntervalSince(start) < 20)
        #expect(r.stderr.contains("gave up polling"))
        #expect(f.nothingStored())
    }

    @Test(arguments: ["html", "huge"])
    func badExchangeAnswerStoresNothing(_ kind: String) throws {
        let fault: [String: Any] = kind == "html" ? ["html": true] : ["huge": 10 * 1024 * 1024]
        let f = try LoginFixture(["interval": 0, "approve_after": 0, "exchange_faults": [fault, fault, fault]])
        let r = f.run(["login", "--device"])
        #expect(r.status == 4, "\(r.stderr)") // not JSON or too large: temporary
        #expect(hasNoEscape(r.stderr))
        #expect(f.nothingStored())
    }

    @Test func neverEndingExchangeAnswerTimesOut() throws {
        let hang: [String: Any] = ["hang": true]
        let f = try LoginFixture(["interval": 0, "approve_after": 0, "exchange_faults": [hang, hang, hang]])
        let start = Date()
        let r = f.run(["login", "--device"], timeout: 90)
        #expect(!r.timedOut)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(Date().timeIntervalSince(start) < 65)
        #expect(f.nothingStored())
    }
}

// MARK: paste-back (no listener: runs in parallel)

@Suite struct PasteBackLoginTests {
    /// The Location the issuer's /oauth/authorize answers with (what the browser would end on).
    func finalAddress(_ authorizeURL: String, issuerPort: Int) -> String? {
        guard let range = authorizeURL.range(of: "/oauth/authorize") else { return nil }
        let path = String(authorizeURL[range.lowerBound...])
        guard let answer = rawGET(port: issuerPort, path: path, host: "127.0.0.1:\(issuerPort)") else { return nil }
        for line in answer.split(separator: "\r\n") where line.lowercased().hasPrefix("location:") {
            return line.dropFirst("location:".count).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    func authorizeURL(in stderr: String) -> String? {
        stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.contains("/oauth/authorize?") }
    }

    @Test func pastedAddressIsAccepted() throws {
        let f = try LoginFixture()
        let live = try LiveRun(f.sandbox, ["login", "--no-browser"])
        #expect(live.waitFor("press Enter"))
        let url = try #require(authorizeURL(in: live.stderr))
        #expect(url.contains("redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback"))
        let address = try #require(finalAddress(url, issuerPort: f.issuer.port))
        #expect(address.hasPrefix("http://localhost:1455/auth/callback?code="))
        live.send(address + "\n")
        #expect(live.wait(timeout: 30) == 0, "\(live.stderr)")
        #expect(live.stderr.hasSuffix(signedIn(f.sandbox) + "\n"))
        #expect(f.run(["get"]).status == 0)
    }

    /// Only the code pasted: asked again (bounded), and the right address then signs in. Over a
    /// live sign-in the login says first whose sign-in it replaces.
    @Test func badPasteIsAskedAgain() throws {
        let f = try LoginFixture()
        let first = try LiveRun(f.sandbox, ["login", "--no-browser"])
        #expect(first.waitFor("press Enter"))
        let url = try #require(authorizeURL(in: first.stderr))
        let address = try #require(finalAddress(url, issuerPort: f.issuer.port))
        // The prompt is wrapped at 80 columns: look for words, not for line breaks.
        func waitForWords(_ live: LiveRun, _ text: String) -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if live.stderr.replacingOccurrences(of: "\n", with: " ").contains(text) { return true }
                usleep(20_000)
            }
            return false
        }
        first.send("ac_only_the_code\n")
        #expect(waitForWords(first, "paste the address the browser ended on again (2 tries left"))
        first.send(address + "\n")
        #expect(first.wait(timeout: 30) == 0, "\(first.stderr)")
        #expect(first.stderr.hasSuffix(signedIn(f.sandbox) + "\n"))
        #expect(!first.stderr.contains("This replaces"))

        let second = try LiveRun(f.sandbox, ["login", "--no-browser"])
        #expect(second.waitFor("press Enter"))
        #expect(second.stderr.hasPrefix("This replaces the sign-in of user@example.com for profile '\(f.sandbox.profile)' once the new one succeeds.\n"))
        for left in ["2 tries", "1 try"] {
            second.send("code=x\n")
            #expect(waitForWords(second, "again (\(left) left"))
        }
        second.send("still not it\n")
        #expect(second.wait(timeout: 30) == 1)
        #expect(failureLine(second.stderr).contains("that is not the address the browser ended on"))
        #expect(f.counter("code_exchanges") == 1, "only the first sign-in exchanged a code")
        #expect(f.run(["get"]).status == 0, "a failed sign-in leaves the stored one")
    }

    @Test func pastedRefusalIsReported() throws {
        let f = try LoginFixture(["authorize_error": "access_denied"])
        let live = try LiveRun(f.sandbox, ["login", "--no-browser"])
        #expect(live.waitFor("press Enter"))
        let url = try #require(authorizeURL(in: live.stderr))
        let address = try #require(finalAddress(url, issuerPort: f.issuer.port))
        #expect(address.contains("error=access_denied"))
        live.send(address + "\n")
        #expect(live.wait(timeout: 30) == 1)
        #expect(failureLine(live.stderr).contains("declined in the browser (access_denied"))
        #expect(f.counter("code_exchanges") + f.counter("code_exchange_failures") == 0)
        #expect(f.nothingStored())
    }

    @Test func wrongStateIsRefused() throws {
        let f = try LoginFixture()
        let r = f.run(["login", "--no-browser"], stdin: "http://localhost:1455/auth/callback?code=ac_forged&state=not-ours\n")
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("state does not match"))
        #expect(f.counter("code_exchanges") + f.counter("code_exchange_failures") == 0)
        #expect(f.nothingStored())
    }

    @Test(arguments: ["hello world\n", "\n", "http://localhost:1455/auth/callback\n", "https://example.com/?q=1\n", "\u{1B}[2J\n"])
    func garbageIsRefused(_ input: String) throws {
        let f = try LoginFixture()
        let r = f.run(["login", "--no-browser"], stdin: input)
        #expect(r.status == 1)
        let errorLines = r.stderr.split(separator: "\n").filter { $0.contains("sign-in failed") }
        #expect(errorLines.count == 1)
        #expect(hasNoEscape(r.stderr))
        #expect(f.nothingStored())
    }

    @Test func overLongPasteIsRefused() throws {
        let f = try LoginFixture()
        let r = f.run(["login", "--no-browser"], stdin: "http://localhost:1455/auth/callback?code=" + String(repeating: "a", count: 9000) + "\n")
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("8 KiB"))
        #expect(f.nothingStored())
    }

    @Test func nonInteractiveWithTerminalStdinIsAUsageError() throws {
        let f = try LoginFixture()
        // script(1) gives the command a pseudo-terminal as stdin.
        let cmd = "'\(Harness.binary)' --non-interactive login --no-browser"
        let s = Harness.run("/usr/bin/script", ["-q", "-e", "-c", cmd, "/dev/null"], env: f.sandbox.env, timeout: 20)
        #expect(s.status == 2, "\(s.stdout) \(s.stderr)")
        #expect((s.stdout + s.stderr).contains("--non-interactive"))
        #expect(f.counter("authorize_requests") == 0)
        #expect(f.nothingStored())
    }
}

// MARK: browser flow (ports 1455/1457: one serialized suite)

@Suite(.serialized) struct BrowserLoginTests {
    @Test func browserFlowStores() throws {
        let f = try LoginFixture()
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.hasSuffix(signedIn(f.sandbox) + "\n"))
        #expect(r.stderr.contains("/oauth/authorize?"), "the URL is printed even when a browser is opened")
        #expect(f.lastRedirectURI == "http://localhost:1455/auth/callback")
        let log = f.browserLog(browser.log)
        #expect(log.count == 1)
        #expect(log.first?.hasPrefix("final:200:close:") == true, "\(log)")
        #expect(log.first?.contains("Signed in") == true)
        #expect(f.run(["get"]).status == 0)
    }

    @Test func browserListFallsThroughToAProgramThatStarts() throws {
        let f = try LoginFixture()
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": f.sandbox.root + "/no-such-browser:" + browser.program])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(f.browserLog(browser.log).first?.hasPrefix("final:200:") == true)
    }

    @Test func wrongStateIsRefusedThenRightStateAccepted() throws {
        let f = try LoginFixture()
        let browser = f.browserScript(badStateFirst: true)
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(r.status == 0, "\(r.stderr)")
        let log = f.browserLog(browser.log)
        #expect(log.first == "bad-state:400", "\(log)")
        #expect(log.last?.hasPrefix("final:200:close:") == true, "\(log)")
        #expect(f.counter("code_exchanges") == 1)
        #expect(f.run(["get"]).status == 0)
    }

    @Test func busyPortFallsBackTo1457() throws {
        let blocker = try #require(PortBlocker(port: 1455), "127.0.0.1:1455 is in use by something else")
        let f = try LoginFixture()
        let browser = f.browserScript()
        let start = Date()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        _ = blocker
        #expect(r.status == 0, "\(r.stderr)")
        #expect(f.lastRedirectURI == "http://localhost:1457/auth/callback")
        #expect(Date().timeIntervalSince(start) < 10)
        #expect(f.run(["get"]).status == 0)
    }

    @Test func newerLoginCancelsAStaleOne() throws {
        let f = try LoginFixture()
        let stale = try LiveRun(f.sandbox, ["login", "--browser"], env: ["BROWSER": "/bin/true"])
        #expect(stale.waitFor("waiting for the browser"))
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(stale.wait(timeout: 10) == 1)
        #expect(stale.stderr.contains("cancelled by another login"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(f.lastRedirectURI == "http://localhost:1455/auth/callback")
    }

    @Test func authorizeErrorStopsWithNothingStored() throws {
        let f = try LoginFixture(["authorize_error": "access_denied"])
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("access_denied"))
        let log = f.browserLog(browser.log)
        #expect(log.first?.contains("Sign-in failed") == true, "\(log)")
        #expect(f.counter("code_exchanges") == 0)
        #expect(f.nothingStored())
    }

    @Test func missingCodexEntitlementIsNamed() throws {
        let f = try LoginFixture(["authorize_error": "missing_codex_entitlement"])
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(r.status == 1)
        #expect(failureLine(r.stderr).contains("Codex is not enabled for this ChatGPT workspace"))
        #expect(f.nothingStored())
    }

    @Test func poisonedExchangeStoresNothing() throws {
        let f = try LoginFixture(["poison": "esc"])
        let browser = f.browserScript()
        let r = f.run(["login", "--browser"], env: ["BROWSER": browser.program])
        #expect(r.status == 1)
        #expect(hasNoEscape(r.stderr))
        let log = f.browserLog(browser.log)
        #expect(log.first.map(hasNoEscape) == true)
        #expect(log.first?.contains("Sign-in failed") == true, "\(log)")
        #expect(f.nothingStored())
    }

    @Test func nonInteractiveNeverOpensABrowser() throws {
        let f = try LoginFixture()
        let marker = f.sandbox.root + "/browser-was-run"
        let trap = f.sandbox.root + "/trap.sh"
        _ = FileManager.default.createFile(atPath: trap, contents: Data("#!/bin/sh\ntouch '\(marker)'\n".utf8),
                                       attributes: [.posixPermissions: 0o755])
        let live = try LiveRun(f.sandbox, ["--non-interactive", "login", "--browser"], env: ["BROWSER": trap, "DISPLAY": ":0"])
        #expect(live.waitFor("waiting for the browser"))
        let url = try #require(live.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.contains("/oauth/authorize?") })
        // The person opens the printed URL themselves.
        let browser = f.browserScript()
        let helper = Harness.run(browser.program, [url], env: f.sandbox.env, timeout: 30)
        #expect(helper.status == 0)
        #expect(live.wait(timeout: 20) == 0, "\(live.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(f.run(["get"]).status == 0)
    }

    @Test func displayWithoutSSHDefaultsToBrowser() throws {
        let f = try LoginFixture()
        let browser = f.browserScript()
        let r = f.run(["login"], env: ["DISPLAY": ":0", "BROWSER": browser.program])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(f.counter("authorize_requests") == 1)
        #expect(f.counter("device_usercode") == 0)
    }

    @Test func ctrlCStopsTheListener() throws {
        let f = try LoginFixture()
        let live = try LiveRun(f.sandbox, ["login", "--browser"], env: ["BROWSER": "/bin/true"])
        #expect(live.waitFor("waiting for the browser"))
        live.interrupt()
        #expect(live.wait(timeout: 5) == 130) // 128 + SIGINT
        #expect(live.stderr.contains("sign-in cancelled"))
        #expect(f.nothingStored())
        // The port is free again.
        #expect(PortBlocker(port: 1455) != nil)
    }
}
