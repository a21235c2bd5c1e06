import Foundation
import Testing
@testable import CLI
@testable import CredentialCore
import Stores
import TestSupport

/// `status --all`'s table (man page, `status --all`): a header, aligned columns within 80, `*`
/// before the default profile, and a rejected refresh token flagged even while its access token
/// still works.
struct StatusTableTests {
    static let now: Int64 = 1_800_000_000

    static func doc(email: String, plan: String = "plus", expiresIn: Int64 = 3600, rejected: String? = nil) -> TokenDocument {
        let d = TokenDocument(accessToken: "at", refreshToken: "rt", accountId: "acct", expiresAt: now + expiresIn,
                              lastRefresh: now - 60, email: email, plan: plan)
        return rejected.map { d.rejected(code: $0) } ?? d
    }

    /// `status`'s labelled lines: values in one column; a row without a label (the advice after a
    /// sink another program changed) continues the one above, with no stray colon.
    @Test func aRowWithoutALabelContinuesTheOneAbove() {
        let text = LabeledLines.render([("profile", "work"), ("sink", "codex /x (changed by another program)"), ("", "see: sink list")])
        #expect(text == "  profile:  work\n  sink:     codex /x (changed by another program)\n            see: sink list\n", "\(text)")
    }

    @Test func tableHasAHeaderMarksTheDefaultAndFlagsARejectedRefresh() throws {
        let entries = [
            StatusReport(profile: "default", store: .file, document: Self.doc(email: "a@example.com"), now: Self.now),
            StatusReport(profile: "work", store: .secretService, document: Self.doc(email: "b@example.com", rejected: "invalid_grant"), now: Self.now),
            StatusReport(profile: "gone", store: .secretService, document: Self.doc(email: "c@example.com", expiresIn: -10, rejected: "invalid_grant"), now: Self.now),
            StatusReport(profile: "shut", store: .secretService, problem: .keyringLocked("the keyring is locked")),
        ]
        let text = StatusReport.textList(entries, storesUnreadable: false, defaultProfile: "work")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        #expect(lines[0].hasPrefix("  PROFILE  EMAIL"))
        #expect(lines[0].hasSuffix("STATUS"))
        // Every column starts where its header does.
        for header in ["EMAIL", "PLAN", "STORE", "EXPIRES", "STATUS"] {
            let column = lines[0].range(of: header)!.lowerBound.utf16Offset(in: lines[0])
            for line in lines.dropFirst() {
                let at = line.index(line.startIndex, offsetBy: column)
                #expect(line[line.index(before: at)] == " " && line[at] != " ", "\(header) misaligned in: \(line)")
            }
        }
        // Sorted by profile (issue 29), not by store.
        #expect(lines[1].hasPrefix("  default ") && lines[1].hasSuffix("  ok"))
        #expect(lines[2].hasPrefix("  gone ") && lines[2].contains("expired") && lines[2].hasSuffix("  sign in again"))
        #expect(lines[3].hasPrefix("  shut ") && lines[3].hasSuffix("  locked"))
        #expect(lines[4].hasPrefix("* work ") && lines[4].hasSuffix("  sign in again"), "rejected but still usable: \(lines[4])")
        #expect(lines[4].contains("in 1 h 0 min"))
        #expect(lines.allSatisfy { $0.count <= 80 && !$0.contains("\t") })
    }

    /// Issue 29: an email or a profile name is never cut; PLAN, then STORE, then EXPIRES are left
    /// out instead, and the rows are sorted by profile.
    @Test func aLongEmailIsKeptWholeAndColumnsAreDroppedInstead() {
        let long = String(repeating: "x", count: 25) + "@example.com" // all columns: 99 wide
        let entries = [
            StatusReport(profile: "work", store: .secretService, document: Self.doc(email: long), now: Self.now),
            StatusReport(profile: "default", store: .file, document: Self.doc(email: "a@example.com", expiresIn: -10, rejected: "refresh_token_expired"), now: Self.now),
        ]
        let lines = StatusReport.textList(entries, storesUnreadable: false, defaultProfile: "default").split(separator: "\n").map(String.init)
        #expect(lines.allSatisfy { $0.count <= 80 }, "\(lines)")
        #expect(lines[0] == "  PROFILE  EMAIL" + String(repeating: " ", count: long.count - 3) + "EXPIRES       STATUS", "\(lines[0])")
        #expect(lines[1].hasPrefix("* default ") && lines[1].hasSuffix("sign in again"), "sorted: \(lines)")
        #expect(lines[2].hasPrefix("  work ") && lines[2].contains(long) && !lines[2].contains("…"), "\(lines[2])")
        // Wide enough: every column.
        let wide = StatusReport.textList(entries, storesUnreadable: false, defaultProfile: "default", width: 120)
        #expect(wide.hasPrefix("  PROFILE  EMAIL") && wide.contains("PLAN  STORE") && wide.contains(long))
        // Narrower than the names themselves: still never cut.
        let narrow = StatusReport.textList(entries, storesUnreadable: false, defaultProfile: "default", width: 40)
        #expect(narrow.contains(long) && !narrow.contains("EXPIRES") && !narrow.contains("…"), "\(narrow)")
    }

    /// The README's example is what the renderer prints.
    static var readmeExample: String {
        StatusReport.textList([
            StatusReport(profile: "default", store: .secretService, document: doc(email: "you@example.com", expiresIn: 9 * 86400), now: now),
            StatusReport(profile: "work", store: .file, document: doc(email: "you@work.example", plan: "team", expiresIn: 42 * 60, rejected: "refresh_token_invalidated"), now: now),
        ], storesUnreadable: false, defaultProfile: "default")
    }

    @Test func readmeShowsTheTable() throws {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        let readme = try String(contentsOf: url.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("```console\n$ chatgpt-credential status --all\n" + Self.readmeExample + "```\n"), "README's status --all example drifted:\n\(Self.readmeExample)")
    }

    /// The README's `status` example is what the renderer prints (local time in CET here).
    @Test func readmeShowsStatus() throws {
        let now = Clock.parseRFC3339("2026-12-02T09:12:03Z")!
        let d = TokenDocument(accessToken: "at", refreshToken: "rt", accountId: "0b9c6f2e-5d1a-4c8e-9f3b-2a7d1e4c8b60",
                              expiresAt: now + 9 * 86400, lastRefresh: now - 86400, email: "you@example.com", plan: "plus")
        var report = StatusReport(profile: "default", store: .secretService, document: d, now: now)
        report.collection = "/org/freedesktop/secrets/collection/login"
        report.localTime = { t in Clock.rfc3339(t + 3600).prefix(16).replacingOccurrences(of: "T", with: " ") + " CET" }
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        let readme = try String(contentsOf: url.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("```console\n$ chatgpt-credential status\n" + report.text() + "```\n"), "README's status example drifted:\n\(report.text())")
    }

    @Test func nothingFound() {
        #expect(StatusReport.textList([], storesUnreadable: false, defaultProfile: "default") == "No profiles signed in.\n")
        #expect(StatusReport.textList([], storesUnreadable: true, defaultProfile: "default") == "")
    }

    @Test func jsonMarksTheDefault() {
        var e = StatusReport(profile: "work", store: .file, document: Self.doc(email: "b@example.com", rejected: "invalid_grant"), now: Self.now)
        e.isDefault = true
        let text = StatusReport.jsonList([e])
        #expect(text.contains(#""default":true"#) && text.contains(#""needs_login":true"#) && text.contains(#""signed_in":true"#))
    }
}
