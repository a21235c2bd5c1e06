import CredentialCore
import OAuth
import Transport
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `login --no-browser`: shows the authorize URL (through the presenter) (redirect URI http://localhost:1455/auth/callback);
/// the person signs in in any browser, which then fails to load the localhost address; they paste
/// that address here (from /dev/tty, or from stdin when stdin is not a terminal). The state is
/// checked and the code exchanged.
public struct PasteBackFlow {
    public var client: IssuerClient
    /// Standard input, read when it is not a terminal (the pasted address piped in); never written.
    public var console: Console
    public var presenter: SignInPresenter
    public var interrupt: InterruptWatch?
    public var nonInteractive: Bool
    /// The profile signing in: messages that say what to run name it.
    public var profile: Profile
    public var timeout: Double = 15 * 60
    public static let maxLine = 8 * 1024
    public var port = OAuthConstants.browserCallbackPorts[0]

    public init(client: IssuerClient, console: Console, presenter: SignInPresenter, interrupt: InterruptWatch?, nonInteractive: Bool,
                profile: Profile) {
        self.client = client
        self.console = console
        self.presenter = presenter
        self.interrupt = interrupt
        self.nonInteractive = nonInteractive
        self.profile = profile
    }

    /// Refuses up front when the address could only come from the terminal (exit 2).
    public func checkUsable() throws {
        if nonInteractive && console.stdinIsTerminal {
            throw CredentialError.usage("login --no-browser needs the pasted address; with --non-interactive give it on stdin (not a terminal), or use --device")
        }
    }

    /// The grant, without saving it (tests); `login` saves through `run(complete:)`.
    public func run() throws -> TokenGrant {
        var grant: TokenGrant?
        try run { grant = $0 }
        return grant!
    }

    /// Reads the pasted address, then exchanges the code and hands the grant to `complete` (which
    /// saves it), both inside the spend-to-save window: a signal waits until it is saved.
    public func run(complete: (TokenGrant) throws -> Void) throws {
        try checkUsable()
        var tty: Int32 = -1
        if console.stdinIsTerminal {
            tty = open("/dev/tty", O_RDONLY | O_CLOEXEC | O_NOCTTY)
            guard tty >= 0 else {
                throw CredentialError.usage("login --no-browser cannot open the terminal to read the pasted address; pipe it on stdin, or use --device")
            }
        }
        defer { if tty >= 0 { close(tty) } }

        let pkce = PKCE()
        let redirectURI = OAuthConstants.browserRedirectURI(port: port)
        let url = client.authorizeURL(redirectURI: redirectURI, pkce: pkce)
        let callbackShape = "http://localhost:\(port)/auth/callback?code=…&state=…"
        presenter.showAuthorizeURL(Sanitize.line(url, limit: 4096), use: .openAnywhereAndPasteBack)
        presenter.askForPastedAddress(callback: callbackShape, retry: nil)

        // A bad paste (only the code, a truncated address, another sign-in's address) asks again,
        // a bounded number of times; the end of the input or Ctrl-C ends the sign-in.
        var attempt = 1
        var previous: BadPaste?
        while true {
            var line = SecretBytes(capacity: 1024)
            let ended = try tty >= 0 ? readLine(fd: tty, into: &line) : readLineFromStdin(into: &line)
            let callback: CallbackParameters
            do {
                // The pasted address carries the authorization code: parsed from guarded memory.
                callback = try Self.parse(line)
                guard callback.state == pkce.state else { throw BadPaste.otherSignIn }
            } catch let bad as BadPaste {
                // The input ended after a bad paste: that paste's reason is the one to report.
                if ended, line.count == 0, let previous { throw previous.error(profile) }
                guard attempt < Self.maxAttempts, !ended else { throw bad.error(profile) }
                previous = bad
                let left = Self.maxAttempts - attempt
                attempt += 1
                presenter.askForPastedAddress(callback: callbackShape, retry: PasteRetry(reason: bad.retryReason, triesLeft: left))
                continue
            }
            if let problem = callback.refusal { throw problem }
            guard let code = callback.codeToken else { throw Self.garbage }
            return try SignalDeferral.during {
                try complete(try client.exchangeCode(code: code, verifier: pkce.verifier, redirectURI: redirectURI))
            }
        }
    }

    /// Pastes read before the sign-in ends (the first and two more).
    public static let maxAttempts = 3

    /// Why a pasted text cannot be used. The case decides what the retry prompt says
    /// (`retryReason`) and what a sign-in ending on it reports (`error`, exit 1).
    enum BadPaste: Error, Equatable {
        /// Not an address the browser ends on (only the code, truncated, another site's).
        case notTheAddress
        /// An empty line.
        case nothingPasted
        /// A callback whose state is not this sign-in's.
        case otherSignIn

        /// Why the paste is asked for again, in a few words.
        var retryReason: String {
            switch self {
            case .notTheAddress: return "That is not the whole address (http://localhost:1455/auth/callback?code=…&state=…)"
            case .otherSignIn: return "That address belongs to a different sign-in"
            case .nothingPasted: return "Nothing was pasted"
            }
        }

        /// What the sign-in reports when it ends on this paste.
        func error(_ profile: Profile) -> CredentialError {
            switch self {
            case .notTheAddress: return PasteBackFlow.garbage
            case .nothingPasted: return .loginFailed("nothing was pasted; nothing was stored")
            case .otherSignIn:
                return .loginFailed("the pasted address belongs to a different sign-in (its state does not match); nothing was stored; run '\(profile.command("login --no-browser"))' again and paste the address from that sign-in")
            }
        }
    }

    static let garbage = CredentialError.loginFailed(
        "that is not the address the browser ended on; expected http://localhost:1455/auth/callback?code=…&state=…; nothing was stored")

    /// The callback parameters of a pasted address (or of its bare query string); `BadPaste` when
    /// the text cannot be one.
    static func parse(_ line: borrowing SecretBytes) throws(BadPaste) -> CallbackParameters {
        let parsed: Result<CallbackParameters, BadPaste> = line.withUnsafeBytes { all in
            func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
            var a = 0, b = all.count
            while a < b, isSpace(all[a]) { a += 1 }
            while b > a, isSpace(all[b - 1]) { b -= 1 }
            let t = all[a..<b]
            guard !t.isEmpty else { return .failure(.nothingPasted) }
            func starts(_ prefix: String) -> Bool { t.starts(with: prefix.utf8) }
            var query: Slice<UnsafeRawBufferPointer>
            if let q = t.firstIndex(of: UInt8(ascii: "?")) {
                query = t[(q + 1)...]
            } else if starts("code=") || starts("state=") || starts("error=") {
                query = t
            } else {
                return .failure(.notTheAddress)
            }
            if let hash = query.firstIndex(of: UInt8(ascii: "#")) { query = query[..<hash] }
            guard query.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
                  let pairs = FormEncoding.decode(query: UnsafeRawBufferPointer(rebasing: query), secretNames: CallbackParameters.secretNames)
            else { return .failure(.notTheAddress) }
            let callback = CallbackParameters(pairs)
            guard callback.state != nil, callback.code != nil || callback.error != nil else { return .failure(.notTheAddress) }
            return .success(callback)
        }
        return try parsed.get()
    }

    private func tooLong() -> CredentialError {
        .loginFailed("the pasted text is longer than \(Self.maxLine / 1024) KiB; nothing was stored")
    }

    /// One line from the terminal, bounded, interruptible by Ctrl-C, within `timeout`; read
    /// straight into `SecretBytes`.
    /// True when the input ended (no newline came).
    private func readLine(fd: Int32, into line: inout SecretBytes) throws -> Bool {
        let deadline = Clock.monotonicMillis() + Int64(timeout * 1000)
        while true {
            switch Waiter.readable([fd], interrupt: interrupt, timeoutMillis: deadline - Clock.monotonicMillis()) {
            case .interrupted: throw InterruptWatch.cancelled
            case .timedOut: throw CredentialError.loginFailed("nothing was pasted within \(Int(timeout / 60)) minutes; nothing was stored")
            case .ready: break
            }
            let start = line.count
            var n = 0, code: Int32 = 0
            line.append(upTo: 1024) { room in
                n = read(fd, room.baseAddress, room.count)
                if n < 0 { code = errno }
                return max(n, 0)
            }
            if n < 0 {
                if code == EINTR || code == EAGAIN { continue }
                throw CredentialError.loginFailed("cannot read the terminal: \(String(cString: strerror(code)))")
            }
            if n == 0 { return true }
            if let nl = line.withUnsafeBytes({ $0[start...].firstIndex(of: 0x0A) }) {
                line.truncate(to: nl)
                if line.count > Self.maxLine { throw tooLong() }
                return false
            }
            if line.count > Self.maxLine { throw tooLong() }
        }
    }

    /// One line from stdin (a pipe or file), bounded.
    private func readLineFromStdin(into line: inout SecretBytes) throws -> Bool {
        while true {
            if interrupt?.fired == true { throw InterruptWatch.cancelled }
            let chunk = try console.readSome(1) // one byte at a time: what follows the line is the next paste
            if chunk.isEmpty { return true }
            if chunk[0] == 0x0A { return false }
            chunk.withUnsafeBytes { line.append($0) }
            if line.count > Self.maxLine { throw tooLong() }
        }
    }
}
