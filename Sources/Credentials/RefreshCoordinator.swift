import CredentialCore
import Stores
import OAuth
#if canImport(Glibc)
import Glibc
#endif

/// The issuer's refresh call (`IssuerClient` in production; scripted in tests).
public protocol TokenRefreshing {
    func refresh(refreshToken: String) -> RefreshResult
}

extension IssuerClient: TokenRefreshing {}

/// The answer to `get`: a document to print from, plus notices for stderr.
public struct FreshCredential: Sendable {
    public var document: TokenDocument
    public var notices: [String]
    /// True when this process performed the refresh.
    public var refreshed: Bool
}

/// The one place that decides and performs refreshes (SPEC "Refresh"):
/// lock → re-read → decide → refresh → persist → answer. Refresh tokens are single-use, so the
/// rotated document is persisted before anyone is given the new access token.
public final class RefreshCoordinator {
    public let profile: Profile
    let store: CredentialStore
    let lockPath: String?
    let refresher: () throws -> TokenRefreshing
    let now: () -> Int64
    let lockTimeout: Double

    public init(profile: Profile, store: CredentialStore, lockPath: String?, lockTimeout: Double = 60,
                now: @escaping () -> Int64 = Clock.now, refresher: @escaping () throws -> TokenRefreshing) {
        self.profile = profile
        self.store = store
        self.lockPath = lockPath
        self.lockTimeout = lockTimeout
        self.now = now
        self.refresher = refresher
    }

    /// True when `document` must be refreshed before use.
    public static func needsRefresh(_ d: TokenDocument, options: Freshness, now: Int64) -> Bool {
        options.forceRefresh || !d.hasAccessToken || d.expiresAt - now < max(300, options.minTTL)
    }

    /// Whether a stored token is still good enough to print when a refresh could not happen:
    /// at least --min-ttl seconds left when one was given, else simply not yet expired.
    static func stillUsable(_ d: TokenDocument, options: Freshness, now: Int64) -> Bool {
        guard d.hasAccessToken else { return false }
        if let required = options.requiredTTL { return d.expiresAt - now >= required }
        return d.expiresAt > now
    }

    public func fresh(_ initial: TokenDocument, options: Freshness) throws -> FreshCredential {
        if !Self.needsRefresh(initial, options: options, now: now()) {
            return FreshCredential(document: initial, notices: [], refreshed: false)
        }
        if let code = initial.refreshRejected {
            return try fallback(initial, options: options, permanent: code, notices: [])
        }
        guard let lockPath else { return try exclusive { try refreshHoldingLock(initial, options: options) } }
        let lock = try FileLock.open(path: lockPath)
        defer { lock.release() }
        let started = Clock.monotonicMillis()
        func remaining() -> Double { lockTimeout - Double(Clock.monotonicMillis() - started) / 1000 }
        if try !lock.tryLock(.exclusive) {
            // A refresh is under way elsewhere: wait for it (shared, so every waiter reads at once),
            // then use what it stored.
            try lock.lock(.shared, profile: profile, timeout: remaining())
            if case .answered(let answer) = try lookAgain(initial, options: options) { return answer }
            lock.unlock()
            try lock.lock(.exclusive, profile: profile, timeout: remaining())
        }
        return try refreshHoldingLock(initial, options: options)
    }

    enum Reread {
        /// Another process already dealt with it (rotated, refreshed, or found it rejected).
        case answered(FreshCredential)
        /// Still ours to refresh: the document as stored now.
        case stale(TokenDocument)
    }

    /// Re-reads the store: what another process left there may make our refresh unnecessary.
    private func lookAgain(_ initial: TokenDocument, options: Freshness) throws -> Reread {
        guard let current = try store.load(profile) else { throw CredentialError.notSignedIn(profile: profile.name) }
        if let code = current.refreshRejected { return .answered(try fallback(current, options: options, permanent: code, notices: [])) }
        if current.refreshToken != initial.refreshToken || !Self.needsRefresh(current, options: options, now: now()) {
            return .answered(FreshCredential(document: current, notices: [], refreshed: false))
        }
        return .stale(current)
    }

