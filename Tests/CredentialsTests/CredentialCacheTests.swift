import Foundation
import Synchronization
import Testing
@testable import Credentials
@testable import AccessCache
@testable import CredentialCore
import Secrets

/// The access cache as the one owner uses it: a lookup tries the identity remembered for the
/// file store first (ARCHITECTURE.md, "The access cache"), and a stale one can only miss.
@Suite struct CredentialCacheTests {
    let profile = try! Profile("work")
    let run = UUID().uuidString.lowercased()
    final class Calls: Sendable { let n = Mutex(0) }

    func id(_ name: String) -> StoreIdentity { .file(path: "/nonexistent/ccred-credcache-\(run)/\(name)/work.age") }
    func bus(_ name: String) -> StoreIdentity { .secretService(busAddress: "unix:path=/nonexistent/ccred-credcache-\(run)/\(name)") }

    static func entry(_ tag: String) -> AccessCacheEntry {
        AccessCacheEntry(accessToken: SecretToken(copying: "eyJhbGciOiJub25lIn0.access-\(tag).sig"), accountId: "acct-\(tag)",
                         expiresAt: Clock.now() + 7200, lastRefresh: Clock.now())
    }

    func keyring() -> KeyringCache { KeyringCache(settings: AccessCacheSettings(enabled: true, ttl: 300)) }

    /// The broker's hot path: a hit through the remembered identity resolves nothing.
    @Test func aHitThroughTheRememberedIdentityResolvesNothing() throws {
        let k = keyring()
        defer { k.revoke(id("a"), profile) }
        let version = Array("2049:12:1511:1800000000.5".utf8)
        k.fill(Self.entry("a"), id("a"), profile, storeVersion: version)
        let resolved = Calls()
        let cache = CredentialCache(keyring: k, identity: { _, _ in resolved.n.withLock { $0 += 1 }; return id("a") },
                                    storeCheck: { _, _ in version }, rememberedIdentity: { _, _ in id("a") })
        for _ in 0..<3 { #expect(cache.entry(.file, profile)?.accountId == "acct-a") }
        #expect(resolved.n.withLock { $0 } == 0)
    }

    /// The spelled path now names another file (a symlink swapped): the remembered identity's
    /// entry is another file's version, so the lookup resolves again and answers for the file
    /// the path names now.
    @Test func aStaleRememberedIdentityMissesAndTheCurrentOneAnswers() throws {
        let k = keyring()
        defer { k.revoke(id("a"), profile); k.revoke(id("b"), profile) }
        let versionA = Array("2049:12:1511:1800000000.5".utf8), versionB = Array("2049:99:1600:1800000100.0".utf8)
        k.fill(Self.entry("a"), id("a"), profile, storeVersion: versionA)
        k.fill(Self.entry("b"), id("b"), profile, storeVersion: versionB)
        let resolved = Calls()
        let cache = CredentialCache(keyring: k, identity: { _, _ in resolved.n.withLock { $0 += 1 }; return id("b") },
                                    storeCheck: { _, _ in versionB }, rememberedIdentity: { _, _ in id("a") })
        #expect(cache.entry(.file, profile)?.accountId == "acct-b")
        #expect(resolved.n.withLock { $0 } == 1)
        // No entry for the file the path names now: a miss, not the remembered one's.
        k.revoke(id("b"), profile)
        #expect(cache.entry(.file, profile) == nil)
    }

    /// A store whose entries are bound to no version (the Secret Service) never answers through a
    /// remembered identity: nothing there could tell it stale.
    @Test func anUnversionedStoreNeverUsesARememberedIdentity() throws {
        let k = keyring()
        defer { k.revoke(bus("old"), profile); k.revoke(bus("new"), profile) }
        k.fill(Self.entry("old"), bus("old"), profile)
        let cache = CredentialCache(keyring: k, identity: { _, _ in bus("new") },
                                    storeCheck: { _, _ in [] }, rememberedIdentity: { _, _ in bus("old") })
        #expect(cache.entry(.secretService, profile) == nil)
        k.fill(Self.entry("new"), bus("new"), profile)
        #expect(cache.entry(.secretService, profile)?.accountId == "acct-new")
    }
}
