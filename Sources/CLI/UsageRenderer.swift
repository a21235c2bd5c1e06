import CredentialCore
import SystemRuntime
import OAuth
import UsageBackend
#if canImport(Glibc)
import Glibc
#endif

/// How `usage` shows a `UsageReport`: lines with bars and colour on a terminal, the same lines
/// without them otherwise (a pipe, `NO_COLOR`, `TERM=dumb`), or the normalised JSON object.
/// Every string in a report is sanitised by its parser; the renderer adds only its own text.
struct UsageRenderer {
    enum Style: Equatable {
        /// Colour and a bar; `unicode` picks block glyphs over ASCII.
        case terminal(unicode: Bool)
        case plain
    }

    var style: Style
    var now: Int64
    /// Broken-down local time of a Unix time (`localtime_r`; tests pass UTC).
    var localTime: (Int64) -> tm = UsageRenderer.systemLocalTime

    static let barWidth = 20

    /// A terminal gets bars and colour unless `NO_COLOR` is set (to anything but empty) or `TERM`
    /// is `dumb` or unset; block glyphs only under a UTF-8 locale (`Settings.locale`).
    static func style(stdoutIsTerminal: Bool, noColor: Bool, term: String?, locale: String?) -> Style {
        guard stdoutIsTerminal, !noColor, let term, !term.isEmpty, term != "dumb" else { return .plain }
        let l = (locale ?? "").lowercased()
        return .terminal(unicode: l.contains("utf-8") || l.contains("utf8"))
    }

    static func systemLocalTime(_ seconds: Int64) -> tm {
        tzset()
        var t = time_t(seconds)
        var out = tm()
        localtime_r(&t, &out)
        return out
    }

    // MARK: text

    func text(_ report: UsageReport, plan: String?) -> String {
        let shown = report.additional.filter { !$0.limit.windows.isEmpty || $0.limit.isReached }
        // One column for the window names, so the bars and percents line up.
        let labels = (report.rateLimit?.windows ?? []).map { Self.label($0).count }
            + shown.flatMap { $0.limit.windows.map { Self.label($0).count + Self.indent.count } }
        let column = max(8, (labels.max() ?? 0) + 2)
        var lines = [bold("Plan:") + " " + (plan ?? "unknown")]
        if let limit = report.rateLimit { lines += limitLines(limit, indent: "", column: column) }
        if let credits = report.credits { lines.append(bold("Credits:") + " " + Self.describe(credits)) }
        for extra in shown {
            lines.append(bold(extra.name))
            lines += limitLines(extra.limit, indent: Self.indent, column: column)
        }
        if !report.hasWindows { lines.append("no limits reported") }
        return lines.joined(separator: "\n") + "\n"
    }

    static let indent = "  "

    /// A profile that could not be asked: its one-line error and the exit code `usage` would give.
    struct Failure: Error {
        var message: String
        var exit: Int32
    }

    /// `usage --all`: one block per profile, headed `Profile NAME` with its lines indented under
    /// it, so a profile's heading never looks like an extra limit's name (which stands unindented
    /// in `usage`, indented once here); blocks apart by a blank line; a failed profile shows its
    /// error and exit code in its block. Nothing found: "No profiles signed in." — unless a store
    /// could not be read (the reason is on stderr).
    func blocks(_ entries: [(String, Result<(UsageReport, String?), Failure>)], storesUnreadable: Bool) -> String {
        if entries.isEmpty { return storesUnreadable ? "" : "No profiles signed in.\n" }
        return entries.map { name, answer in
            let head = bold("Profile " + name) + "\n"
            let body: String
            switch answer {
            case .success(let (report, plan)): body = text(report, plan: plan)
            case .failure(let f): body = colour("1;31", "error") + " (exit \(f.exit)): " + Sanitize.line(f.message) + "\n"
            }
            return head + body.split(separator: "\n").map { Self.indent + $0 + "\n" }.joined()
        }.joined(separator: "\n")
    }

    func limitLines(_ limit: UsageLimit, indent: String, column: Int) -> [String] {
        var lines = limit.windows.map { windowLine($0, indent: indent, column: column) }
        if limit.isReached { lines.append(indent + colour("1;31", "limit reached") + ": requests are refused until it resets") }
        return lines
    }

    /// A window's length in words, or its role when the length is unknown.
    static func label(_ w: UsageWindow) -> String { w.windowSeconds.map(windowName) ?? w.role.rawValue }

    /// `5 h     ████░░░░   42 % used   resets 16:05 (in 2 h 3 min)`; the bar only on a terminal.
    func windowLine(_ w: UsageWindow, indent: String, column: Int = 8) -> String {
        let label = Self.label(w)
        var line = indent + label + String(repeating: " ", count: max(1, column - indent.count - label.count))
        if case .terminal = style { line += bar(w.usedPercent) + "  " }
        if let p = w.usedPercent {
            let text = Self.percent(p)
            line += String(repeating: " ", count: max(0, 6 - text.count)) + text + " used"
        } else {
            line += "unknown   "
        }
        line += "   "
        if let at = w.resetsAt {
            line += at <= now ? "resets now" : "resets \(clockTime(at)) (in \(TimeSpan.describe(at - now)))"
        } else {
            line += "reset time unknown"
        }
        return line
    }

