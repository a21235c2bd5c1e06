import CredentialCore
import OAuth
import SystemRuntime
import Secrets

/// `login --device`: the device-code flow (default over SSH and without a display).
/// Shows the verification page and the user code on stderr, polls the issuer at its interval
/// (backing off on slow_down/429), and exchanges the approved code with the verifier from the
/// poll answer at ISSUER/deviceauth/callback. Ctrl-C, expiry and refusal end it with nothing stored.
public struct DeviceCodeFlow {
    public var client: IssuerClient
    public var console: Console
    public var interrupt: InterruptWatch?
    /// The profile signing in: messages that say what to run name it.
    public var profile: Profile
    /// Polling gives up after this long (the issuer's codes last 15 minutes).
    public var lifetime: Double = OAuthConstants.deviceCodeLifetime
    /// Seconds added to the interval on slow_down/429 (RFC 8628 §3.5), and its ceiling.
    public var slowDownStep: Double = 5
    public var maxInterval: Double = 60
    /// Temporary failures (5xx, network, unreadable answers) in a row before giving up (exit 4).
    public var maxConsecutiveFailures = 3
    /// Reminder of the time left, this often.
    public var reminderEvery: Double = 5 * 60
    /// Diagnostics for --verbose.
    public var debug: (String) -> Void = { _ in }
    /// Offer the code to the terminal's clipboard (OSC 52): `login --clipboard`.
    public var clipboard = false
    /// Columns to wrap the prompt at (the terminal's on stderr, else 80).
    public var width = 80

    public init(client: IssuerClient, console: Console, interrupt: InterruptWatch?, profile: Profile) {
        self.client = client
        self.console = console
        self.interrupt = interrupt
        self.profile = profile
    }

    public static func expired(_ profile: Profile) -> CredentialError {
        .loginFailed("the device code expired before the sign-in was approved; nothing was stored; run '\(profile.loginCommand)' again")
    }

    /// The grant, without saving it (tests); `login` saves through `run(complete:)`.
    public func run() throws -> TokenGrant {
        var grant: TokenGrant?
        try run { grant = $0 }
        return grant!
    }

    /// Polls until approved, then exchanges the code and hands the grant to `complete` (which
    /// saves it), both inside the spend-to-save window: a signal waits until it is saved.
    public func run(complete: (TokenGrant) throws -> Void) throws {
        let device = try client.requestDeviceCode(for: profile)
        let lifetime = min(self.lifetime, device.expiresIn.map(Double.init) ?? self.lifetime)
        show(device, lifetime: lifetime)
        let start = Clock.monotonicMillis()
        let deadline = start + Int64(lifetime * 1000)
        var nextReminder = start + Int64(reminderEvery * 1000)
        var interval = Double(device.interval)
        var failures = 0
        while true {
            let now = Clock.monotonicMillis()
            if now >= deadline { throw Self.expired(profile) }
            let pause = min(interval, Double(deadline - now) / 1000)
            if !Waiter.sleep(pause, interrupt: interrupt) { throw InterruptWatch.cancelled }
            if Clock.monotonicMillis() >= deadline { throw Self.expired(profile) }
            if Clock.monotonicMillis() >= nextReminder {
                let left = Double(deadline - Clock.monotonicMillis()) / 1000
                console.err("chatgpt-credential: still waiting for approval; the code expires in \(Self.duration(left))")
                nextReminder += Int64(reminderEvery * 1000)
            }
            let answer: DevicePoll
            do {
                answer = try client.pollDeviceToken(device)
            } catch CredentialError.temporary(let why) {
                if interrupt?.fired == true { throw InterruptWatch.cancelled }
                failures += 1
                debug("poll failed (\(why)); \(failures) in a row")
                if failures >= maxConsecutiveFailures {
                    throw CredentialError.temporary("gave up polling for the device sign-in after \(failures) failed attempts (\(why)); nothing was stored")
                }
                interval = min(max(interval * 2, 1), maxInterval)
                continue
            }
            if interrupt?.fired == true { throw InterruptWatch.cancelled }
            failures = 0
            debug("poll: \(answer.debugName)")
            switch answer {
            case .pending:
                continue
            case .slowDown:
                interval = min(interval + slowDownStep, maxInterval)
            case .expired:
                throw Self.expired(profile)
            case .denied(let reason):
                throw CredentialError.loginFailed("the sign-in was declined (\(Sanitize.line(reason, limit: 80))); nothing was stored")
            case .approved(let code, let verifier):
                try SignalDeferral.during {
                    try complete(try client.exchangeCode(code: code, verifier: verifier, redirectURI: client.config.deviceRedirectURI))
                }
                return
            }
        }
    }

    /// The prompt: the page, the code once (bold on a terminal), and one warning, wrapped at
    /// spaces to `width`; no per-line program prefix, as gh and codex show theirs. The code goes
    /// to the terminal's clipboard (OSC 52) only when asked (`login --clipboard`) and only when
    /// stderr is a terminal (a log file must not carry escapes).
    func show(_ device: DeviceCode, lifetime: Double) {
        let url = Sanitize.line(device.verificationURL, limit: 2048)
        let code = Sanitize.line(device.userCode, limit: 64)
        var shown = code
        var copied = false
        if console.stderrIsTerminal {
            shown = "\u{1B}[1m" + code + "\u{1B}[0m" // bold; our own escape, the code itself is checked
            if clipboard {
                shown += "\u{1B}]52;c;" + Base64.encode(Array(code.utf8), alphabet: .standard, padded: true) + "\u{07}"
                copied = true
            }
        }
        func say(_ text: String) { for line in TextWrap.lines(text, width: width) { console.err(line) } }
        say("To sign in, open this page in a browser on any device:")
        console.err("")
        console.err("    " + url)
        console.err("")
        say("and enter this one-time code\(copied ? " (also offered to your terminal's clipboard)" : ""):")
        console.err("")
        console.err("    " + shown)
        console.err("")
        say("Never share this code: whoever enters it signs in as you. Enter it only on \(host(of: url)).")
        say("The code expires in \(Self.duration(lifetime)); waiting for approval (Ctrl-C to cancel).")
    }

    /// "15 minutes", "1 minute", "45 seconds".
    static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.rounded()))
        if s < 60 { return "\(s) second\(s == 1 ? "" : "s")" }
        let m = s / 60
        return "\(m) minute\(m == 1 ? "" : "s")"
    }

    private func host(of url: String) -> String {
        guard let r = url.firstRange(of: "://") else { return url }
        let rest = url[r.upperBound...]
        return String(rest.prefix { $0 != "/" })
    }
}

extension DevicePoll {
    /// For --verbose: never the code or verifier.
    var debugName: String {
        switch self {
        case .pending: return "pending"
        case .slowDown: return "slow down"
        case .approved: return "approved"
        case .expired: return "expired"
        case .denied(let r): return "denied (\(r))"
        }
    }
}
