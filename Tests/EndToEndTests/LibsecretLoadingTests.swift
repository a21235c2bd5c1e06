import Foundation
import Testing
import CLI
@_spi(CredentialOwner) import Stores
import OAuth
import CredentialCore

/// libsecret (and with it glib, gobject, gio, gcrypt) is dlopen()ed on the first Secret Service
/// call: linking it would cost every start ~1.6 ms and ~4 MB, a file-store `get` included.
@Suite("libsecret is loaded lazily")
struct LibsecretLoadingTests {
    static let glibStack = ["libsecret", "libglib", "libgobject", "libgio", "libgcrypt"]

    static func credential() -> (json: String, access: String) {
        let access = makeJWT(exp: Clock.now() + 3600, accountId: "acct-lazy")
        return (#"{"access_token":"\#(access)","refresh_token":"rt-lazy","id_token":"\#(access)"}"#, access)
    }

    @Test func binaryDoesNotLinkLibsecret() throws {
        let r = Harness.run("/usr/bin/ldd", [Harness.binary], env: ["PATH": "/usr/bin:/bin"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("libsodium"), "ldd output is real: \(r.stdout)")
        for lib in Self.glibStack { #expect(!r.stdout.contains(lib), "\(lib) is linked: \(r.stdout)") }
    }

    @Test("a file-store get loads no libsecret or glib, with --store file and under auto")
    func fileStoreGetDoesNotLoadLibsecret() throws {
        let sb = Sandbox(bus: .inherit, store: "file")
        let cred = Self.credential()
        let stored = sb.run(["store"], stdin: cred.json)
        try #require(stored.status == 0, "\(stored.stderr)")
        for store in ["file", "auto"] {
            let r = sb.run(["--store", store, "get"], env: ["LD_DEBUG": "libs"])
            #expect(r.status == 0 && r.stdout == cred.access + "\n", "\(store): \(r.stderr)")
            #expect(r.stderr.contains("libsodium"), "LD_DEBUG output is real")
            for lib in Self.glibStack { #expect(!r.stderr.contains(lib), "\(store): \(lib) was loaded") }
        }
    }

    @Test("a Secret Service get does load libsecret, and works",
          .enabled(if: hasSessionBus, "no D-Bus session bus: run under scripts/with-keyring (make test does)"))
    func secretServiceGetLoadsLibsecret() throws {
        let sb = Sandbox(bus: .inherit, store: "secret-service")
        let name = uniqueProfile("lazy")
        defer { _ = sb.run(["--profile", name, "erase", "--no-revoke"]) }
        let cred = Self.credential()
        let stored = sb.run(["--profile", name, "store"], stdin: cred.json)
        try #require(stored.status == 0, "\(stored.stderr)")
        // --no-cache: a warm access cache answers without the Secret Service (and without libsecret).
        let r = sb.run(["--profile", name, "--no-cache", "get"], env: ["LD_DEBUG": "libs"])
        #expect(r.status == 0 && r.stdout == cred.access + "\n", "\(r.stderr)")
        #expect(r.stderr.contains("libsecret-1.so.0"), "libsecret was not loaded")
    }
}
