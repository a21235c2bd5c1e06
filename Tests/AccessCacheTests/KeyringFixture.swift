import Foundation
import Testing
import Secrets
@testable import AccessCache
@testable import CredentialCore
import CSeccompTestSupport
import TestSupport

/// What the keyring tests share: the `keyctl` tool (keyutils) to look at keys from outside the
/// process, identities no other test run can collide with (engineers and CI run the suite at the
/// same time, as the same user, sharing one user keyring), and the removal of every key made.
final class KeyringFixture: Sendable {
    static let keyctl = "/usr/bin/keyctl"
    static let setpriv = "/usr/bin/setpriv"

    /// Part of every identity made here, so `cleanup()` finds every entry made for them.
    let run = UUID().uuidString.lowercased()

    func fileIdentity(_ name: String = "default") -> StoreIdentity {
        .file(path: "/nonexistent/ccred-cache-test-\(run)/\(name).age")
    }

    func busIdentity(_ name: String = "bus") -> StoreIdentity {
        .secretService(busAddress: "unix:path=/nonexistent/ccred-cache-test-\(run)/\(name),guid=\(run)")
    }

    func description(_ identity: StoreIdentity, _ profile: Profile) -> String {
        identity.keyDescription(for: profile)!
    }

    /// The serial of the entry in the user keyring, found with `keyctl search` (another process).
    func serial(_ identity: StoreIdentity, _ profile: Profile) -> Int32? {
        let r = Self.tool(Self.keyctl, ["search", "@u", "user", description(identity, profile)])
        guard r.status == 0 else { return nil }
        return Int32(r.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Removes every key of this run from the user keyring (all identities made here carry `run`).
    func cleanup() {
        var secret = SecretBytes(zeros: 64 * 1024)
        // Reading a keyring yields the serials it links.
        guard case .success(let n) = KernelKeyring.read(KernelKeyring.userKeyring, into: &secret) else { return }
        let buffer = secret.unsafeArray()
        let serials = stride(from: 0, to: min(n, buffer.count) / 4 * 4, by: 4).map { i in
            buffer[i..<(i + 4)].withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }
        }
        for key in serials {
            guard case .success(let d) = KernelKeyring.describe(key), d.description.contains(run) else { continue }
            if case .failure = KernelKeyring.invalidate(key) { _ = KernelKeyring.unlink(key, from: KernelKeyring.userKeyring) }
        }
    }

    // MARK: entries

    static func entry(expiresIn: Int64 = 7200, now: Int64 = Clock.now(), tag: String = "a") -> AccessCacheEntry {
        AccessCacheEntry(accessToken: SecretToken(copying: "eyJhbGciOiJub25lIn0.access-\(tag).sig"), accountId: "acct-\(tag)",
                         idToken: SecretToken(copying: "eyJhbGciOiJub25lIn0.id-\(tag).sig"), expiresAt: now + expiresIn,
                         lastRefresh: now - 3600, email: "\(tag)@example.com", plan: "plus")
    }

    // MARK: processes

    struct Result {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
        var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Runs a tool to completion (stdin from `input`, or /dev/null).
    static func tool(_ path: String, _ args: [String], input: [UInt8]? = nil) -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C"]
        let out = Pipe(), err = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = input == nil ? FileHandle.nullDevice : inp
        do { try p.run() } catch { return Result(status: -1, stdout: [], stderr: "cannot run \(path): \(error)") }
        if let input {
            inp.fileHandleForWriting.write(Data(input))
            try? inp.fileHandleForWriting.close()
        }
        // Small outputs: stderr on another thread so that neither pipe can fill up.
        final class Box: @unchecked Sendable { var data = Data() }
        let errBox = Box()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { errBox.data = err.fileHandleForReading.readDataToEndOfFile(); done.signal() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: Array(outData), stderr: String(decoding: errBox.data, as: UTF8.self))
    }

    /// Runs `body` on a thread of its own under a seccomp filter that fails `calls` with `error`,
    /// as a container's profile would; the thread (and its filter) ends afterwards.
    static func onRefusingThread(calls: Int32, error: Int32, _ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let rc = cseccomp_refuse_keyring_calls(calls, error)
            #expect(rc == 0, "cannot install the seccomp filter: \(String(cString: strerror(errno)))")
            if rc == 0 { body() }
            done.signal()
        }
        thread.start()
        done.wait()
    }
}

extension CachePayload {
    /// The payload as a plain array, for byte-exact assertions in tests.
    static func bytes(_ entry: AccessCacheEntry) -> [UInt8]? {
        guard let payload = build(entry) else { return nil }
        return payload.unsafeArray()
    }

    static func parse(_ bytes: [UInt8]) -> AccessCacheEntry? { parse(SecretBytes(copying: bytes))?.entry }
    static func storeVersion(_ bytes: [UInt8]) -> [UInt8]? { parse(SecretBytes(copying: bytes))?.storeVersion }
}
