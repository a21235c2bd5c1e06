import CredentialCore
import Secrets

/// The answer of `GET $CHATGPT_CREDENTIAL_BACKEND/wham/usage`, normalised: the one reader of that
/// wire format (as the Codex CLI reads it; not a published API).
///
/// Every field is optional and unknown fields are ignored. A value of the wrong type or out of
/// its plausible range (a negative or > 100 % share, a window of 0 s or over a year, a reset in
/// the past or more than a year ahead) is nil, "unknown", rather than an error: one odd field
/// must not hide the rest. Every string is sanitised (`Sanitize.line`, bounded) here, so nothing
/// built from a report can carry control bytes to a terminal.
public struct UsageReport: Equatable, Sendable {
    /// `plan_type`.
    public var plan: String?
    /// `rate_limit`: the account's own limit (the 5 h and 7 d windows, usually).
    public var rateLimit: UsageLimit?
    public var credits: UsageCredits?
    /// `additional_rate_limits[]`, then `code_review_rate_limit`, at most `maxAdditional`.
    public var additional: [NamedUsageLimit]

    public init(plan: String? = nil, rateLimit: UsageLimit? = nil, credits: UsageCredits? = nil, additional: [NamedUsageLimit] = []) {
        self.plan = plan; self.rateLimit = rateLimit; self.credits = credits; self.additional = additional
    }

    /// An answer larger than this is refused (the real one is a few hundred bytes).
    public static let maxBytes = 1 << 20
    public static let maxAdditional = 16
    /// The longest window (and the furthest reset) taken at face value: 366 days.
    public static let maxWindowSeconds: Int64 = 366 * 86400
    /// How long ago a reset may lie (clock skew, a stale answer) before it is unknown.
    public static let maxResetAge: Int64 = 86400
    static let maxNameLength = 64

    /// True when any limit reports at least one window.
    public var hasWindows: Bool {
        !(rateLimit?.windows.isEmpty ?? true) || additional.contains { !$0.limit.windows.isEmpty }
    }

    /// Parses a response body; nil when it is not a JSON object (or larger than `maxBytes`).
    /// `now` (Unix seconds) turns `reset_after_seconds` into a time.
    public static func parse<C: Collection>(_ body: C, now: Int64) -> UsageReport? where C.Element == UInt8 {
        guard body.count <= maxBytes, let json = try? JSON.parse(body, maxBytes: maxBytes), json.isObject else { return nil }
        return UsageReport(json: json, now: now)
    }

    /// The same, for a response body held in guarded memory (it carries account details).
    public static func parse(_ body: borrowing SecretBytes, now: Int64) -> UsageReport? {
        guard body.count <= maxBytes, let json = try? JSON.parse(body, maxBytes: maxBytes), json.isObject else { return nil }
        return UsageReport(json: json, now: now)
    }

    public init(json: JSONValue, now: Int64) {
        plan = Self.text(json["plan_type"], limit: 40)
        rateLimit = json["rate_limit"].flatMap { UsageLimit(json: $0, now: now) }
        credits = json["credits"].flatMap(UsageCredits.init(json:))
        var extra: [NamedUsageLimit] = []
        if case .array(let items)? = json["additional_rate_limits"] {
            for item in items where extra.count < Self.maxAdditional {
                guard item.isObject else { continue }
                let feature = Self.text(item["metered_feature"], limit: Self.maxNameLength)
                let name = Self.text(item["limit_name"], limit: Self.maxNameLength) ?? feature ?? "additional limit"
                let limit = item["rate_limit"].flatMap { UsageLimit(json: $0, now: now) } ?? UsageLimit()
                extra.append(NamedUsageLimit(name: name, meteredFeature: feature, limit: limit))
            }
        }
        // Seen in third-party clients: the code review limit as a sibling of rate_limit.
        if extra.count < Self.maxAdditional, let review = json["code_review_rate_limit"].flatMap({ UsageLimit(json: $0, now: now) }) {
            extra.append(NamedUsageLimit(name: "code review", meteredFeature: nil, limit: review))
        }
        additional = extra
    }

    // MARK: strict readers: the wrong type is nil

    /// A vendor string, sanitised and bounded; nil when absent, not a string, or empty once cleaned.
    static func text(_ v: JSONValue?, limit: Int) -> String? {
        guard case .string(let s)? = v else { return nil }
        let clean = Sanitize.line(s, limit: limit).trimmingSpaces()
        return clean.isEmpty ? nil : clean
    }

    static func flag(_ v: JSONValue?) -> Bool? {
        if case .bool(let b)? = v { return b }
        return nil
    }

