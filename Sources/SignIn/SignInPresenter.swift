/// What the sign-in flows have to tell the person, as events: the flows never print (a library
/// module reports, the executable words it). The CLI implements it on stderr
/// (`CLI/SignInPrompts.swift`); tests record it. Addresses and codes arrive already sanitised.
public protocol SignInPresenter: AnyObject {
    /// `login --device`: the page to open, the one-time code to enter there, and how long it lasts.
    func showDeviceCode(url: String, code: String, expiresIn seconds: Double)
    /// `login --device`: a reminder while polling, `remaining` seconds before the code expires.
    func waiting(remaining seconds: Double)
    /// The issuer's authorize address, and what the person is to do with it.
    func showAuthorizeURL(_ url: String, use: AuthorizeURLUse)
    /// `login --no-browser`: ask for the address the browser ended on (`callback` is what it looks
    /// like); `retry` when the previous paste could not be used.
    func askForPastedAddress(callback: String, retry: PasteRetry?)
    /// One line of progress or advice (a browser that did not start, what is being waited for).
    func notice(_ text: String)
    /// `login --device`, about once a second while it waits: `elapsed` seconds since the code was
    /// shown, `remaining` before it expires (a terminal shows one line that updates in place).
    func progress(elapsed: Double, remaining: Double)
    /// The wait is over (approved, refused, expired, cancelled): an updating line is put away.
    func progressEnded()
}

extension SignInPresenter {
    public func progress(elapsed: Double, remaining: Double) {}
    public func progressEnded() {}
}

/// How the authorize address is meant to be opened.
public enum AuthorizeURLUse: Equatable, Sendable {
    /// A browser is being started with it; the address is the fallback.
    case openingBrowser
    /// No browser is started: open it on this machine. `browserDisabled`: `--non-interactive` said so.
    case openOnThisMachine(browserDisabled: Bool)
    /// Open it on any machine, then paste back the address the browser ends on.
    case openAnywhereAndPasteBack
}

/// Why a paste is asked for again, and how many more are read.
public struct PasteRetry: Equatable, Sendable {
    public var reason: String
    public var triesLeft: Int
    public init(reason: String, triesLeft: Int) {
        self.reason = reason
        self.triesLeft = triesLeft
    }
}
