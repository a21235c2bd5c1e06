import Foundation
import Testing

/// The one owner by construction (ARCHITECTURE.md, "The one owner"): the compiler refuses a file
/// that sees what the CLI sees and tries to write or delete a stored credential directly.
/// `scripts/check-owner-seal` type-checks such files against the modules of this build: a store
/// read must compile, `save`/`delete` must fail with the SPI error.
@Suite struct OwnerSealTests {
    @Test func theCompilerStopsACLIFileThatWritesAStore() {
        var env = ProcessInfo.processInfo.environment
        env["BUILD_DIR"] = Harness.productsDirectory
        let r = Harness.run("/bin/sh", [Harness.repoRoot + "/scripts/check-owner-seal"], env: env, timeout: 120)
        #expect(r.status == 0, "exit \(r.status): \(r.stderr)")
        #expect(r.stdout.components(separatedBy: "refused as expected").count - 1 == 3, "\(r.stdout)")
    }
}
