import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Retries of one idempotent-enough call (man page REFRESH: transient failures are retried with
/// backoff and jitter within a bounded total).
///
/// Retried: HTTP 5xx, 429 (waiting `Retry-After` when it is at most `maxRetryAfter`, else giving
/// up at once), and transient network errors (timeout, connect, reset). A retry is only started when
/// it and its pause fit in `totalBudget` seconds from the first attempt, and the retry's own total
/// timeout is cut to what is left of the budget. Everything else is returned/thrown as is.
public struct RetryPolicy {
    public var maxAttempts: Int
    /// Seconds, from the start of the first attempt, by which any retry must have started.
    public var totalBudget: Double
    public var baseDelay: Double
    public var maxDelay: Double
    /// A `Retry-After` longer than this is not waited for: the call gives up with the response.
    public var maxRetryAfter: Double
    /// Pauses the calling thread; injectable so tests record instead of sleeping.
    public var sleep: (Double) -> Void
    /// Monotonic seconds.
    public var now: () -> Double
    /// A uniform random number in [0, 1).
    public var random: () -> Double

    public init(maxAttempts: Int = 3, totalBudget: Double = 20, baseDelay: Double = 1, maxDelay: Double = 8,
                maxRetryAfter: Double = 10,
                sleep: @escaping (Double) -> Void = RetryPolicy.systemSleep,
                now: @escaping () -> Double = { Double(Clock.monotonicMillis()) / 1000 },
                random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.maxAttempts = maxAttempts
        self.totalBudget = totalBudget
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.sleep = sleep
        self.now = now
        self.random = random
    }

    public static var standard: RetryPolicy { RetryPolicy() }
    /// One attempt, no pauses.
    public static var none: RetryPolicy { RetryPolicy(maxAttempts: 1) }

    public static func systemSleep(_ seconds: Double) {
        guard seconds > 0 else { return }
        var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var left = timespec()
        while nanosleep(&ts, &left) == -1 && errno == EINTR { ts = left }
    }

    /// Whether an answer with this status is worth retrying (the issuer is overloaded or down):
    /// 429 and 5xx. The one owner of that rule; `IssuerClient` words the same statuses as "try later".
    public static func isRetryable(status: Int) -> Bool {
        status == 429 || (500...599).contains(status)
    }

    public static func isRetryable(_ error: Error) -> Bool {
        if let t = error as? TransportError { return t.isTransient }
        if case .temporary = error as? CredentialError { return true }
        return false
    }

    /// Parses `Retry-After` as delta-seconds (HTTP dates are treated as absent).
    public static func retryAfterSeconds(_ value: String?) -> Double? {
        guard let v = value?.trimmingSpaces(), !v.isEmpty, v.utf8.count <= 10,
              v.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(v) else { return nil }
        return Double(n)
    }

    /// The pause before retry number `retry` (1-based): exponential, with jitter in [50 %, 100 %].
    func backoff(retry: Int) -> Double {
        let exp = min(maxDelay, baseDelay * Double(1 << min(retry - 1, 20)))
        return exp * (0.5 + 0.5 * random())
    }

    /// Runs `attempt` until it succeeds, fails permanently, or the policy is exhausted. `attempt`
    /// receives the seconds left in the budget (nil on the first attempt) to cap its own timeout.
    /// `isFinal` marks responses that must not be retried whatever their status (e.g. a 5xx
    /// carrying `refresh_token_reused`).
    public func run<Answer: RetryableAnswer & ~Copyable>(isFinal: (borrowing Answer) -> Bool = { _ in false },
                                                         _ attempt: (_ remaining: Double?) throws -> Answer) throws -> Answer {
        let start = now()
        var n = 1
        var remaining: Double? = nil
        while true {
            let pause: Double
            do {
                let response = try attempt(remaining)
                guard Self.isRetryable(status: response.status), n < maxAttempts, !isFinal(response) else { return response }
                if let ra = Self.retryAfterSeconds(response.header("retry-after")),
                   response.status == 429 || response.status == 503 {
                    guard ra <= maxRetryAfter else { return response }
                    pause = max(ra, 0)
                } else {
                    pause = backoff(retry: n)
                }
                let left = totalBudget - (now() - start) - pause
                guard left >= 1 else { return response }
                remaining = left
            } catch {
                guard Self.isRetryable(error), n < maxAttempts else { throw error }
                pause = backoff(retry: n)
                let left = totalBudget - (now() - start) - pause
                guard left >= 1 else { throw error }
                remaining = left
            }
            sleep(pause)
            n += 1
        }
    }
}
