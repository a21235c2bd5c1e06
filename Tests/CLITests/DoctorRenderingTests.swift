import Foundation
import Testing
@testable import CLI
@testable import CredentialCore
import SystemRuntime

/// `doctor`'s two outputs (man page VERBS, doctor): one text line per check, status and name in
/// aligned columns, `; next:` and the advice only for warn and fail; `--json` the same checks in
/// the same order, advice null for ok; control bytes never reach either.
struct DoctorRenderingTests {
    static let checks: [DoctorCheck] = [
        .ok("session-bus", "from DBUS_SESSION_BUS_ADDRESS (unix:path=/tmp/b)"),
        .warn("secret-service", "the default keyring is locked", "unlock it"),
        .fail("file-store", "the key /k\u{1B}[31m is mode 0644", "chmod 600 /k"),
        .ok("sinks", "none"),
    ]

    @Test func textIsOneAlignedLinePerCheckWithAdviceOnlyForWarnAndFail() {
        let text = Runner.doctorText(Self.checks)
        #expect(text == """
            ok    session-bus     from DBUS_SESSION_BUS_ADDRESS (unix:path=/tmp/b)
            warn  secret-service  the default keyring is locked; next: unlock it
            fail  file-store      the key /k[31m is mode 0644; next: chmod 600 /k
            ok    sinks           none

            """)
    }

    @Test func jsonIsTheSameChecksInTheSameOrder() throws {
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(Runner.doctorJSON(Self.checks).utf8)) as? [[String: Any]])
        #expect(parsed.map { $0["check"] as? String } == Self.checks.map(\.name))
        #expect(parsed.map { $0["status"] as? String } == ["ok", "warn", "fail", "ok"])
        #expect(parsed[2]["detail"] as? String == "the key /k[31m is mode 0644", "control bytes removed as in the text")
        #expect(parsed[1]["advice"] as? String == "unlock it" && parsed[0]["advice"] is NSNull)
        // Line for line: each text line is made of the JSON element at the same index.
        let lines = Runner.doctorText(Self.checks).split(separator: "\n").map(String.init)
        for (line, element) in zip(lines, parsed) {
            let advice = (element["advice"] as? String).map { "; next: " + $0 } ?? ""
            #expect(line.hasSuffix("  " + (element["detail"] as! String) + advice) && line.hasPrefix(element["status"] as! String))
        }
    }

    @Test func exitIsOneExactlyWhenACheckFails() throws {
        let runner = Runner(console: SilentConsole(), services: Services(paths: Paths(), makeSelector: { _ in fatalError() },
                                                                         makeRefresher: { _ in fatalError() }, revoke: { _, _ in nil }))
        #expect(try runner.report(Self.checks, json: false) == .exit(1))
        #expect(try runner.report(Self.checks.filter { $0.status != .fail }, json: true) == .exit(0))
    }
}