    func bar(_ percent: Double?) -> String {
        guard case .terminal(let unicode) = style else { return "" }
        guard let percent else { return String(repeating: " ", count: Self.barWidth) }
        let filled = min(Self.barWidth, max(0, Int((percent / 100 * Double(Self.barWidth)).rounded())))
        let (full, empty) = unicode ? ("█", "░") : ("#", "-")
        let code = percent >= 90 ? "31" : percent >= 70 ? "33" : "32"
        return colour(code, String(repeating: full, count: filled)) + colour("2", String(repeating: empty, count: Self.barWidth - filled))
    }

    func bold(_ s: String) -> String { colour("1", s) }

    func colour(_ sgr: String, _ s: String) -> String {
        guard case .terminal = style, !s.isEmpty else { return s }
        return "\u{1b}[\(sgr)m\(s)\u{1b}[0m"
    }

    /// `16:05` on the same local day, else `Sat 14 Mar 16:05`.
    func clockTime(_ seconds: Int64) -> String {
        let t = localTime(seconds), today = localTime(now)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let hm = two(t.tm_hour) + ":" + two(t.tm_min)
        if t.tm_year == today.tm_year && t.tm_yday == today.tm_yday { return hm }
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return "\(days[Int(t.tm_wday) % 7]) \(t.tm_mday) \(months[Int(t.tm_mon) % 12]) \(hm)"
    }

    /// A window's length in words: `5 h`, `7 d`, `30 min`, `90 s`.
    static func windowName(_ seconds: Int64) -> String {
        if seconds % 86400 == 0 { return "\(seconds / 86400) d" }
        if seconds % 3600 == 0 { return "\(seconds / 3600) h" }
        if seconds % 60 == 0 { return "\(seconds / 60) min" }
        return "\(seconds) s"
    }

    /// `42 %`, `42.5 %` (one decimal at most).
    static func percent(_ p: Double) -> String {
        let tenths = Int((p * 10).rounded())
        return (tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)") + " %"
    }

    /// `unlimited`, `none`, the balance as the backend wrote it, `available` or `unknown`.
    static func describe(_ c: UsageCredits) -> String {
        if c.unlimited == true { return "unlimited" }
        if c.hasCredits == false { return "none" }
        if let b = c.balance { return b }
        return c.hasCredits == true ? "available" : "unknown"
    }

    // MARK: JSON

    /// `{"plan","allowed","limit_reached","windows":[…],"credits","additional_limits":[…]}`; a value
    /// that was absent or made no sense is null. Never a token.
    static func json(_ report: UsageReport, plan: String?) -> String {
        JSON.serialize(jsonValue(report, plan: plan)) + "\n"
    }

    static func jsonValue(_ report: UsageReport, plan: String?) -> JSONValue {
        let limit = report.rateLimit ?? UsageLimit()
        let members: [(String, JSONValue)] = [
            ("plan", plan.map(JSONValue.string) ?? .null),
            ("allowed", limit.allowed.map(JSONValue.bool) ?? .null),
            ("limit_reached", limit.limitReached.map(JSONValue.bool) ?? .null),
            ("windows", .array(limit.windows.map(json))),
            ("credits", report.credits.map { c in
                .object([("has_credits", c.hasCredits.map(JSONValue.bool) ?? .null),
                         ("unlimited", c.unlimited.map(JSONValue.bool) ?? .null),
                         ("balance", c.balance.map(JSONValue.string) ?? .null)])
            } ?? .null),
            ("additional_limits", .array(report.additional.map { a in
                .object([("name", .string(a.name)),
                         ("metered_feature", a.meteredFeature.map(JSONValue.string) ?? .null),
                         ("allowed", a.limit.allowed.map(JSONValue.bool) ?? .null),
                         ("limit_reached", a.limit.limitReached.map(JSONValue.bool) ?? .null),
                         ("windows", .array(a.limit.windows.map(json)))])
            })),
        ]
        return .object(members)
    }

    /// `label` is the text view's name without its space (`5h`, `7d`, `30min`), or the role when
    /// the length is unknown: what a script prints to say what the text view says.
    static func json(_ w: UsageWindow) -> JSONValue {
        .object([("name", .string(w.role.rawValue)),
                 ("label", .string(label(w).replacingSpaces)),
                 ("window_seconds", w.windowSeconds.map { .number(Double($0)) } ?? .null),
                 ("used_percent", w.usedPercent.map(JSONValue.number) ?? .null),
                 ("resets_at", w.resetsAt.map { .string(Clock.rfc3339($0)) } ?? .null)])
    }
}

private extension String {
    var replacingSpaces: String { String(filter { $0 != " " }) }
}
