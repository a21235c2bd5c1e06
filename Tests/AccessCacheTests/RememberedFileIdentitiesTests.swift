import Foundation
import Synchronization
import Testing
@testable import AccessCache

/// The file store's identities as last resolved (ARCHITECTURE.md, "The access cache"): resolved
/// again only when asked for the current one, so a broker's lookups skip the `readlink`s.
@Suite struct RememberedFileIdentitiesTests {
    final class Counter: Sendable { let n = Mutex(0) }

    @Test func aPathIsResolvedOnlyWhenItsCurrentIdentityIsAsked() throws {
        let dir = try StoreIdentityTests.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["a", "b"] { try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true) }
        try FileManager.default.createSymbolicLink(atPath: dir + "/data", withDestinationPath: dir + "/a")
        let resolved = Counter()
        let identities = RememberedFileIdentities(resolve: { path in
            resolved.n.withLock { $0 += 1 }
            return StoreIdentity.file(normalising: path)
        })
        let spelled = dir + "/data/work.age"
        #expect(identities.remembered(spelled) == nil)
        #expect(identities.current(spelled) == .file(path: dir + "/a/work.age"))
        for _ in 0..<3 { #expect(identities.remembered(spelled) == .file(path: dir + "/a/work.age")) }
        #expect(resolved.n.withLock { $0 } == 1)
        // The symlink now names another directory: what is remembered is stale until asked again.
        try FileManager.default.removeItem(atPath: dir + "/data")
        try FileManager.default.createSymbolicLink(atPath: dir + "/data", withDestinationPath: dir + "/b")
        #expect(identities.remembered(spelled) == .file(path: dir + "/a/work.age"))
        #expect(identities.current(spelled) == .file(path: dir + "/b/work.age"))
        #expect(identities.remembered(spelled) == .file(path: dir + "/b/work.age"))
        #expect(resolved.n.withLock { $0 } == 2)
        // A path that no longer resolves is forgotten.
        try FileManager.default.removeItem(atPath: dir + "/data")
        #expect(identities.current(spelled) == nil)
        #expect(identities.remembered(spelled) == nil)
    }

    @Test func atMostSixtyFourPathsAreRemembered() {
        let identities = RememberedFileIdentities(resolve: { .file(path: $0) })
        for i in 0..<RememberedFileIdentities.capacity { _ = identities.current("/n/p\(i).age") }
        #expect(identities.remembered("/n/p0.age") == .file(path: "/n/p0.age"))
        #expect(identities.remembered("/n/p63.age") == .file(path: "/n/p63.age"))
        _ = identities.current("/n/p63.age") // one already known: nothing forgotten
        #expect(identities.remembered("/n/p0.age") != nil)
        _ = identities.current("/n/p64.age")
        #expect(identities.remembered("/n/p0.age") == nil)
        #expect(identities.remembered("/n/p64.age") == .file(path: "/n/p64.age"))
    }
}
