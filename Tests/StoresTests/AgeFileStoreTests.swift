import Foundation
import Testing
import Synchronization
@_spi(CredentialOwner) @testable import Stores
@testable import CredentialCore
@testable import SystemRuntime
@testable import Age
@testable import Secrets
import TestSupport

/// A throwaway HOME/XDG tree for one test.
final class StoreSandbox {
    let root: String
    var env: [String: String]
    init() {
        var template = Array("/tmp/ccred-age-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        env = ["HOME": root + "/home", "XDG_DATA_HOME": root + "/data", "XDG_CONFIG_HOME": root + "/config"]
    }
    deinit { try? FileManager.default.removeItem(atPath: root) }

    var dataDir: String { root + "/data/chatgpt-credential" }
    var identity: String { root + "/config/chatgpt-credential/identity" }
    func storePath(_ name: String = "default") -> String { dataDir + "/" + name + ".age" }

    func store(interactive: Bool = false, extra: [String: String] = [:]) -> AgeFileStore {
        var e = env
        for (k, v) in extra { e[k] = v }
        let s = AgeFileStore(environment: e, interactive: interactive)
        s.scryptWorkFactor = 10 // keep passphrase tests fast; reading accepts up to 18
        return s
    }

    func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }
    func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0o7777
    }
    func write(_ path: String, _ text: String, mode: mode_t = 0o600) {
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)), "cannot write \(path)")
        chmod(path, mode)
    }
}

