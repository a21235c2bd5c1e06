import Foundation
import Testing

/// The one owner by construction (ARCHITECTURE.md, "Rules of thumb"): the compiler refuses a file
/// that sees what the CLI sees and tries to write or delete a stored credential directly.
/// `scripts/check-owner-seal` type-checks such files against the modules of this build: a store
/// read must compile, `save`/`delete` must fail with the SPI error, and a file compiled as module
/// CLI that says `import Stores` or `@_spi(CredentialOwner) import Stores` must be refused (Stores
/// is built with `-allowable-client`, Package.swift). The script type-checks rather than running
/// `swift build` on a planted file: this test runs inside `swift test`, which holds the build
/// directory's lock, and a copy of the package would be a full build.
@Suite struct OwnerSealTests {
    @Test func theCompilerStopsACLIFileThatWritesAStore() {
        var env = ProcessInfo.processInfo.environment
        env["BUILD_DIR"] = Harness.productsDirectory
        let r = Harness.run("/bin/sh", [Harness.repoRoot + "/scripts/check-owner-seal"], env: env, timeout: 120)
        #expect(r.status == 0, "exit \(r.status): \(r.stderr)")
        #expect(r.stdout.components(separatedBy: "refused as expected").count - 1 == 5, "\(r.stdout)")
    }
}