    /// A number within `range` (whole seconds, rounded down); nil otherwise.
    static func seconds(_ v: JSONValue?, _ range: ClosedRange<Int64>) -> Int64? {
        guard case .number(let d)? = v, d.isFinite, d >= Double(range.lowerBound), d <= Double(range.upperBound) else { return nil }
        return Int64(d.rounded(.down))
    }
}

/// One limit: whether requests are allowed, and its windows (primary first).
public struct UsageLimit: Equatable, Sendable {
    public var allowed: Bool?
    public var limitReached: Bool?
    public var windows: [UsageWindow]

    public init(allowed: Bool? = nil, limitReached: Bool? = nil, windows: [UsageWindow] = []) {
        self.allowed = allowed; self.limitReached = limitReached; self.windows = windows
    }

    /// Nil when `json` is not an object.
    init?(json: JSONValue, now: Int64) {
        guard json.isObject else { return nil }
        allowed = UsageReport.flag(json["allowed"])
        limitReached = UsageReport.flag(json["limit_reached"])
        windows = []
        for role in UsageWindow.Role.allCases {
            // Absent or null: no such window. Anything else is a window, perhaps an unknown one.
            guard let w = json[role.wireKey], w != .null else { continue }
            windows.append(UsageWindow(role: role, json: w, now: now))
        }
    }

    /// True when the backend says this limit is exhausted.
    public var isReached: Bool { limitReached == true || allowed == false }
}

/// One rate-limit window. Each value is nil when the answer lacked it or it made no sense.
public struct UsageWindow: Equatable, Sendable {
    public enum Role: String, CaseIterable, Sendable {
        case primary, secondary
        var wireKey: String { rawValue + "_window" }
    }

    public var role: Role
    /// `limit_window_seconds`: 1 s … 366 d.
    public var windowSeconds: Int64?
    /// `used_percent`: 0 … 100.
    public var usedPercent: Double?
    /// When the window resets (Unix seconds): `now + reset_after_seconds` when that is plausible
    /// (a relative time is immune to a wrong local clock), else `reset_at`; at most a day ago and
    /// a year ahead.
    public var resetsAt: Int64?

    public init(role: Role, windowSeconds: Int64? = nil, usedPercent: Double? = nil, resetsAt: Int64? = nil) {
        self.role = role; self.windowSeconds = windowSeconds; self.usedPercent = usedPercent; self.resetsAt = resetsAt
    }

    init(role: Role, json: JSONValue, now: Int64) {
        self.role = role
        let year = UsageReport.maxWindowSeconds
        windowSeconds = UsageReport.seconds(json["limit_window_seconds"], 1...year)
        if case .number(let p)? = json["used_percent"], p.isFinite, p >= 0, p <= 100 { usedPercent = p }
        // A reset further away than the window is long cannot be this window's.
        let after = UsageReport.seconds(json["reset_after_seconds"], 0...(windowSeconds ?? year))
        let at = UsageReport.seconds(json["reset_at"], (now - UsageReport.maxResetAge)...(now + year))
        resetsAt = after.map { now + $0 } ?? at
    }

    /// True when nothing usable was reported for this window.
    public var isUnknown: Bool { windowSeconds == nil && usedPercent == nil && resetsAt == nil }
}

/// `credits`: purchased credits, when the plan has them.
public struct UsageCredits: Equatable, Sendable {
    public var hasCredits: Bool?
    public var unlimited: Bool?
    /// `balance`, as the backend wrote it (a string; a number is accepted and written out).
    public var balance: String?

    public init(hasCredits: Bool? = nil, unlimited: Bool? = nil, balance: String? = nil) {
        self.hasCredits = hasCredits; self.unlimited = unlimited; self.balance = balance
    }

    init?(json: JSONValue) {
        guard json.isObject else { return nil }
        hasCredits = UsageReport.flag(json["has_credits"])
        unlimited = UsageReport.flag(json["unlimited"])
        if case .number(let d)? = json["balance"], d.isFinite, abs(d) < 1e15 {
            balance = JSON.serialize(.number(d))
        } else {
            balance = UsageReport.text(json["balance"], limit: 32)
        }
    }
}

/// An entry of `additional_rate_limits` (or the code review limit), under its name.
public struct NamedUsageLimit: Equatable, Sendable {
    /// `limit_name`, else `metered_feature`, else "additional limit"; sanitised.
    public var name: String
    public var meteredFeature: String?
    public var limit: UsageLimit

    public init(name: String, meteredFeature: String? = nil, limit: UsageLimit) {
        self.name = name; self.meteredFeature = meteredFeature; self.limit = limit
    }
}
