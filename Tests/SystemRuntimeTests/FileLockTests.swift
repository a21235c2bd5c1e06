import Foundation
import Testing
@testable import CredentialCore
@testable import SystemRuntime
@testable import Secrets

@Suite struct FileLockTests {
    /// Found while auditing number conversions for the fuzz work (2026-11-29):
    /// CHATGPT_CREDENTIAL_LOCK_TIMEOUT=nan passed min/max clamping as NaN and `acquire` trapped in
    /// `Int64(timeout * 1000)`. Any timeout must give a lock (here: an uncontended one), never a crash.
    @Test(arguments: [Double.nan, -Double.nan, Double.infinity, -Double.infinity, 1e300, -5, 0])
    func anyTimeoutAcquiresAFreeLock(_ timeout: Double) throws {
        var template = Array("/tmp/ccred-lock-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lock = try FileLock.acquire(path: dir + "/default.lock", profile: .default, timeout: timeout)
        lock.release()
    }

    // MARK: the lock directory (man page FILES)

    static func tempDir() -> String {
        var template = Array("/tmp/ccred-lock-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    static func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    /// The place depends on the uid alone: never on XDG_RUNTIME_DIR, HOME or XDG_DATA_HOME.
    @Test func theLockDirectoryDependsOnTheUidAlone() {
        let uid = geteuid()
        let expected: String = {
            var st = stat()
            let run = "/run/user/\(uid)"
            if lstat(run, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid, st.st_mode & 0o022 == 0 {
                return run + "/chatgpt-credential"
            }
            return "/tmp/chatgpt-credential-\(uid)"
        }()
        for env in [[:], ["XDG_RUNTIME_DIR": "/nonexistent/run"], ["XDG_RUNTIME_DIR": "/tmp", "HOME": "/root"],
                    ["XDG_DATA_HOME": "/elsewhere/", "XDG_RUNTIME_DIR": "relative"]] {
            let paths = Paths(home: env["HOME"], dataHome: env["XDG_DATA_HOME"], runtimeDirectory: env["XDG_RUNTIME_DIR"])
            #expect(paths.lockDirectory() == expected, "\(env)")
            #expect(paths.lockFile(for: .default) == expected + "/default.lock")
        }
        // A uid without a logind directory: the /tmp place, named by the uid.
        #expect(Paths.lockDirectory(uid: 4_000_000_123) == "/tmp/chatgpt-credential-4000000123")
    }

    @Test func aMissingLockDirectoryIsCreatedPrivateWhateverTheUmask() throws {
        let parent = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let old = umask(0o277)
        defer { umask(old) }
        let lock = try FileLock.acquire(path: parent + "/locks/default.lock", profile: .default, timeout: 1)
        lock.release()
        #expect(Self.mode(parent + "/locks") == 0o700)
        #expect(Self.mode(parent + "/locks/default.lock") & 0o077 == 0)
    }

    /// Anything but this user's private directory is refused with exit 5 and left exactly as it
    /// was: a group- or other-writable (or readable) directory, a symlink (even to a good
    /// directory), a regular file; and (as root) another user's directory.
    @Test(arguments: ["group-writable", "other-readable", "symlink", "file", "foreign"])
    func aLockDirectoryThatIsNotPrivateIsRefusedAndLeftAlone(_ kind: String) throws {
        if kind == "foreign" && geteuid() != 0 { return } // chown needs root
        let parent = Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let dir = parent + "/locks"
        switch kind {
        case "group-writable": mkdir(dir, 0o700); chmod(dir, 0o770)
        case "other-readable": mkdir(dir, 0o700); chmod(dir, 0o704)
        case "symlink": mkdir(parent + "/real", 0o700); symlink(parent + "/real", dir)
        case "file": close(open(dir, O_CREAT | O_WRONLY, 0o600))
        default: mkdir(dir, 0o700); chown(dir, 65534, 65534)
        }
        let before = Self.mode(dir)
        do {
            _ = try FileLock.open(path: dir + "/default.lock")
            Issue.record("\(kind): the lock directory was used")
        } catch let e as CredentialError {
            #expect(e.exitCode == 5, "\(e)")
            #expect(e.message.contains(dir), "\(e.message)")
            #expect(!e.message.contains("\n"))
        }
        #expect(Self.mode(dir) == before) // never chmod'ed
        #expect(!FileManager.default.fileExists(atPath: parent + "/real/default.lock")) // never followed
        var st = stat()
        if kind == "foreign" { #expect(lstat(dir, &st) == 0 && st.st_uid == 65534) } // never chown'ed
    }
}