    /// Holding the exclusive lock: re-read (another process may have refreshed while we waited),
    /// refresh, persist, answer.
    private func refreshHoldingLock(_ initial: TokenDocument, options: Freshness) throws -> FreshCredential {
        let current: TokenDocument
        switch try lookAgain(initial, options: options) {
        case .answered(let answer): return answer
        case .stale(let document): current = document
        }
        switch try refresher().refresh(refreshToken: current.refreshToken) {
        case .rotated(let t):
            let next = current.rotated(accessToken: t.accessToken, refreshToken: t.refreshToken, idToken: t.idToken, now: now())
            do {
                try store.save(next, for: profile)
            } catch let e as CredentialError {
                // The old refresh token is spent; the new one exists only in memory.
                throw CredentialError.storeFailure("refreshed, but could not save the new tokens (\(e.message)); the previous refresh token is now spent: sign in again if the next get fails")
            }
            return FreshCredential(document: next, notices: [], refreshed: true)
        case .rejected(let code):
            var marked = current
            marked.refreshRejected = code
            try? store.save(marked, for: profile) // so later gets stop asking the issuer
            return try fallback(marked, options: options, permanent: code, notices: [])
        case .unavailable(let reason):
            return try fallback(current, options: options, transient: reason)
        }
    }

    /// Runs `body` holding the profile's lock: same-process callers queue on a mutex, other
    /// processes on the flock. Every change to a stored document goes through here.
    public func exclusive<T>(_ body: () throws -> T) throws -> T {
        try ProfileMutex.shared.withLock(profile.name) {
            let lock = try lockPath.map { try FileLock.acquire(path: $0, profile: profile, timeout: lockTimeout) }
            defer { lock?.release() }
            return try body()
        }
    }

    /// git `erase`: the caller says `rejectedToken` was refused. Drop the stored access token only if
    /// it is still that one (a late rejection of an older token changes nothing); keep the refresh
    /// token so the next `get` refreshes. Returns true when something was dropped.
    public func dropAccessToken(if matches: (TokenDocument) -> Bool) throws -> Bool {
        try exclusive {
            guard var current = try store.load(profile), current.hasAccessToken, matches(current) else { return false }
            current.accessToken = ""
            current.expiresAt = 0
            try store.save(current, for: profile)
            return true
        }
    }

    private func fallback(_ d: TokenDocument, options: Freshness, permanent code: String, notices: [String]) throws -> FreshCredential {
        guard Self.stillUsable(d, options: options, now: now()) else {
            throw CredentialError.refreshRejected(profile: profile.name, code: code)
        }
        let left = TimeSpan.describe(d.expiresAt - now())
        return FreshCredential(document: d, notices: notices + [
            "warning: the issuer rejected the refresh token (\(Sanitize.line(code, limit: 60))); this token expires in \(left); sign in again soon: \(loginCommand)"
        ], refreshed: false)
    }

    private func fallback(_ d: TokenDocument, options: Freshness, transient reason: String) throws -> FreshCredential {
        guard Self.stillUsable(d, options: options, now: now()) else {
            throw CredentialError.temporary("could not refresh the token: \(reason)")
        }
        let left = TimeSpan.describe(d.expiresAt - now())
        return FreshCredential(document: d, notices: [
            "notice: could not refresh the token (\(Sanitize.line(reason, limit: 120))); printing the stored one, which expires in \(left)"
        ], refreshed: false)
    }

    var loginCommand: String {
        profile == .default ? "chatgpt-credential login" : "chatgpt-credential --profile \(profile.name) login"
    }
}

/// One mutex per profile inside this process, so concurrent callers in one process share the
/// in-flight refresh (the second re-reads and finds the rotated tokens) instead of racing.
final class ProfileMutex: @unchecked Sendable {
    static let shared = ProfileMutex()
    private var guardMutex = pthread_mutex_t()
    private var mutexes: [String: UnsafeMutablePointer<pthread_mutex_t>] = [:]

    init() { pthread_mutex_init(&guardMutex, nil) }

    func withLock<T>(_ key: String, _ body: () throws -> T) throws -> T {
        pthread_mutex_lock(&guardMutex)
        let m: UnsafeMutablePointer<pthread_mutex_t>
        if let existing = mutexes[key] { m = existing } else {
            m = .allocate(capacity: 1)
            pthread_mutex_init(m, nil)
            mutexes[key] = m
        }
        pthread_mutex_unlock(&guardMutex)
        pthread_mutex_lock(m)
        defer { pthread_mutex_unlock(m) }
        return try body()
    }
}
