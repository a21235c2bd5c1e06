import Foundation
import Testing
@testable import CLI
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import CredentialCore
import TestSupport

/// Interoperability of the encrypted-file store with the real `age` tool (Debian's age 1.1.1):
/// files we write decrypt with `age -d -i`, files `age` writes are read by us, and damage is
/// reported with the right error while the file stays exactly as it was.
@Suite struct AgeInteropTests {
    static let age = "/usr/bin/age"
    static let keygen = "/usr/bin/age-keygen"
    static let script = "/usr/bin/script"
    static let haveAge = FileManager.default.isExecutableFile(atPath: age) && FileManager.default.isExecutableFile(atPath: keygen)
    /// `age -p` reads the passphrase only from a terminal; util-linux `script` provides one.
    static let haveScript = FileManager.default.isExecutableFile(atPath: script)

    let secret = Array(#"{"version":1,"access_token":"at-\#(UInt32.random(in: 0...UInt32.max))","refresh_token":"rt"}"#.utf8)

    func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }
    func put(_ path: String, _ data: [UInt8], mode: mode_t = 0o600) {
        #expect(FileManager.default.createFile(atPath: path, contents: Data(data)), "cannot write \(path)")
        chmod(path, mode)
    }
    func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o7777 : 0o7777
    }
    func store(_ sb: Sandbox, _ extra: [String: String] = [:]) -> AgeFileStore {
        var e = sb.env
        for (k, v) in extra { e[k] = v }
        return AgeFileStore(environment: e, interactive: false)
    }
    func expectError(_ matches: (CredentialError) -> Bool, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("expected a store error, nothing was thrown", sourceLocation: sourceLocation)
        } catch let e as CredentialError {
            #expect(matches(e), "got \(e)", sourceLocation: sourceLocation)
            #expect(e.exitCode == 5, sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(.enabled(if: haveAge)) func ageDecryptsWhatWeWrite() throws {
        let sb = Sandbox(bus: .none)
        try store(sb).write(.default, bytes: secret)
        let path = sb.dataDir + "/default.age"
        let r = Harness.run(Self.age, ["-d", "-i", sb.configDir + "/identity", path], env: sb.env)
        #expect(r.status == 0, "age -d failed: \(r.stderr)")
        #expect(r.stdoutBytes == secret)
        // age-keygen -y derives the same public key we wrote in the identity comment.
        let y = Harness.run(Self.keygen, ["-y", sb.configDir + "/identity"], env: sb.env)
        #expect(y.status == 0)
        let text = String(decoding: bytes(sb.configDir + "/identity") ?? [], as: UTF8.self)
        #expect(text.contains("# public key: " + y.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + "\n"))
    }

    @Test(.enabled(if: haveAge)) func weReadWhatAgeWrites() throws {
        let sb = Sandbox(bus: .none)
        mkdir(sb.configDir, 0o700)
        mkdir(sb.dataDir, 0o700)
        let idPath = sb.configDir + "/identity"
        let kg = Harness.run(Self.keygen, ["-o", idPath], env: sb.env)
        #expect(kg.status == 0, "age-keygen: \(kg.stderr)")
        chmod(idPath, 0o600)
        let recipient = Harness.run(Self.keygen, ["-y", idPath], env: sb.env).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(recipient.hasPrefix("age1"))
        #expect(try store(sb).loadIdentities()?.first?.recipient.encoded == recipient)

        let path = sb.dataDir + "/default.age"
        let enc = Harness.run(Self.age, ["-r", recipient, "-o", path], env: sb.env, stdin: secret)
        #expect(enc.status == 0, "age -r: \(enc.stderr)")
        // age creates its output 0644 under the usual umask: we refuse that until it is fixed.
        chmod(path, 0o644)
        let before = bytes(path)
        expectError({ $0 == .permissionsTooOpen(path: path) }) { _ = try store(sb).readBytes(.default) }
        #expect(bytes(path) == before)
        chmod(path, 0o600)
        #expect(try store(sb).readBytes(.default) == secret)

        let other = sb.dataDir + "/other.age"
        let enc2 = Harness.run(Self.age, ["-e", "-i", idPath, "-o", other], env: sb.env, stdin: secret)
        #expect(enc2.status == 0, "age -e -i: \(enc2.stderr)")
        chmod(other, 0o600)
        #expect(try store(sb).readBytes(try Profile("other")) == secret)
        // And our rewrite keeps the age-keygen identity (no second identity appears).
        try store(sb).write(try Profile("other"), bytes: Array("x".utf8))
        let r = Harness.run(Self.age, ["-d", "-i", idPath, other], env: sb.env)
        #expect(r.status == 0 && r.stdout == "x")
    }

    @Test(.enabled(if: haveAge)) func damageIsTypedAndLeavesTheFileAlone() throws {
        let sb = Sandbox(bus: .none)
        try store(sb).write(.default, bytes: secret) // creates our identity
        let idPath = sb.configDir + "/identity"
        let recipient = Harness.run(Self.keygen, ["-y", idPath], env: sb.env).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let path = sb.dataDir + "/default.age"
        let enc = Harness.run(Self.age, ["-r", recipient, "-o", path], env: sb.env, stdin: secret)
        #expect(enc.status == 0)
        chmod(path, 0o600)
        let good = bytes(path) ?? []
        #expect(try store(sb).readBytes(.default) == secret)

        func check(_ data: [UInt8], _ matches: (CredentialError) -> Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            put(path, data)
            expectError(matches, sourceLocation: sourceLocation) { _ = try store(sb).readBytes(.default) }
            #expect(bytes(path) == data, "file changed", sourceLocation: sourceLocation)
        }
        let corrupt: (CredentialError) -> Bool = { if case .storeCorrupt = $0 { return true }; return false }
        let wrongKey: (CredentialError) -> Bool = { if case .wrongKey = $0 { return true }; return false }
        check(Array(good.prefix(good.count / 2)), corrupt)
        check(Array(good.dropLast()), corrupt)
        for offset in [good.count - 1, good.count - 30] {
            var d = good; d[offset] ^= 0x01
            check(d, corrupt)
        }
        // The wrapped file key (stanza body) altered: the identity no longer matches.
        // Line 0 is the version, line 1 `-> X25519 SHARE`, line 2 the body (not its last character,
        // so the base64 stays canonical and only the ChaCha20-Poly1305 tag check can fail).
        let lines = good.split(separator: 10, maxSplits: 3, omittingEmptySubsequences: false)
        #expect(lines[1].starts(with: Array("-> X25519 ".utf8)))
        let bodyStart = lines[0].count + 1 + lines[1].count + 1
        var d = good; d[bodyStart + 2] = d[bodyStart + 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        check(d, wrongKey)

        // Wrong identity.
        put(path, good)
        let otherId = sb.root + "/other-identity"
        #expect(Harness.run(Self.keygen, ["-o", otherId], env: sb.env).status == 0)
        let savedId = bytes(idPath)!
        put(idPath, bytes(otherId)!)
        expectError(wrongKey) { _ = try store(sb).readBytes(.default) }
        #expect(bytes(path) == good)
        put(idPath, savedId)

        // Loose modes.
        chmod(path, 0o644)
        expectError({ $0 == .permissionsTooOpen(path: path) }) { _ = try store(sb).readBytes(.default) }
        expectError({ $0 == .permissionsTooOpen(path: path) }) { try store(sb).write(.default, bytes: [1]) }
        #expect(bytes(path) == good && mode(path) == 0o644)
        chmod(path, 0o600)
        chmod(idPath, 0o644)
        expectError({ $0 == .permissionsTooOpen(path: idPath) }) { _ = try store(sb).readBytes(.default) }
        #expect(bytes(path) == good && bytes(idPath) == savedId)
        chmod(idPath, 0o600)
        #expect(try store(sb).readBytes(.default) == secret)
    }

    @Test func symlinkAtStorePathRefused() throws {
        let sb = Sandbox(bus: .none)
        try store(sb).write(try Profile("real"), bytes: secret)
        let target = sb.dataDir + "/real.age"
        let before = bytes(target)
        let link = sb.dataDir + "/default.age"
        symlink(target, link)
        let failure: (CredentialError) -> Bool = { if case .storeFailure(let m) = $0 { return m.contains("symbolic link") }; return false }
        expectError(failure) { _ = try store(sb).readBytes(.default) }
        expectError(failure) { try store(sb).write(.default, bytes: [1]) }
        #expect(bytes(target) == before)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == target)
    }

    @Test func umaskZeroStillYieldsPrivateModes() throws {
        let sb = Sandbox(bus: .none)
        // Only HOME: the store creates ~/.local/share/… and ~/.config/… itself.
        let env = ["HOME": sb.env["HOME"]!]
        let old = umask(0)
        defer { umask(old) }
        try AgeFileStore(environment: env, interactive: false).write(.default, bytes: secret)
        umask(old)
        let home = env["HOME"]!
        #expect(mode(home + "/.local/share/chatgpt-credential") == 0o700)
        #expect(mode(home + "/.local/share/chatgpt-credential/default.age") == 0o600)
        #expect(mode(home + "/.config/chatgpt-credential") == 0o700)
        #expect(mode(home + "/.config/chatgpt-credential/identity") == 0o600)
        #expect(try AgeFileStore(environment: env, interactive: false).readBytes(.default) == secret)
    }

    /// What a process wrote to one pipe so far, collected as it arrives.
    final class Collected: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        let done = DispatchSemaphore(value: 0)
        init(_ handle: FileHandle) {
            DispatchQueue.global().async {
                while true {
                    let d = handle.availableData
                    if d.isEmpty { break }
                    self.lock.lock(); self.data.append(d); self.lock.unlock()
                }
                self.done.signal()
            }
        }
        var bytes: [UInt8] { lock.lock(); defer { lock.unlock() }; return Array(data) }
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    /// Runs `age ARGS` under a pseudo-terminal (util-linux `script`), since `age -p` and passphrase
    /// decryption read only from a terminal, typing each of `lines` once age has asked for it: the
    /// fact waited for is its next passphrase prompt on the terminal (script copies it to stdout;
    /// age reads the answer with echo off, so only prompts say "passphrase"). Standard input stays
    /// open until age has finished, as a person's terminal would.
    func ageOnTTY(_ sb: Sandbox, _ args: [String], lines: [String]) throws -> RunResult {
        func q(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let cmd = ([Self.age] + args).map(q).joined(separator: " ")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.script)
        p.arguments = ["-qec", cmd, "/dev/null"]
        p.environment = sb.env
        let input = Pipe(), output = Pipe(), errors = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = errors
        try p.run()
        let out = Collected(output.fileHandleForReading), err = Collected(errors.fileHandleForReading)
        func prompts() -> Int { out.text.components(separatedBy: "passphrase").count - 1 }
        for (i, line) in lines.enumerated() {
            guard Hostile.waitUntil(30, { prompts() > i || !p.isRunning }), p.isRunning else { break }
            input.fileHandleForWriting.write(Data((line + "\n").utf8))
        }
        let finished = Hostile.waitUntil(60) { !p.isRunning }
        if !finished { p.terminate() }
        try? input.fileHandleForWriting.close()
        p.waitUntilExit()
        out.done.wait()
        err.done.wait()
        return RunResult(status: p.terminationStatus, stdoutBytes: out.bytes, stderr: err.text, timedOut: !finished)
    }

    @Test(.enabled(if: haveAge && haveScript)) func passphraseModeInteropWithAgeP() throws {
        let sb = Sandbox(bus: .none)
        let pf = sb.root + "/passphrase"
        put(pf, Array("tr0ub4dor &3\n".utf8))
        let env = ["CHATGPT_CREDENTIAL_PASSPHRASE_FILE": pf]
        // Ours -> age -d (default work factor 18, as age -p uses).
        try store(sb, env).write(.default, bytes: secret)
        let path = sb.dataDir + "/default.age"
        #expect(bytes(path)?.starts(with: Array("age-encryption.org/v1\n-> scrypt ".utf8)) == true)
        #expect(try store(sb, env).readBytes(.default) == secret)
        let out = sb.root + "/out"
        let dec = try ageOnTTY(sb, ["-d", "-o", out, path], lines: ["tr0ub4dor &3"])
        #expect(dec.status == 0, "age -d: \(dec.stdout) \(dec.stderr)")
        #expect(bytes(out) == secret)

        // age -p -> ours.
        let input = sb.root + "/in"
        put(input, secret)
        let theirs = sb.dataDir + "/fromage.age"
        let enc = try ageOnTTY(sb, ["-p", "-o", theirs, input], lines: ["tr0ub4dor &3", "tr0ub4dor &3"])
        #expect(enc.status == 0, "age -p: \(enc.stdout) \(enc.stderr)")
        chmod(theirs, 0o600)
        #expect(try store(sb, env).readBytes(try Profile("fromage")) == secret)
        put(pf, Array("wrong\n".utf8))
        let before = bytes(theirs)
        expectError({ if case .wrongKey = $0 { return true }; return false }) { _ = try store(sb, env).readBytes(try Profile("fromage")) }
        #expect(bytes(theirs) == before)
    }
}