let secretA = Array(#"{"version":1,"access_token":"aaa","refresh_token":"rrr"}"#.utf8)
let secretB = Array(#"{"version":1,"access_token":"bbb","refresh_token":"sss"}"#.utf8)

/// Runs `body`, expecting exactly `expected`; returns whether it matched.
func expectCredentialError(_ expected: CredentialError, sourceLocation: SourceLocation = #_sourceLocation,
                           _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(expected), nothing was thrown", sourceLocation: sourceLocation)
    } catch let e as CredentialError {
        #expect(e == expected, sourceLocation: sourceLocation)
        #expect(e.exitCode == 5, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(expected), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Expects a CredentialError of the given class (message free-form) and exit 5.
func expectStoreError(_ matches: (CredentialError) -> Bool, sourceLocation: SourceLocation = #_sourceLocation,
                      _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected a store error, nothing was thrown", sourceLocation: sourceLocation)
    } catch let e as CredentialError {
        #expect(matches(e), "got \(e)", sourceLocation: sourceLocation)
        #expect(e.exitCode == 5, sourceLocation: sourceLocation)
        #expect(!e.message.isEmpty && !e.message.contains("\n"), sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected a CredentialError, got \(error)", sourceLocation: sourceLocation)
    }
}

func isCorrupt(_ e: CredentialError) -> Bool { if case .storeCorrupt = e { return true }; return false }
func isWrongKey(_ e: CredentialError) -> Bool { if case .wrongKey = e { return true }; return false }
func isUnavailable(_ e: CredentialError) -> Bool { if case .storeUnavailable = e { return true }; return false }
func isStoreFailure(_ e: CredentialError) -> Bool { if case .storeFailure = e { return true }; return false }

@Suite struct AgePrimitiveTests {
    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = Array(s.utf8).makeIterator()
        while let a = it.next(), let b = it.next() { out.append(UInt8(String(decoding: [a, b], as: UTF8.self), radix: 16)!) }
        return out
    }

    @Test func hkdfRFC5869() {
        // RFC 5869 A.1 and A.3 (empty salt and info).
        let ikm = SecretBytes(copying: [UInt8](repeating: 0x0b, count: 22))
        let a1 = HKDF.sha256(ikm: ikm, salt: Self.hex("000102030405060708090a0b0c"), info: Self.hex("f0f1f2f3f4f5f6f7f8f9"), length: 42).unsafeArray()
        let a3 = HKDF.sha256(ikm: ikm, salt: [], info: [], length: 42).unsafeArray()
        #expect(a1 == Self.hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
        #expect(a3 == Self.hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
    }

    @Test func bech32() {
        let data = (0..<32).map { UInt8($0 &* 7) }
        let s = Bech32.encode(hrp: "age", data: data)
        #expect(s.hasPrefix("age1"))
        #expect(Bech32.decode(s)?.data == data)
        #expect(Bech32.decode(s.uppercased())?.data == data)
        var chars = Array(s)
        chars[10] = chars[10] == "q" ? "p" : "q"
        #expect(Bech32.decode(String(chars)) == nil)                 // checksum
        #expect(Bech32.decode("Age1" + s.dropFirst(4)) == nil)        // mixed case
        let id = X25519Identity.generate()
        let text = id.encoded().unsafeString()
        #expect(text.hasPrefix("AGE-SECRET-KEY-1"))
        #expect(X25519Identity(parsing: text)?.recipient == id.recipient)
        #expect(X25519Identity(parsing: text.lowercased())?.recipient == id.recipient)
        #expect(X25519Recipient(parsing: id.recipient.encoded) == id.recipient)
        #expect(X25519Recipient(parsing: text) == nil)
        #expect(X25519Identity(parsing: id.recipient.encoded) == nil)
    }

    @Test func roundTripsAcrossChunkBoundaries() throws {
        let id = X25519Identity.generate()
        for size in [0, 1, 65535, 65536, 65537, 3 * 65536 + 5] {
            let pt = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let file = AgeFile.encrypt(SecretBytes(copying: pt), to: [id.recipient])
            let plain = try AgeFile.decrypt(file, identities: [id]).unsafeArray()
            #expect(plain == pt)
            #expect(throws: AgeError.noMatch) { _ = try AgeFile.decrypt(file, identities: [X25519Identity.generate()]) }
            // Truncated or extended: a damaged payload (which chunk says so depends on the length).
            for damaged in [Array(file.dropLast()), file + [0]] {
                let e = #expect(throws: AgeError.self) { _ = try AgeFile.decrypt(damaged, identities: [id]) }
                guard case .payloadFailure? = e else { Issue.record("not a payload failure: \(String(describing: e))"); continue }
            }
        }
    }

    @Test func scryptWorkFactorBoundsCheckedBeforeWork() throws {
        for bad in ["0", "19", "20", "21", "23", "018", "+18", "0x12", "18 ", "-1", "99999999999999999999", ""] {
            let expected = ["19", "20", "21", "23"].contains(bad)
                ? AgeError.headerFailure("scrypt work factor \(bad) is too high (at most 18)")
                : AgeError.headerFailure("invalid scrypt work factor")
            #expect(throws: expected) { _ = try ScryptIdentity.parseWorkFactor(bad, max: ageMaxScryptWorkFactor) }
        }
        #expect(try ScryptIdentity.parseWorkFactor("18", max: ageMaxScryptWorkFactor) == 18)
        // A header claiming logN 30 must fail fast, not run scrypt for minutes.
        let stanza = AgeStanza(type: "scrypt", args: [Base64.encode([UInt8](repeating: 1, count: 16), alphabet: .standard, padded: false), "30"],
                               body: [UInt8](repeating: 0, count: 32))
        let file = AgeFile.header(stanzas: [stanza], fileKey: SecretBytes(copying: [UInt8](repeating: 2, count: 16))).encoded()
            + [UInt8](repeating: 0, count: 40)
        let start = Date()
        #expect(throws: AgeError.headerFailure("scrypt work factor 30 is too high (at most 18)")) { _ = try AgeFile.decrypt(file, identities: [ScryptIdentity(passphrase: SecretBytes(copying: "x".utf8))]) }
        #expect(Date().timeIntervalSince(start) < 1)
    }

    @Test func errorClassesMapToDistinctCredentialErrors() {
        let m = { (e: AgeError) in e.credentialError(path: "/p", keyHint: "k", recovery: "r") }
        #expect(isWrongKey(m(.noMatch)))
        #expect(isCorrupt(m(.hmacFailure)))
        #expect(isCorrupt(m(.headerFailure("x"))))
        #expect(isCorrupt(m(.payloadFailure("y"))))
        for e in [AgeError.noMatch, .hmacFailure, .headerFailure("x"), .payloadFailure("y")] { #expect(m(e).exitCode == 5) }
    }
}

@Suite struct AgeFileStoreTests {
    @Test func roundTripWithCreatedIdentity() throws {
        let sb = StoreSandbox()
        let store = sb.store()
        let p = try Profile("work")
        #expect(try store.readBytes(p) == nil)
        #expect(!FileManager.default.fileExists(atPath: sb.identity), "a read must not create the identity")
        try store.write(p, bytes: secretA)
        #expect(try store.readBytes(p) == secretA)
        #expect(try sb.store().readBytes(p) == secretA, "a fresh store instance reads it too")
        try store.write(p, bytes: secretB)
        #expect(try store.readBytes(p) == secretB)
        #expect(sb.mode(sb.storePath("work")) == 0o600)
        #expect(sb.mode(sb.dataDir) == 0o700)
        #expect(sb.mode(sb.identity) == 0o600)
        #expect(sb.mode(sb.root + "/config/chatgpt-credential") == 0o700)
        // age-keygen's format: two comment lines, then the key.
        let lines = String(decoding: sb.bytes(sb.identity)!, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("# created: "))
        let id = X25519Identity(parsing: lines[2])
        #expect(id != nil)
        #expect(lines[1] == "# public key: " + (id?.recipient.encoded ?? "?"))
        let file = sb.bytes(sb.storePath("work"))!
        #expect(file.starts(with: Array("age-encryption.org/v1\n-> X25519 ".utf8)))
        // No temp files left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.dataDir) == ["work.age"])
    }

    @Test func profilesAndDelete() throws {
        let sb = StoreSandbox()
        let store = sb.store()
        #expect(try store.profiles() == [])
        #expect(try store.delete(.default) == false)
        try store.write(try Profile("b"), bytes: secretA)
        try store.write(.default, bytes: secretB)
        sb.write(sb.dataDir + "/notes.txt", "x")
        sb.write(sb.dataDir + "/bad name.age", "x")
        sb.write(sb.dataDir + "/.b.age.tmp-1-ab", "x")
        #expect(try store.profiles() == ["b", "default"])
        #expect(try store.delete(try Profile("b")) == true)
        #expect(try store.delete(try Profile("b")) == false)
        #expect(try store.readBytes(try Profile("b")) == nil)
        #expect(try store.profiles() == ["default"])
        #expect(try store.readBytes(.default) == secretB)
    }

    @Test func noHomeIsUnavailable() throws {
        let store = AgeFileStore(environment: ["PATH": "/usr/bin"], interactive: false)
        expectStoreError(isUnavailable) { _ = try store.readBytes(.default) }
        expectStoreError(isUnavailable) { try store.write(.default, bytes: secretA) }
        expectStoreError(isUnavailable) { _ = try store.profiles() }
        #expect(store.location(for: .default).contains("HOME"))
        // Relative XDG paths are ignored in favour of HOME.
        let s2 = AgeFileStore(environment: ["HOME": "/h", "XDG_DATA_HOME": "rel"], interactive: false)
        #expect(s2.path(for: .default) == "/h/.local/share/chatgpt-credential/default.age")
        #expect(s2.identityPath == "/h/.config/chatgpt-credential/identity")
    }

    @Test func loosePermissionsRefusedAndNothingChanges() throws {
        let sb = StoreSandbox()
        let store = sb.store()
        try store.write(.default, bytes: secretA)
        let path = sb.storePath()
        let before = sb.bytes(path)
        chmod(path, 0o644)
        expectCredentialError(.permissionsTooOpen(path: path)) { _ = try sb.store().readBytes(.default) }
        expectCredentialError(.permissionsTooOpen(path: path)) { try sb.store().write(.default, bytes: secretB) }
        #expect(sb.bytes(path) == before)
        #expect(sb.mode(path) == 0o644)
        chmod(path, 0o600)
        chmod(sb.identity, 0o640)
        expectCredentialError(.permissionsTooOpen(path: sb.identity)) { _ = try sb.store().readBytes(.default) }
        expectCredentialError(.permissionsTooOpen(path: sb.identity)) { try sb.store().write(.default, bytes: secretB) }
        #expect(sb.bytes(path) == before)
        chmod(sb.identity, 0o600)
        chmod(sb.dataDir, 0o755)
        expectCredentialError(.permissionsTooOpen(path: sb.dataDir + "/")) { _ = try sb.store().readBytes(.default) }
        #expect(CredentialError.permissionsTooOpen(path: sb.dataDir + "/").message.contains("chmod 700"))
        chmod(sb.dataDir, 0o700)
        #expect(try sb.store().readBytes(.default) == secretA)
    }

    @Test func symlinkAtStorePathRefused() throws {
        let sb = StoreSandbox()
        try sb.store().write(try Profile("real"), bytes: secretA)
        let target = sb.storePath("real")
        let before = sb.bytes(target)
        symlink(target, sb.storePath())
        expectStoreError(isStoreFailure) { _ = try sb.store().readBytes(.default) }
        expectStoreError(isStoreFailure) { try sb.store().write(.default, bytes: secretB) }
        #expect(sb.bytes(target) == before)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: sb.storePath())) == target, "still the same symlink")
    }

    @Test func wrongIdentityAndDamageAreTypedAndHarmless() throws {
        let sb = StoreSandbox()
        try sb.store().write(.default, bytes: secretA)
        let path = sb.storePath()
        let good = sb.bytes(path)!
        func check(_ bytes: [UInt8], _ matches: (CredentialError) -> Bool) {
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            chmod(path, 0o600)
            expectStoreError(matches) { _ = try sb.store().readBytes(.default) }
            #expect(sb.bytes(path) == bytes)
        }
        check(Array(good.prefix(good.count - 1)), isCorrupt)     // truncated tag
        check(Array(good.prefix(40)), isCorrupt)                  // truncated header
        var flipped = good; flipped[good.count - 20] ^= 1
        check(flipped, isCorrupt)                                 // payload byte
        check(good + [0], isCorrupt)                              // trailing data
        check([], isCorrupt)
        check(Array("not an age file\n".utf8), isCorrupt)
        // A MAC that decodes but does not match: the MAC line is the line before the payload.
        let macLine = good.firstRange(of: Array("--- ".utf8))!.upperBound
        var badMac = good; badMac[macLine] = badMac[macLine] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        check(badMac, isCorrupt)
        // Another identity.
        #expect(FileManager.default.createFile(atPath: path, contents: Data(good))); chmod(path, 0o600)
        let other = X25519Identity.generate()
        sb.write(sb.identity, "# public key: \(other.recipient.encoded)\n\(other.encoded().unsafeString())\n")
        expectStoreError(isWrongKey) { _ = try sb.store().readBytes(.default) }
        #expect(sb.bytes(path) == good)
        // No identity at all.
        unlink(sb.identity)
        expectStoreError(isWrongKey) { _ = try sb.store().readBytes(.default) }
        // A garbage identity file.
        sb.write(sb.identity, "AGE-SECRET-KEY-1NOTAKEY\n")
        expectStoreError(isCorrupt) { _ = try sb.store().readBytes(.default) }
        #expect(sb.bytes(path) == good)
    }

    @Test func passphraseModeRoundTrip() throws {
        let sb = StoreSandbox()
        let pf = sb.root + "/pass"
        sb.write(pf, "correct horse\n")
        let withFile = ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]
        try sb.store(extra: withFile).write(.default, bytes: secretA)
        let path = sb.storePath()
        #expect(String(decoding: sb.bytes(path)!.prefix(40), as: UTF8.self).hasPrefix("age-encryption.org/v1\n-> scrypt "))
        #expect(!FileManager.default.fileExists(atPath: sb.identity), "passphrase mode needs no identity")
        #expect(try sb.store(extra: withFile).readBytes(.default) == secretA)
        let before = sb.bytes(path)

        // No passphrase source, non-interactive: unavailable, with instructions.
        expectStoreError({ isUnavailable($0) && $0.message.contains("CHATGPT_CREDENTIAL_PASSPHRASE_FILE") }) {
            _ = try sb.store().readBytes(.default)
        }
        // The file is already scrypt, so a write without the variable stays in passphrase mode.
        expectStoreError(isUnavailable) { try sb.store().write(.default, bytes: secretB) }
        #expect(sb.bytes(path) == before)

        // Interactive: a wrong answer is a wrong key; the right one reads and writes (still scrypt).
        let wrong = sb.store(interactive: true)
        wrong.promptPassphrase = { _ in SecretBytes(copying: "nope".utf8) }
        expectStoreError(isWrongKey) { _ = try wrong.readBytes(.default) }
        let wrongWriter = sb.store(interactive: true)
        wrongWriter.promptPassphrase = { _ in SecretBytes(copying: "nope".utf8) }
        expectStoreError(isWrongKey) { try wrongWriter.write(.default, bytes: secretB) }
        #expect(sb.bytes(path) == before)
        // Issue 29: a terminal is asked three times; the last word is "try again", never erase.
        var asked: [String] = []
        let thrice = sb.store(interactive: true)
        thrice.promptPassphrase = { prompt in asked.append(prompt); return SecretBytes(copying: "nope".utf8) }
        expectStoreError({ isWrongKey($0) && $0.message.contains("try again") && !$0.message.contains("erase") }) { _ = try thrice.readBytes(.default) }
        #expect(asked.count == 3, "\(asked)")
        #expect(asked.dropFirst().allSatisfy { $0.hasPrefix("Wrong passphrase; try again") }, "\(asked)")
        var answers = ["nope", "still not", "correct horse"]
        let third = sb.store(interactive: true)
        third.promptPassphrase = { _ in SecretBytes(copying: answers.removeFirst().utf8) }
        #expect(try third.readBytes(.default) == secretA, "the third try opens it")
        let right = sb.store(interactive: true)
        var prompts = 0
        right.promptPassphrase = { prompt in prompts += 1; #expect(prompt.contains(path)); return SecretBytes(copying: "correct horse".utf8) }
        #expect(try right.readBytes(.default) == secretA)
        try right.write(.default, bytes: secretB)
        #expect(prompts == 1, "one prompt per process")
        #expect(try sb.store(extra: withFile).readBytes(.default) == secretB)
        #expect(sb.bytes(path)!.starts(with: Array("age-encryption.org/v1\n-> scrypt ".utf8)))

        // The passphrase file decides: a different passphrase in it is a wrong key on read.
        sb.write(pf, "battery staple")
        expectStoreError(isWrongKey) { _ = try sb.store(extra: withFile).readBytes(.default) }
    }

    @Test func passphraseFileChecks() throws {
        let sb = StoreSandbox()
        let pf = sb.root + "/pass"
        let withFile = ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]
        expectStoreError(isUnavailable) { try sb.store(extra: withFile).write(.default, bytes: secretA) }
        sb.write(pf, "\n")
        expectStoreError(isUnavailable) { try sb.store(extra: withFile).write(.default, bytes: secretA) }
        sb.write(pf, "pw\r\nsecond line ignored\n", mode: 0o644)
        expectCredentialError(.permissionsTooOpen(path: pf)) { try sb.store(extra: withFile).write(.default, bytes: secretA) }
        #expect(!FileManager.default.fileExists(atPath: sb.storePath()))
        chmod(pf, 0o400)
        try sb.store(extra: withFile).write(.default, bytes: secretA)
        let s = sb.store(interactive: true)
        s.promptPassphrase = { _ in SecretBytes(copying: "pw".utf8) }
        #expect(try s.readBytes(.default) == secretA, "CRLF and later lines are not part of the passphrase")
    }

    @Test func passphraseFileSwitchesAnIdentityProfile() throws {
        let sb = StoreSandbox()
        try sb.store().write(.default, bytes: secretA)
        let pf = sb.root + "/pass"
        sb.write(pf, "pw\n")
        try sb.store(extra: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]).write(.default, bytes: secretB)
        #expect(sb.bytes(sb.storePath())!.starts(with: Array("age-encryption.org/v1\n-> scrypt ".utf8)))
        #expect(try sb.store(extra: ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]).readBytes(.default) == secretB)
    }

    @Test func identityCreationRaceYieldsOneIdentity() throws {
        let sb = StoreSandbox()
        let n = 8
        let slots = Mutex([X25519Recipient?](repeating: nil, count: n))
        // Each thread makes its own store from the sandbox's environment (as sb.store() does).
        let env = sb.env
        DispatchQueue.concurrentPerform(iterations: n) { i in
            let store = AgeFileStore(environment: env, interactive: false)
            store.scryptWorkFactor = 10
            let recipient = try? store.loadOrCreateIdentity().recipient
            slots.withLock { $0[i] = recipient }
        }
        let results = slots.withLock { $0 }
        let recipients = Set(results.compactMap { $0?.encoded })
        #expect(results.allSatisfy { $0 != nil })
        #expect(recipients.count == 1)
        #expect(try sb.store().loadIdentities()?.map(\.recipient.encoded) == Array(recipients))
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.root + "/config/chatgpt-credential") == ["identity"])
    }

    @Test func oversizedFileIsCorrupt() throws {
        let sb = StoreSandbox()
        try sb.store().write(.default, bytes: secretA)
        let big = [UInt8](repeating: 0x41, count: (1 << 20) + 1)
        #expect(FileManager.default.createFile(atPath: sb.storePath(), contents: Data(big)))
        chmod(sb.storePath(), 0o600)
        expectStoreError(isCorrupt) { _ = try sb.store().readBytes(.default) }
    }

    /// The sweep's matcher takes exactly `.BASE.tmp-PID-HEX` and nothing that merely starts so.
    @Test func tempNameMatchesExactlyItsOwnFormat() {
        let name = AtomicFile.tempName(base: "y.age", pid: 4321, random: [0, 1, 0xab, 0xcd, 0xef, 0x10])
        #expect(name == ".y.age.tmp-4321-0001abcdef10")
        #expect(AtomicFile.tempWriterPID(name, base: "y.age") == 4321)
        #expect(AtomicFile.tempWriterPID(".y.age.tmp-77-0a1b2c", base: "y.age") == 77) // an earlier version's
        for foreign in [".y.age.tmp-4000000-x.age.tmp-4321-0001abcdef10", ".y.age.tmp-4000000-x", ".y.age.tmp-4321-0001abcdef10x",
                        ".y.age.tmp-4321-0001ABCDEF10", ".y.age.tmp-04321-0001abcdef10", ".y.age.tmp--0001abcdef10",
                        ".y.age.tmp-4321-ab", ".y.age.tmp-4321-0001abcdef1011", "y.age.tmp-4321-0001abcdef10",
                        ".y.age.tmp-+4321-0001abcdef10", ".yy.age.tmp-4321-0001abcdef10", ".y.age.tmp-99999999999-0001abcdef10"] {
            #expect(AtomicFile.tempWriterPID(foreign, base: "y.age") == nil, "\(foreign)")
        }
    }

    @Test func atomicPrimitives() throws {
        let sb = StoreSandbox()
        mkdir(sb.root + "/d", 0o700)
        let p = sb.root + "/d/f"
        #expect(try Array("one".utf8).withUnsafeBytes { try AtomicFile.createExclusive(p, with: $0) })
        #expect(try Array("two".utf8).withUnsafeBytes { try AtomicFile.createExclusive(p, with: $0) } == false)
        #expect(sb.bytes(p) == Array("one".utf8))
        try Array("three".utf8).withUnsafeBytes { try AtomicFile.replace(p, with: $0) }
        #expect(sb.bytes(p) == Array("three".utf8))
        #expect(sb.mode(p) == 0o600)
        // A failed replace (directory gone) leaves no temp file and throws a store error.
        expectStoreError(isStoreFailure) { try [UInt8(1)].withUnsafeBytes { try AtomicFile.replace(sb.root + "/missing/f", with: $0) } }
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.root + "/d") == ["f"])
        #expect(try AtomicFile.remove(p))
        #expect(try AtomicFile.remove(p) == false)
    }
}
