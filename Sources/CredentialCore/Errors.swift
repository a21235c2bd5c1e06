import Secrets

/// Every failure the library can report. Each case maps to exactly one exit code in
/// `exitCode` below: that switch is the project's single exit-code table (man page EXIT STATUS).
public enum CredentialError: Error, Equatable, Sendable {
    // 1: failure not covered below
    case failure(String)
    case loginFailed(String)
    // 2: usage
    /// `namesItsHelp`: the text already ends pointing at a help page (a "did you mean", `Suggestion`),
    /// so no second pointer is added; decided by the thrower, never on the words.
    case usage(String, namesItsHelp: Bool = false)
    case badInput(String)
    // 3: login required
    case notSignedIn(profile: String)
    /// Nothing for the profile in the encrypted file (`file`: its path) and the Secret Service
    /// could not be reached (`keyring`: why, naming the bus missing or silent): a keyring this
    /// process cannot see may hold the sign-in, so both are said, never plainly "not signed in"
    /// (man page STORES). A broker answers it 503, not 401 (`BrokerProtocol.status(for:)`).
    case notFoundKeyringUnreachable(profile: String, keyring: String, file: String)
    case refreshRejected(profile: String, code: String)
    /// The ChatGPT backend refused the access token (HTTP 401) also right after a refresh.
    case backendRejected(profile: String)
    // 4: temporary
    case temporary(String)
    case lockTimeout(profile: String)
    // 130 (128 + SIGINT): the person pressed Ctrl-C at a prompt or while waiting
    case interrupted(String)
    // 5: store problem
    case keyringLocked(String)
    /// No store of this kind can be reached at all (no session bus, nobody owning
    /// org.freedesktop.secrets, libsecret missing). Under `auto` that means "not there".
    /// `secretService` is true when the store is the Secret Service (libsecret included): only
    /// then may the advice name `--store file` (`Runner.advised`), never decided on the words.
    case storeUnavailable(String, secretService: Bool = false)
    /// The store is there but did not answer before its deadline: never "not signed in".
    case storeNotAnswering(String)
    case storeCorrupt(String)
    case wrongKey(String)
    case permissionsTooOpen(path: String)
    case storeFailure(String)
    /// The encrypted file store's lock (beside the file, man page FILES) cannot be taken here —
    /// its directory is mounted read-only or cannot be written by this process — so nothing
    /// there is changed: never changed unlocked. `reason` is the system's word for it.
    case storeReadOnly(directory: String, reason: String)
    // client mode: a broker's error answer, its exit code from its HTTP status (man page, BROKER)
    case brokerAnswered(status: Int, message: String, broker: String)

    /// The exit-code table. Nothing else in the project decides exit codes.
    public var exitCode: Int32 {
        switch self {
        case .failure, .loginFailed: return 1
        case .usage, .badInput: return 2
        case .notSignedIn, .notFoundKeyringUnreachable, .refreshRejected, .backendRejected: return 3
        case .temporary, .lockTimeout: return 4
        case .keyringLocked, .storeUnavailable, .storeNotAnswering, .storeCorrupt, .wrongKey, .permissionsTooOpen, .storeFailure, .storeReadOnly: return 5
        case .interrupted: return 128 + 2 // as a shell reports a process Ctrl-C ended
        case .brokerAnswered(let status, _, _): return Self.exitCode(forBrokerStatus: status)
        }
    }

    /// A broker's error status as an exit code (man page BROKER, Client mode): the one table,
    /// read by client mode (`brokerAnswered`) and by the broker (`BrokerProtocol.exitCode(forStatus:)`).
    public static func exitCode(forBrokerStatus status: Int) -> Int32 {
        switch status {
        case 400: return 2          // bad request
        case 401: return 3          // login required where the broker runs
        case 502: return 4          // temporary
        case 403, 503: return 5     // this peer refused; the broker's store problem
        default: return 1
        }
    }

    /// One line: what happened and what to do next. Free of control bytes.
    public var message: String {
        let text: String
        switch self {
        case .failure(let m): text = m
        case .loginFailed(let m): text = "sign-in failed: \(m)"
        // A message that already points at a help page (a "did you mean") is not given a second.
        case .usage(let m, let namesItsHelp): text = namesItsHelp ? m : "\(m) (see: chatgpt-credential --help)"
        case .badInput(let m): text = m
        case .notSignedIn(let p):
            let login = Profile(unchecked: p).loginCommand
            text = p == "default" ? "not signed in; run: \(login)" : "profile '\(p)' is not signed in; run: \(login)"
        case .notFoundKeyringUnreachable(let p, let keyring, let file):
            let login = Profile(unchecked: p).loginCommand
            let what = p == "default" ? "no credential found" : "no credential found for profile '\(p)'"
            text = "\(what): \(file) does not exist and \(keyring); if you signed in with a keyring, run this where its session bus is reachable, else sign in here: \(login)"
        case .refreshRejected(let p, let code):
            text = "the issuer rejected the refresh token (\(code)); sign in again: \(Profile(unchecked: p).loginCommand)"
        case .backendRejected(let p):
            text = "the ChatGPT backend rejected the access token (HTTP 401), also right after a refresh; sign in again: \(Profile(unchecked: p).loginCommand)"
        case .temporary(let m): text = "\(m); try again later"
        case .lockTimeout(let p): text = "timed out waiting for another chatgpt-credential process changing profile '\(p)' (a refresh, sign-in or erase); try again"
        case .interrupted(let m): text = m
        case .keyringLocked(let m): text = m
        case .storeUnavailable(let m, _): text = m
        case .storeNotAnswering(let m): text = m
        case .storeCorrupt(let m): text = m
        case .wrongKey(let m): text = m
        case .permissionsTooOpen(let path):
            // A path ending in "/" names a directory, which needs its x bit: 700, not 600.
            let mode = path.hasSuffix("/") ? "700" : "600"
            text = "\(path) is accessible by group or others; run: chmod \(mode) \(path)"
        case .storeFailure(let m): text = m
        case .storeReadOnly(let directory, let reason):
            text = "cannot take the lock of the encrypted file store in \(directory) (\(reason)); nothing there is changed from here: run this where that directory can be written"
        case .brokerAnswered(let status, let m, let broker):
            let said = m.isEmpty ? "HTTP \(status)" : "\(m) (HTTP \(status))"
            switch status {
            case 403: text = "the broker at \(broker) refused this process: \(said); it answers its own user (or one the broker's side allows with --allow-uid)"
            // A broker's own message carries its advice (client mode puts it on the broker's side).
            case 401 where m.isEmpty: text = "the broker at \(broker) says: \(said); sign in where the broker runs"
            default: text = "the broker at \(broker) says: \(said)"
            }
        }
        // Our own sentence naming two places (a bus and a file) may pass the usual 400 characters,
        // and so may the broker's, which is that sentence with the broker's address before it.
        switch self {
        case .notFoundKeyringUnreachable, .brokerAnswered: return Sanitize.line(text, limit: 1200)
        default: break
        }
        return Sanitize.line(text)
    }
}
