import Foundation
import Testing
@testable import AccessCache
@testable import CredentialCore
import SystemRuntime
import TestSupport

/// The parts of the cache that need no kernel: the payload format, the settings, the descriptions.
@Suite struct CachePayloadTests {
    static let entry = AccessCacheEntry(accessToken: "eyJ.a.b", accountId: "acct-1", idToken: "eyJ.i.d",
                                        expiresAt: 1_800_000_000, lastRefresh: 1_799_000_000, storedAt: 258,
                                        email: "é@example.com", plan: "plus")

    @Test func payloadIsExactlyTheDocumentedLayout() throws {
        let bytes = try #require(CachePayload.bytes(Self.entry))
        var expected: [UInt8] = Array("CCA".utf8) + [3]
        expected += [0, 0, 0, 0, 0x6B, 0x49, 0xD2, 0x00] // expires_at 1 800 000 000
        expected += [0, 0, 0, 0, 0x6B, 0x3A, 0x8F, 0xC0] // last_refresh 1 799 000 000
        expected += [0, 0, 0, 0, 0, 0, 0x01, 0x02] // stored_at 258
        for field in ["eyJ.a.b", "acct-1", "eyJ.i.d", "é@example.com", "plus", ""] {
            let n = field.utf8.count
            expected += [UInt8(n >> 8), UInt8(n & 0xFF)] + Array(field.utf8)
        }
        #expect(bytes == expected)
        #expect(CachePayload.parse(bytes) == Self.entry)
        #expect(CachePayload.storeVersion(bytes) == [])
    }

    /// The store's version the entry was filled from is the last field, and comes back as written.
    @Test func theStoreVersionIsTheLastField() throws {
        let version = Array("2049:1234:1511:1800000000.123456789".utf8)
        guard let built = CachePayload.build(Self.entry, storeVersion: version) else { Issue.record("not built"); return }
        let bytes = built.unsafeArray()
        let plain = try #require(CachePayload.bytes(Self.entry))
        #expect(bytes == plain.dropLast(2) + [0, UInt8(version.count)] + version)
        #expect(CachePayload.parse(bytes) == Self.entry)
        #expect(CachePayload.storeVersion(bytes) == version)
        // A version-2 payload (the same fields without the store's version) is not read.
        var two = Array(plain.dropLast(2)); two[3] = 2
        #expect(CachePayload.parse(two) == nil)
    }

    @Test func emptyFieldsAndNegativeExpiryRoundTrip() throws {
        let sparse = AccessCacheEntry(accessToken: "t", accountId: "", idToken: "", expiresAt: -5, email: "", plan: "")
        #expect(CachePayload.parse(try #require(CachePayload.bytes(sparse))) == sparse)
    }

