import Foundation
import Testing
@testable import AccessCache
@testable import CredentialCore
import CSeccompTestSupport
import TestSupport

/// The access cache against the real kernel keyring, read back from outside the process with
/// `keyctl` (keyutils). Every test uses identities of its own and removes the keys it made.
@Suite struct KeyringCacheTests {
    let profile = try! Profile("work")

    func cache(ttl: Int64 = 300, enabled: Bool = true, diagnostics: Diagnostics? = nil) -> KeyringCache {
        KeyringCache(settings: AccessCacheSettings(enabled: enabled, ttl: ttl),
                     diagnostic: { line in diagnostics?.lines.append(line) })
    }

    final class Diagnostics: @unchecked Sendable { var lines: [String] = [] }

    // MARK: what is written

    @Test func fillThenLookupRoundTripsAndKeyctlReadsThePayload() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry()
        let c = cache()
        #expect(c.lookup(id, profile) == nil)
        c.fill(entry, id, profile)
        #expect(c.lookup(id, profile) == entry)
        // Another process (keyctl) reads exactly the version-3 payload.
        let serial = try #require(k.serial(id, profile))
        let piped = KeyringFixture.tool(KeyringFixture.keyctl, ["pipe", String(serial)])
        #expect(piped.status == 0, "keyctl pipe: \(piped.stderr)")
        #expect(piped.stdout == CachePayload.bytes(entry))
        // And a fresh cache (as the next process would be) finds it too.
        #expect(cache().lookup(id, profile) == entry)
    }

    /// An entry answers only a lookup that names the store version it was filled from (the
    /// encrypted file as it was then); any other is a miss, and the entry stays for the next fill
    /// to replace.
    @Test func anEntryAnswersOnlyForTheStoreVersionItWasFilledFrom() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry()
        let c = cache()
        let filled = Array("2049:12:1511:1800000000.5".utf8)
        c.fill(entry, id, profile, storeVersion: filled)
        #expect(c.lookup(id, profile, storeVersion: filled) == entry)
        #expect(c.lookup(id, profile, storeVersion: Array("2049:13:1511:1800000000.5".utf8)) == nil)
        #expect(c.lookup(id, profile) == nil) // none named: a Secret Service lookup's
        #expect(k.serial(id, profile) != nil)
        let changed = TokenDocument(accessToken: SecretToken(copying: "eyJ.a.\(k.run)"), refreshToken: "rt", idToken: "eyJ.i",
                                    accountId: "acct", expiresAt: Clock.now() + 3600, email: "e@example.com", plan: "plus")
        c.update(to: changed, id, profile, storeVersion: Array("2049:13:1511:1800000001.0".utf8))
        #expect(c.lookup(id, profile, storeVersion: Array("2049:13:1511:1800000001.0".utf8)) != nil)
        #expect(c.lookup(id, profile, storeVersion: filled) == nil)
    }

    @Test func theRefreshTokenIsNeverInTheKey() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.busIdentity()
        let refreshToken = "rt_\(k.run)_single-use"
        let document = TokenDocument(accessToken: SecretToken(copying: "eyJ.access-\(k.run).sig"), refreshToken: SecretToken(copying: refreshToken),
                                     idToken: SecretToken(copying: "eyJ.id-\(k.run).sig"), accountId: "acct-1",
                                     expiresAt: Clock.now() + 7200, lastRefresh: Clock.now(), email: "a@example.com", plan: "pro")
        let entry = try #require(AccessCacheEntry(cacheable: document))
        cache().fill(entry, id, profile)
        let serial = try #require(k.serial(id, profile))
        let piped = KeyringFixture.tool(KeyringFixture.keyctl, ["pipe", String(serial)])
        let printed = KeyringFixture.tool(KeyringFixture.keyctl, ["print", String(serial)])
        #expect(piped.status == 0 && printed.status == 0, "keyctl: \(piped.stderr) \(printed.stderr)")
        #expect(Self.contains(piped.stdout, document.accessToken.unsafeString()), "control: the access token is there")
        #expect(!Self.contains(piped.stdout, refreshToken))
        #expect(!Self.contains(piped.stdout, "rt_"))
        #expect(!printed.stdoutText.contains(refreshToken) && !printed.stdoutText.contains("rt_"))
        // `keyctl print` shows a binary payload as hex: the refresh token is not there either.
        let hex = Array(refreshToken.utf8).map { String(format: "%02x", $0) }.joined()
        #expect(!printed.stdoutText.lowercased().contains(hex))
        #expect(cache().lookup(id, profile) == entry)
    }

    @Test func documentsThatMustNotBeServedAreNotCacheable() {
        let base = TokenDocument(accessToken: "at", refreshToken: "rt", expiresAt: Clock.now() + 7200)
        let rejected = base.rejected(code: "refresh_token_reused")
        let dropped = base.accessDropped()
        #expect(AccessCacheEntry(cacheable: base) != nil)
        #expect(AccessCacheEntry(cacheable: rejected) == nil)
        #expect(AccessCacheEntry(cacheable: dropped) == nil)
    }

    @Test func permissionsLetOnlyTheOwnerRead() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        cache().fill(KeyringFixture.entry(), id, profile)
        let serial = try #require(k.serial(id, profile))
        let description = k.description(id, profile)
        let r = KeyringFixture.tool(KeyringFixture.keyctl, ["rdescribe", String(serial)])
        #expect(r.stdoutText == "user;\(geteuid());\(getegid());001b0000;\(description)\n")
        // keyctl's own rendering: the owner may see, read, find and link it (and so invalidate
        // it); nobody may change it; nothing for a possessor as such, the group or others.
        let d = KeyringFixture.tool(KeyringFixture.keyctl, ["describe", String(serial)])
        let padded = String(repeating: " ", count: max(0, 9 - String(serial).count)) + String(serial)
        let uid = String(geteuid()), gid = String(getegid())
        #expect(d.stdoutText == "\(padded): alswrv------------------ \(String(repeating: " ", count: max(0, 5 - uid.count)))\(uid) \(String(repeating: " ", count: max(0, 5 - gid.count)))\(gid) user: \(description)\n".replacingOccurrences(of: "alswrv------------------", with: "-------ls-rv------------"))
    }

    /// The man page's sentence: processes of the same user that search the user keyring can read
    /// an entry, whether their session keyring links it or not.
    @Test func theSameUserReadsItFromASessionKeyringOfItsOwn() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry()
        cache().fill(entry, id, profile)
        let serial = String(try #require(k.serial(id, profile)))
        // Control: this process tree reaches @u through its session keyring, so it possesses the key.
        #expect(KeyringFixture.tool(KeyringFixture.keyctl, ["pipe", serial]).status == 0)
        // The same user in a session keyring of its own (which does not link @u) reads it too.
        let own = KeyringFixture.tool(KeyringFixture.keyctl, ["session", "-", KeyringFixture.keyctl, "pipe", serial])
        #expect(own.status == 0 && own.stdout == CachePayload.bytes(entry), "\(own.stderr)")
        #expect(cache().lookup(id, profile) == entry)
    }

    @Test(.enabled(if: geteuid() == 0, "setpriv needs root"))
    func anotherUserCannotReadOrSeeIt() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        cache().fill(KeyringFixture.entry(), id, profile)
        let serial = String(try #require(k.serial(id, profile)))
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--", KeyringFixture.keyctl]
        for verb in ["pipe", "print", "rdescribe"] {
            let r = KeyringFixture.tool(KeyringFixture.setpriv, nobody + [verb, serial])
            #expect(r.status == 1 && r.stdout.isEmpty, "\(verb) as uid 65534: exit \(r.status)")
            #expect(r.stderr.contains("Permission denied"), "\(verb) as uid 65534: \(r.stderr)")
        }
        // Nor does it find it: its @u is its own.
        let search = KeyringFixture.tool(KeyringFixture.setpriv, nobody + ["search", "@u", "user", k.description(id, profile)])
        #expect(search.status == 1 && search.stdout.isEmpty)
    }

    /// Possession follows keyrings, not users, so possession grants no read: a process of another
    /// user that kept a session keyring linking this user's @u (a setuid program, setpriv without
    /// a new session) possesses the entry and still cannot read it; nor can one with its own.
    @Test(.enabled(if: geteuid() == 0, "setpriv needs root"))
    func anotherUserCannotReadItEvenWithTheSessionKeyring() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry()
        cache().fill(entry, id, profile)
        let serial = String(try #require(k.serial(id, profile)))
        let asNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups -- keyctl pipe \(serial)"
        let inherited = KeyringFixture.tool(KeyringFixture.keyctl, ["session", "-", "/bin/sh", "-c", "keyctl link @u @s && \(asNobody)"])
        #expect(inherited.status == 1 && inherited.stdout.isEmpty && inherited.stderr.contains("Permission denied"), "stderr: \(inherited.stderr)")
        // Control: the same line as this user reads it, so the refusal above is the uid's.
        let asSelf = KeyringFixture.tool(KeyringFixture.keyctl, ["session", "-", "/bin/sh", "-c", "keyctl link @u @s && keyctl pipe \(serial)"])
        #expect(asSelf.status == 0 && asSelf.stdout == CachePayload.bytes(entry), "stderr: \(asSelf.stderr)")
        let fresh = KeyringFixture.tool(KeyringFixture.keyctl, ["session", "-", "/bin/sh", "-c", "keyctl link @u @s && keyctl session - \(asNobody)"])
        #expect(fresh.status == 1 && fresh.stdout.isEmpty && fresh.stderr.contains("Permission denied"), "stderr: \(fresh.stderr)")
    }

    // MARK: how long

    /// /proc/keys shows the time left: "45s" for 45 seconds, "4m" for 299 (keys.7, proc_keys_show).
    static func timeLeft(_ serial: Int32) -> String? {
        // proc_keys_show prints the serial as %08x.
        let digits = String(UInt32(bitPattern: serial), radix: 16)
        let hex = String(repeating: "0", count: max(0, 8 - digits.count)) + digits
        // Read to the end by hand: /proc/keys reports size 0 and comes a page per read(2).
        let fd = open("/proc/keys", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            data += chunk[0..<n]
        }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count > 3, fields[0] == hex { return String(fields[3]) }
        }
        return nil
    }

    static func seconds(_ timeLeft: String?) -> Int? {
        guard let t = timeLeft, t.hasSuffix("s") else { return nil }
        return Int(t.dropLast())
    }

    /// TTL 45 with a token good for two hours: 45 s. TTL 300 with a token expiring in 320 s:
    /// 20 s, since the entry must be gone 5 minutes before the token expires.
    @Test(arguments: [(Int64(45), Int64(7200), 40...45), (300, 320, 15...20)])
    func kernelTimeoutIsTheTTLOrExpiryLessFiveMinutes(_ ttl: Int64, _ expiresIn: Int64, _ expected: ClosedRange<Int>) throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        cache(ttl: ttl).fill(KeyringFixture.entry(expiresIn: expiresIn), id, profile)
        let left = Self.seconds(Self.timeLeft(try #require(k.serial(id, profile))))
        #expect(left.map { expected.contains($0) } == true, "time left: \(String(describing: left))")
    }

    @Test func entryWithTTLTwoIsGoneOnceTheKernelExpiresIt() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.busIdentity()
        let c = cache(ttl: 2)
        c.fill(KeyringFixture.entry(), id, profile)
        #expect(c.lookup(id, profile) != nil)
        // The fact waited for: the kernel has expired the key (keyctl no longer finds it).
        let filled = Date()
        while k.serial(id, profile) != nil && Date().timeIntervalSince(filled) < 10 { usleep(50_000) }
        #expect(Date().timeIntervalSince(filled) < 4, "the key outlived its 2 s timeout: \(Date().timeIntervalSince(filled)) s")
        #expect(c.lookup(id, profile) == nil)
        #expect(k.serial(id, profile) == nil, "keyctl still finds the expired key")
    }

    @Test func anEntryTooCloseToExpiryIsNotWrittenAndRemovesTheOldOne() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let c = cache()
        c.fill(KeyringFixture.entry(tag: "old"), id, profile)
        #expect(k.serial(id, profile) != nil)
        // Timeout min(300, 300 − 300) = 0: not cached, and the older entry no longer stands.
        c.fill(KeyringFixture.entry(expiresIn: 300, tag: "new"), id, profile)
        #expect(k.serial(id, profile) == nil)
        c.fill(KeyringFixture.entry(expiresIn: 0, tag: "unknown expiry"), id, profile)
        #expect(k.serial(id, profile) == nil)
        #expect(c.lookup(id, profile) == nil)
    }

    // MARK: changes

    @Test func fillReplacesTheEntryInOneKey() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let c = cache()
        c.fill(KeyringFixture.entry(tag: "first"), id, profile)
        let first = try #require(k.serial(id, profile))
        let second = KeyringFixture.entry(tag: "second")
        c.fill(second, id, profile)
        #expect(c.lookup(id, profile) == second)
        let now = try #require(k.serial(id, profile))
        #expect(now != first, "a new key, linked in place of the old one")
        // Exactly one key with this description in @u; the displaced one, linked nowhere, is
        // destroyed by the kernel's garbage collector moments later.
        let listing = KeyringFixture.tool(KeyringFixture.keyctl, ["rlist", "@u"]).stdoutText
        let ours = listing.split(whereSeparator: { $0 == " " || $0 == "\n" }).filter { Int32($0) == first || Int32($0) == now }
        #expect(ours.map(String.init) == [String(now)])
        let deadline = Date().addingTimeInterval(5)
        while KeyringFixture.tool(KeyringFixture.keyctl, ["pipe", String(first)]).status == 0 && Date() < deadline { usleep(50_000) }
        #expect(KeyringFixture.tool(KeyringFixture.keyctl, ["pipe", String(first)]).status != 0)
    }

    @Test func revokeRemovesOnlyThatIdentitysEntry() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let other = try Profile("other")
        let file = k.fileIdentity("a"), otherFile = k.fileIdentity("b"), bus = k.busIdentity()
        let c = cache()
        let now = Clock.now()
        let places = [(file, profile), (otherFile, profile), (bus, profile), (file, other)]
        let entries = places.indices.map { KeyringFixture.entry(now: now, tag: "\($0)") }
        for ((id, p), e) in zip(places, entries) { c.fill(e, id, p) }
        c.revoke(file, profile)
        #expect(c.lookup(file, profile) == nil)
        #expect(k.serial(file, profile) == nil)
        #expect(c.lookup(otherFile, profile) == entries[1])
        #expect(c.lookup(bus, profile) == entries[2])
        #expect(c.lookup(file, other) == entries[3])
        c.revoke(file, profile) // nothing there: no error, nothing else touched
        #expect(c.lookup(bus, profile) == entries[2])
    }

    /// What every change does (man page ACCESS CACHE): the profile's entries under every store
    /// identity go, except the one named; other profiles' entries stay. Profiles of their own:
    /// other tests (and other runs) use "work" at the same time.
    @Test func revokeEverywhereRemovesTheProfilesEntriesUnderEveryIdentity() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let mine = try Profile("rv-" + String(k.run.prefix(8))), neighbour = try Profile("rv-" + String(k.run.prefix(8)) + "x")
        let file = k.fileIdentity("a"), alias = k.fileIdentity("b"), bus = k.busIdentity()
        let c = cache()
        let places = [(file, mine), (alias, mine), (bus, mine), (file, neighbour)]
        let entries = places.indices.map { KeyringFixture.entry(tag: "\($0)") }
        for ((id, p), e) in zip(places, entries) { c.fill(e, id, p) }
        c.revokeEverywhere(mine, keeping: alias)
        #expect(k.serial(file, mine) == nil)
        #expect(k.serial(bus, mine) == nil)
        #expect(c.lookup(alias, mine) == entries[1])
        #expect(c.lookup(file, neighbour) == entries[3]) // "rv-…x" is another profile, not a prefix match
        c.revokeEverywhere(mine)
        #expect(k.serial(alias, mine) == nil)
        #expect(c.lookup(file, neighbour) == entries[3])
        // Even with the cache off: a change must not leave an entry for others to serve.
        c.fill(entries[0], bus, mine)
        cache(enabled: false).revokeEverywhere(mine)
        #expect(k.serial(bus, mine) == nil)
    }

    /// A process whose session keyring does not link the user keyring (`keyctl session -`) cannot
    /// describe possessor-only keys; it still removes the profile's entries under every identity.
    @Test func revokeEverywhereWorksFromAPrivateSessionKeyring() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let mine = try Profile("rp-" + String(k.run.prefix(8)))
        let c = cache()
        let current = KeyringFixture.entry(tag: "f")
        c.fill(current, k.fileIdentity(), mine)
        // An entry as an earlier version wrote it: possessor-only, so a process in a new session
        // keyring cannot even describe it.
        let old = try plant(try #require(CachePayload.bytes(KeyringFixture.entry(tag: "b"))), k.description(k.busIdentity(), mine),
                            permissions: "0x3f000000")
        let outside = KeyringFixture.tool(KeyringFixture.keyctl, ["session", "-", KeyringFixture.keyctl, "rdescribe", String(old)])
        #expect(outside.status != 0, "a private session describes the key: \(outside.stdoutText)")
        // This process, in a new session keyring of its own for one thread.
        final class Box: @unchecked Sendable { var joined = false; var read: AccessCacheEntry? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            box.joined = ctest_join_new_session_keyring() >= 0
            guard box.joined else { return }
            let here = KeyringCache(settings: AccessCacheSettings(enabled: true, ttl: 300))
            box.read = here.lookup(k.fileIdentity(), mine) // the same user: readable here too
            here.revokeEverywhere(mine)
        }
        thread.start()
        done.wait()
        #expect(box.read == current)
        try #require(box.joined)
        #expect(k.serial(k.fileIdentity(), mine) == nil)
        #expect(k.serial(k.busIdentity(), mine) == nil)
    }

    @Test func twoBusesNeverSeeEachOthersEntries() {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let one = k.busIdentity("one"), two = k.busIdentity("two")
        let first = KeyringFixture.entry(tag: "one"), second = KeyringFixture.entry(tag: "two")
        let c = cache()
        c.fill(first, one, profile)
        #expect(c.lookup(two, profile) == nil)
        c.fill(second, two, profile)
        #expect(c.lookup(one, profile) == first)
        #expect(c.lookup(two, profile) == second)
    }

    @Test func updateFillsForAServableDocumentAndRevokesForAnythingElse() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let c = cache()
        let good = TokenDocument(accessToken: SecretToken(copying: "eyJ.a.\(k.run)"), refreshToken: "rt", idToken: "eyJ.i",
                                 accountId: "acct", expiresAt: Clock.now() + 3600, email: "e@example.com", plan: "plus")
        c.update(to: good, id, profile)
        #expect(c.lookup(id, profile) == AccessCacheEntry(cacheable: good))
        let rejected = good.rejected(code: "refresh_token_reused")
        let dropped = good.accessDropped()
        let changes: [TokenDocument?] = [rejected, dropped, nil]
        for next in changes {
            c.update(to: good, id, profile)
            #expect(k.serial(id, profile) != nil)
            c.update(to: next, id, profile)
            #expect(k.serial(id, profile) == nil, "still cached after \(String(describing: next?.state)) \(next == nil)")
        }
    }

    // MARK: off

    @Test func disabledCacheMakesNoKeyReadsNothingAndStillRemovesTheOldEntry() {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let off = cache(enabled: false)
        #expect(!off.canServe)
        off.fill(KeyringFixture.entry(), id, profile)
        #expect(k.serial(id, profile) == nil)
        cache().fill(KeyringFixture.entry(tag: "on"), id, profile)
        #expect(off.lookup(id, profile) == nil)
        // A change made with the cache off must not leave the others serving the old token.
        off.fill(KeyringFixture.entry(tag: "changed"), id, profile)
        #expect(k.serial(id, profile) == nil)
    }

    // MARK: damage

    /// Writes a key as another program would, with the entry's permissions.
    func plant(_ payload: [UInt8], _ description: String, permissions: String = "0x001b0000") throws -> Int32 {
        let add = KeyringFixture.tool(KeyringFixture.keyctl, ["padd", "user", description, "@u"], input: payload)
        let serial = try #require(Int32(add.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)), "keyctl padd: \(add.stderr)")
        #expect(KeyringFixture.tool(KeyringFixture.keyctl, ["setperm", String(serial), permissions]).status == 0)
        return serial
    }

    @Test func aValidPayloadWrittenByAnotherProcessIsRead() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry(tag: "planted")
        _ = try plant(try #require(CachePayload.bytes(entry)), k.description(id, profile))
        #expect(cache().lookup(id, profile) == entry)
    }

    @Test(arguments: [
        Array("not a payload".utf8),
        [UInt8(ascii: "C"), UInt8(ascii: "C"), UInt8(ascii: "A"), 3] + [UInt8](repeating: 0, count: 34), // version 3
        Array(CachePayload.bytes(KeyringFixture.entry(tag: "cut"))!.dropLast()),                      // truncated
        CachePayload.bytes(KeyringFixture.entry(tag: "long"))! + [0],                                  // trailing byte
    ])
    func aGarbledPayloadIsAMissAndIsRemoved(_ payload: [UInt8]) throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        _ = try plant(payload, k.description(id, profile))
        let said = Diagnostics()
        #expect(cache(diagnostics: said).lookup(id, profile) == nil)
        #expect(k.serial(id, profile) == nil, "the damaged key is still there")
        #expect(said.lines == ["access cache: removed an entry that was damaged"])
    }

    // The first: what earlier versions wrote (possessor-only).
    @Test(arguments: ["0x3f000000", "0x001f0000", "0x001b0003", "0x011b0000", "0x3f1b0000"])
    func anEntryWithOtherPermissionsIsNotTrusted(_ permissions: String) throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let entry = KeyringFixture.entry()
        _ = try plant(try #require(CachePayload.bytes(entry)), k.description(id, profile), permissions: permissions)
        let said = Diagnostics()
        #expect(cache(diagnostics: said).lookup(id, profile) == nil)
        #expect(k.serial(id, profile) == nil)
        #expect(said.lines == ["access cache: removed an entry that had other permissions or another owner"])
    }

    @Test func anEntryTooLargeForAKeyIsNotCachedAndRemovesTheOldOne() throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let said = Diagnostics()
        let c = cache(diagnostics: said)
        c.fill(KeyringFixture.entry(tag: "small"), id, profile)
        var huge = KeyringFixture.entry(tag: "huge")
        huge.idToken = SecretToken(copying: String(repeating: "x", count: 32_767))
        c.fill(huge, id, profile)
        #expect(k.serial(id, profile) == nil)
        #expect(said.lines == ["access cache: the credential is too large for a kernel key (32767 bytes); not cached"])
    }

    // MARK: refused by the kernel

    @Test(arguments: [EPERM, ENOSYS])
    func refusedKeyringCallsAreSkippedSilentlyAndSaidOnce(_ error: Int32) throws {
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        let said = Diagnostics()
        let entry = KeyringFixture.entry()
        let refusal = "access cache: not used: the kernel refuses keyring calls (\(String(cString: strerror(error))))"
        KeyringFixture.onRefusingThread(calls: CSECCOMP_REFUSE_ADD_KEY | CSECCOMP_REFUSE_KEYCTL, error: error) {
            // Control: the filter really is there.
            #expect(KernelKeyring.search(KernelKeyring.userKeyring, description: "x") == .failure(.init(errno: error)))
            let c = KeyringCache(settings: AccessCacheSettings(), diagnostic: { said.lines.append($0) })
            #expect(c.lookup(id, profile) == nil)
            #expect(!c.canServe)
            c.fill(entry, id, profile)
            c.revoke(id, profile)
            #expect(c.lookup(id, profile) == nil)
        }
        #expect(k.serial(id, profile) == nil)
        #expect(said.lines == [refusal])
        #expect(KeyringCache(settings: AccessCacheSettings()).canServe)
        // Filled from a thread the kernel serves, the same entry is there (the control).
        cache().fill(entry, id, profile)
        #expect(k.serial(id, profile) != nil)
    }

    @Test func refusedWritesStillLeaveNoStaleEntry() throws {
        // add_key refused (a quota, EDQUOT) while keyctl works: the older entry is removed.
        let k = KeyringFixture()
        defer { k.cleanup() }
        let id = k.fileIdentity()
        cache().fill(KeyringFixture.entry(tag: "old"), id, profile)
        let said = Diagnostics()
        KeyringFixture.onRefusingThread(calls: CSECCOMP_REFUSE_ADD_KEY, error: EDQUOT) {
            let c = KeyringCache(settings: AccessCacheSettings(), diagnostic: { said.lines.append($0) })
            c.fill(KeyringFixture.entry(tag: "new"), id, profile)
        }
        #expect(k.serial(id, profile) == nil)
        #expect(said.lines == ["access cache: the user's kernel key quota is full (see /proc/sys/kernel/keys/maxbytes); not cached"])
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard !n.isEmpty, haystack.count >= n.count else { return false }
        return (0...(haystack.count - n.count)).contains { haystack[$0..<($0 + n.count)].elementsEqual(n) }
    }
}
