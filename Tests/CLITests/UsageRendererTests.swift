import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import CLI
@testable import OAuth
@testable import UsageBackend
@testable import CredentialCore

/// `usage` output: exact plain lines, the terminal's bars and colour, the style rules, JSON.
@Suite struct UsageRendererTests {
    static let now: Int64 = 1_800_000_000 // Fri 15 Jan 2027 08:00:00 UTC

    static func utc(_ seconds: Int64) -> tm {
        var t = time_t(seconds)
        var out = tm()
        gmtime_r(&t, &out)
        return out
    }

    static let report = UsageReport(
        plan: "plus",
        rateLimit: UsageLimit(allowed: true, limitReached: false, windows: [
            UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 42, resetsAt: now + 7380),
            UsageWindow(role: .secondary, windowSeconds: 604800, usedPercent: 12.5, resetsAt: now + 367200),
        ]),
        credits: UsageCredits(hasCredits: true, unlimited: false, balance: "12.50"),
        additional: [NamedUsageLimit(name: "GPT-5-Codex-Mini", meteredFeature: "codex_mini", limit: UsageLimit(
            allowed: false, limitReached: true,
            windows: [UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 100, resetsAt: now + 3600)]))])

    func renderer(_ style: UsageRenderer.Style) -> UsageRenderer {
        UsageRenderer(style: style, now: Self.now, localTime: Self.utc)
    }

    /// `usage --all`: a heading per profile, the blocks a blank line apart, a failure in place.
    @Test func blocksPerProfile() {
        let empty = UsageReport(plan: nil, rateLimit: nil, credits: nil, additional: [])
        let entries: [(String, Result<(UsageReport, String?), UsageRenderer.Failure>)] = [
            ("alpha", .success((empty, "plus"))),
            ("beta", .failure(.init(message: "not signed in\u{1b}[2J", exit: 3))),
        ]
        // Issue 29: a profile's heading says "Profile" and its lines are indented under it.
        #expect(renderer(.plain).blocks(entries, storesUnreadable: false) == "Profile alpha\n  Plan: plus\n  no limits reported\n\nProfile beta\n  error (exit 3): not signed in[2J\n")
        #expect(renderer(.terminal(unicode: true)).blocks(entries, storesUnreadable: false).hasPrefix("\u{1b}[1mProfile alpha\u{1b}[0m\n  \u{1b}[1mPlan:\u{1b}[0m plus\n"))
        #expect(renderer(.terminal(unicode: true)).blocks(entries, storesUnreadable: false).hasSuffix("\n\u{1b}[1mProfile beta\u{1b}[0m\n  \u{1b}[1;31merror\u{1b}[0m (exit 3): not signed in[2J\n"))
        #expect(renderer(.plain).blocks([], storesUnreadable: false) == "No profiles signed in.\n")
        #expect(renderer(.plain).blocks([], storesUnreadable: true) == "")
    }

    @Test func plainLines() {
        #expect(renderer(.plain).text(Self.report, plan: "plus") == """
        Plan: plus
        5 h       42 % used   resets 10:03 (in 2 h 3 min)
        7 d     12.5 % used   resets Tue 19 Jan 14:00 (in 4 d 6 h)
        Credits: 12.50
        GPT-5-Codex-Mini
          5 h    100 % used   resets 09:00 (in 1 h 0 min)
          limit reached: requests are refused until it resets

        """)
    }

    @Test func terminalLinesAreThePlainOnesWithBarsAndColour() {
        let text = renderer(.terminal(unicode: true)).text(Self.report, plan: "plus")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "\u{1b}[1mPlan:\u{1b}[0m plus")
        // 42 % of 20 cells: 8 full (green), 12 empty (dim).
        #expect(lines[1] == "5 h     \u{1b}[32m" + String(repeating: "█", count: 8) + "\u{1b}[0m\u{1b}[2m" + String(repeating: "░", count: 12)
                + "\u{1b}[0m    42 % used   resets 10:03 (in 2 h 3 min)")
        // 100 %: all red, no empty part.
        #expect(lines[5] == "  5 h   \u{1b}[31m" + String(repeating: "█", count: 20) + "\u{1b}[0m   100 % used   resets 09:00 (in 1 h 0 min)")
        #expect(lines[6] == "  \u{1b}[1;31mlimit reached\u{1b}[0m: requests are refused until it resets")
        // Without the escapes and the bar the lines are the plain ones.
        #expect(Self.strip(text) == renderer(.plain).text(Self.report, plan: "plus"))
        #expect(Self.strip(renderer(.terminal(unicode: false)).text(Self.report, plan: "plus")) == renderer(.plain).text(Self.report, plan: "plus"))
        let ascii = renderer(.terminal(unicode: false)).text(Self.report, plan: "plus")
        #expect(ascii.contains("\u{1b}[33m") == false)
        #expect(ascii.contains(String(repeating: "#", count: 8) + "\u{1b}[0m\u{1b}[2m" + String(repeating: "-", count: 12)))
        #expect(!ascii.unicodeScalars.contains { $0.value > 0x7E && $0.value != 0x1b })
    }

    /// Removes SGR sequences, then the 20-cell bar and the two spaces after it.
    static func strip(_ s: String) -> String {
        var plain = ""
        var it = s.unicodeScalars.makeIterator()
        while let c = it.next() {
            if c == "\u{1b}" { while let d = it.next(), d != "m" {}; continue }
            plain.unicodeScalars.append(c)
        }
        let glyphs: Set<Character> = ["█", "░", "#", "-"]
        return plain.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            let chars = Array(line)
            let width = UsageRenderer.barWidth
            for i in chars.indices where i + width + 2 <= chars.count {
                if chars[i..<(i + width)].allSatisfy(glyphs.contains) && chars[(i + width)..<(i + width + 2)].allSatisfy({ $0 == " " }) {
                    return String(chars[..<i] + chars[(i + width + 2)...])
                }
            }
            return String(line)
        }.joined(separator: "\n")
    }

    @Test func unknownValuesAndEmptyAnswers() {
        let r = UsageReport(rateLimit: UsageLimit(windows: [UsageWindow(role: .primary), UsageWindow(role: .secondary, usedPercent: 7)]),
                            credits: UsageCredits())
        #expect(renderer(.plain).text(r, plan: nil) == """
        Plan: unknown
        primary    unknown      reset time unknown
        secondary     7 % used   reset time unknown
        Credits: unknown

        """)
        #expect(renderer(.plain).text(UsageReport(), plan: "pro") == "Plan: pro\nno limits reported\n")
        // An additional limit without windows is not a window.
        let named = UsageReport(additional: [NamedUsageLimit(name: "x", limit: UsageLimit())])
        #expect(renderer(.plain).text(named, plan: "pro") == "Plan: pro\nno limits reported\n")
        // A reset already past says so.
        let past = UsageReport(rateLimit: UsageLimit(windows: [UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 0, resetsAt: Self.now - 5)]))
        #expect(renderer(.plain).text(past, plan: "pro") == "Plan: pro\n5 h        0 % used   resets now\n")
    }

    @Test(arguments: [(18000, "5 h"), (604800, "7 d"), (86400, "1 d"), (3600, "1 h"), (1800, "30 min"), (90, "90 s"), (90000, "25 h")] as [(Int64, String)])
    func windowNames(_ seconds: Int64, _ name: String) {
        #expect(UsageRenderer.windowName(seconds) == name)
    }

    @Test func percentages() {
        #expect([0, 42, 12.5, 99.96, 100, 0.04, 33.333].map(UsageRenderer.percent) == ["0 %", "42 %", "12.5 %", "100 %", "100 %", "0 %", "33.3 %"])
    }

    @Test func credits() {
        #expect(UsageRenderer.describe(UsageCredits(hasCredits: true, unlimited: true, balance: "3")) == "unlimited")
        #expect(UsageRenderer.describe(UsageCredits(hasCredits: false, unlimited: false, balance: "0")) == "none")
        #expect(UsageRenderer.describe(UsageCredits(hasCredits: true, balance: "12.50")) == "12.50")
        #expect(UsageRenderer.describe(UsageCredits(hasCredits: true)) == "available")
        #expect(UsageRenderer.describe(UsageCredits()) == "unknown")
    }

    @Test(arguments: [
        (true, ["TERM": "xterm-256color", "LANG": "C.UTF-8"], UsageRenderer.Style.terminal(unicode: true)),
        (true, ["TERM": "xterm", "LANG": "en_US.UTF-8", "LC_ALL": "C"], .terminal(unicode: false)),
        (true, ["TERM": "xterm", "LC_CTYPE": "de_DE.utf8"], .terminal(unicode: true)),
        (true, ["TERM": "xterm", "NO_COLOR": ""], .terminal(unicode: false)),
        (true, ["TERM": "xterm", "NO_COLOR": "1", "LANG": "C.UTF-8"], .plain),
        (true, ["TERM": "dumb", "LANG": "C.UTF-8"], .plain),
        (true, ["LANG": "C.UTF-8"], .plain),
        (false, ["TERM": "xterm", "LANG": "C.UTF-8"], .plain),
    ] as [(Bool, [String: String], UsageRenderer.Style)])
    func style(_ tty: Bool, _ env: [String: String], _ expected: UsageRenderer.Style) throws {
        let s = try Settings(environment: env)
        #expect(UsageRenderer.style(stdoutIsTerminal: tty, noColor: s.noColor, term: s.term, locale: s.locale) == expected)
    }

    @Test func json() {
        #expect(UsageRenderer.json(Self.report, plan: "plus") == """
        {"plan":"plus","allowed":true,"limit_reached":false,"windows":[\
        {"name":"primary","label":"5h","window_seconds":18000,"used_percent":42,"resets_at":"2027-01-15T10:03:00Z"},\
        {"name":"secondary","label":"7d","window_seconds":604800,"used_percent":12.5,"resets_at":"2027-01-19T14:00:00Z"}],\
        "credits":{"has_credits":true,"unlimited":false,"balance":"12.50"},\
        "additional_limits":[{"name":"GPT-5-Codex-Mini","metered_feature":"codex_mini","allowed":false,"limit_reached":true,\
        "windows":[{"name":"primary","label":"5h","window_seconds":18000,"used_percent":100,"resets_at":"2027-01-15T09:00:00Z"}]}]}

        """)
        #expect(UsageRenderer.json(UsageReport(rateLimit: UsageLimit(windows: [UsageWindow(role: .secondary)])), plan: nil) == """
        {"plan":null,"allowed":null,"limit_reached":null,"windows":[{"name":"secondary","label":"secondary","window_seconds":null,"used_percent":null,"resets_at":null}],"credits":null,"additional_limits":[]}

        """)
    }
}