    @Test func everyTruncationAndEveryExtensionIsRefused() throws {
        let bytes = try #require(CachePayload.bytes(Self.entry))
        for n in 0..<bytes.count { #expect(CachePayload.parse(Array(bytes.prefix(n))) == nil, "prefix of \(n) bytes accepted") }
        #expect(CachePayload.parse(bytes + [0]) == nil)
    }

    @Test func wrongMagicVersionEncodingOrNoAccessTokenIsRefused() throws {
        let bytes = try #require(CachePayload.bytes(Self.entry))
        var otherVersion = bytes; otherVersion[3] = 1
        var otherMagic = bytes; otherMagic[0] = UInt8(ascii: "X")
        var badUTF8 = bytes; badUTF8[4 + 3 * 8 + 2] = 0xFF // first byte of the access token
        #expect(CachePayload.parse(otherVersion) == nil)
        #expect(CachePayload.parse(otherMagic) == nil)
        #expect(CachePayload.parse(badUTF8) == nil)
        let noToken = AccessCacheEntry(accessToken: "", accountId: "a", idToken: "", expiresAt: 1, email: "", plan: "")
        #expect(CachePayload.parse(try #require(CachePayload.bytes(noToken))) == nil)
    }

    @Test func thePayloadFitsTheUserKeyLimitOrIsRefused() {
        var e = Self.entry
        e.accessToken = ""
        e.idToken = ""
        let overhead = 4 + 3 * 8 + 6 * 2 + "acct-1".utf8.count + "é@example.com".utf8.count + "plus".utf8.count
        e.accessToken = SecretToken(copying: String(repeating: "a", count: 32767 - overhead))
        #expect(CachePayload.bytes(e)?.count == 32767)
        e.accessToken = SecretToken(copying: String(repeating: "a", count: 32767 - overhead + 1))
        #expect(CachePayload.bytes(e) == nil)
    }

    // MARK: settings

    @Test func kernelTimeoutIsTheSmallerOfTTLAndExpiryLessFiveMinutes() {
        let s = AccessCacheSettings(ttl: 300)
        let now: Int64 = 1_000_000
        #expect(s.kernelTimeout(expiresAt: now + 3600, now: now) == 300)
        #expect(s.kernelTimeout(expiresAt: now + 420, now: now) == 120)
        #expect(s.kernelTimeout(expiresAt: now + 301, now: now) == 1)
        #expect(s.kernelTimeout(expiresAt: now + 300, now: now) == 0)
        #expect(s.kernelTimeout(expiresAt: 0, now: now) == 0)
        #expect(s.kernelTimeout(expiresAt: .min, now: now) == 0)
        #expect(s.kernelTimeout(expiresAt: .max, now: now) == 300)
        #expect(s.kernelTimeout(expiresAt: .max, now: -5) == 300)
    }

    @Test func freshnessIsJudgedAgainstTheCallersMinimum() {
        let e = AccessCacheEntry(accessToken: "t", accountId: "", idToken: "", expiresAt: 10_000, email: "", plan: "")
        #expect(e.isFresh(minTTL: 300, now: 9_700))
        #expect(!e.isFresh(minTTL: 300, now: 9_701))
        #expect(!e.isFresh(minTTL: 3600, now: 9_000))
        var far = e; far.expiresAt = .min
        #expect(!far.isFresh(minTTL: 300, now: 1))
    }

    /// An entry never hides the idle rule (man page, REFRESH): one whose credential was last
    /// refreshed (or, without a known last refresh, stored) 8 days ago or more is not served.
    @Test func anEntryOfAnIdleCredentialIsNotFresh() {
        let now: Int64 = 1_800_000_000, day: Int64 = 86400
        var e = AccessCacheEntry(accessToken: "t", accountId: "", idToken: "", expiresAt: now + 5 * day,
                                 lastRefresh: now - day, email: "", plan: "")
        #expect(e.isFresh(minTTL: 300, now: now))
        e.lastRefresh = now - 8 * day + 1
        #expect(e.isFresh(minTTL: 300, now: now))
        e.lastRefresh = now - 8 * day
        #expect(!e.isFresh(minTTL: 300, now: now))
        e.lastRefresh = 0
        e.storedAt = now - 9 * day
        #expect(!e.isFresh(minTTL: 300, now: now))
        e.storedAt = now - day
        #expect(e.isFresh(minTTL: 300, now: now))
        e.storedAt = 0 // neither known: the expiry alone decides
        #expect(e.isFresh(minTTL: 300, now: now))
    }

    @Test func aVersionOnePayloadIsAMiss() {
        // What a binary before the idle rule wrote: no times of the last refresh.
        var v1: [UInt8] = Array("CCA".utf8) + [1] + [0, 0, 0, 0, 0x6B, 0x49, 0xD2, 0x00]
        for field in ["eyJ.a.b", "acct-1", "eyJ.i.d", "e", "plus"] { v1 += [0, UInt8(field.utf8.count)] + Array(field.utf8) }
        #expect(CachePayload.parse(v1) == nil)
    }

    // MARK: descriptions

    @Test func descriptionsNameVersionProfileAndStore() throws {
        let p = try Profile("work")
        #expect(StoreIdentity.file(path: "/home/a/.local/share/chatgpt-credential/work.age").keyDescription(for: p)
                == "chatgpt-credential:v2:work:file:/home/a/.local/share/chatgpt-credential/work.age")
        #expect(StoreIdentity.secretService(busAddress: "unix:path=/run/user/1000/bus").keyDescription(for: p)
                == "chatgpt-credential:v2:work:secret-service:unix:path=/run/user/1000/bus")
    }

    @Test func identitiesThatCannotBeADescriptionAreNotCached() {
        let p = Profile.default
        #expect(StoreIdentity.file(path: "relative/default.age").keyDescription(for: p) == nil)
        #expect(StoreIdentity.file(path: "/a\nb/default.age").keyDescription(for: p) == nil)
        #expect(StoreIdentity.file(path: "/a\u{0}b").keyDescription(for: p) == nil)
        #expect(StoreIdentity.secretService(busAddress: "").keyDescription(for: p) == nil)
        let longest = "/" + String(repeating: "d", count: 4095 - "chatgpt-credential:v2:default:file:/".utf8.count)
        #expect(StoreIdentity.file(path: longest).keyDescription(for: p)?.utf8.count == 4095)
        #expect(StoreIdentity.file(path: longest + "d").keyDescription(for: p) == nil)
    }

    @Test func theBusIsFoundAsGDBusFindsIt() throws {
        #expect(StoreIdentity.secretService(bus: SessionBus(address: "unix:abstract=/tmp/x,guid=1"))
                == .secretService(busAddress: "unix:abstract=/tmp/x")) // normalised: no guid
        let dir = NSTemporaryDirectory() + "ccred-bus-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/sub dir", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let runtime = dir + "/sub dir"
        let noUsers = dir + "/no-run-user" // nothing at /run/user/UID/bus, whatever this machine has
        func bus(address: String? = nil, runtimeDirectory: String?) -> SessionBus {
            SessionBus(address: address, runtimeDirectory: runtimeDirectory, perUserRuntimeRoot: noUsers)
        }
        // No socket yet, or a regular file in its place: no bus, no identity.
        #expect(StoreIdentity.secretService(bus: bus(runtimeDirectory: runtime)) == nil)
        _ = FileManager.default.createFile(atPath: runtime + "/bus", contents: nil)
        #expect(StoreIdentity.secretService(bus: bus(runtimeDirectory: runtime)) == nil)
        try FileManager.default.removeItem(atPath: runtime + "/bus")
        let socket = try #require(BoundUnixSocket(at: runtime + "/bus"))
        defer { withExtendedLifetime(socket) {} }
        let escaped = dir.utf8.map { b -> String in
            let c = Character(Unicode.Scalar(b))
            return c.isLetter && c.isASCII || c.isNumber && c.isASCII || "-_/\\.*".contains(c) ? String(c) : String(format: "%%%02X", b)
        }.joined()
        #expect(StoreIdentity.secretService(bus: bus(runtimeDirectory: runtime))
                == .secretService(busAddress: "unix:path=\(escaped)/sub%20dir/bus"))
        // The explicit address wins; a relative XDG_RUNTIME_DIR is ignored.
        #expect(StoreIdentity.secretService(bus: bus(address: "unix:path=/x", runtimeDirectory: runtime))
                == .secretService(busAddress: "unix:path=/x"))
        #expect(StoreIdentity.secretService(bus: bus(runtimeDirectory: "relative")) == nil)
    }
}
