import CredentialCore
import OAuth
import SystemRuntime
import Secrets

/// `login --device`: the device-code flow (default over SSH and without a display).
/// Shows the verification page and the user code (through the presenter), polls the issuer at its interval
/// (backing off on slow_down/429), and exchanges the approved code with the verifier from the
/// poll answer at ISSUER/deviceauth/callback. Ctrl-C, expiry and refusal end it with nothing stored.
public struct DeviceCodeFlow {
    public var client: IssuerClient
    public var presenter: SignInPresenter
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

    public init(client: IssuerClient, presenter: SignInPresenter, interrupt: InterruptWatch?, profile: Profile) {
        self.client = client
        self.presenter = presenter
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
        presenter.showDeviceCode(url: Sanitize.line(device.verificationURL, limit: 2048),
                                 code: Sanitize.line(device.userCode, limit: 64), expiresIn: lifetime)
        let start = Clock.monotonicMillis()
        let deadline = start + Int64(lifetime * 1000)
        defer { presenter.progressEnded() }
        /// Sleeps `seconds` in slices of at most a second, reporting the progress after each.
        func pauseShowingProgress(_ seconds: Double) -> Bool {
            let until = Clock.monotonicMillis() + Int64(seconds * 1000)
            while true {
                let now = Clock.monotonicMillis()
                presenter.progress(elapsed: Double(now - start) / 1000, remaining: Double(max(0, deadline - now)) / 1000)
                if now >= until { return true }
                if !Waiter.sleep(min(1, Double(until - now) / 1000), interrupt: interrupt) { return false }
            }
        }
        var nextReminder = start + Int64(reminderEvery * 1000)
        var interval = Double(device.interval)
        var failures = 0
        while true {
            let now = Clock.monotonicMillis()
            if now >= deadline { throw Self.expired(profile) }
            let pause = min(interval, Double(deadline - now) / 1000)
            if !pauseShowingProgress(pause) { throw InterruptWatch.cancelled }
            if Clock.monotonicMillis() >= deadline { throw Self.expired(profile) }
            if Clock.monotonicMillis() >= nextReminder {
                presenter.waiting(remaining: Double(deadline - Clock.monotonicMillis()) / 1000)
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
