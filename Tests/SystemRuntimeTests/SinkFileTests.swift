import Foundation
import Testing
@testable import SystemRuntime
@testable import CredentialCore
@testable import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The sink file primitives (man page chatgpt-credential(7), SINKS): compare-and-swap rewrites and
/// removals, and the checks of where a sink may be written.
@Suite struct SinkFileTests {
    static func directory() -> String {
        var template = Array("/tmp/ccred-sinkfile-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    static func write(_ path: String, _ text: String) { _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) }
    static func read(_ path: String) -> String? { FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } }
    static func digest(_ text: String) -> String { Array(text.utf8).withUnsafeBytes { SinkRendering.digest($0) } }
    static func entries(_ dir: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() }

    @Test func aFileStillOursIsReplacedAt0600AndNoTempIsLeft() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/tok"
        Self.write(path, "old\n")
        let outcome = try SinkFile.replace(path, with: SecretBytes(copying: "new\n".utf8), isOurs: { $0 == Self.digest("old\n") })
        #expect(outcome == .done)
        #expect(Self.read(path) == "new\n")
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(Self.entries(dir) == ["tok"])
    }

    @Test func aFileAnotherProgramWroteIsLeftAsItIs() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/tok"
        Self.write(path, "theirs\n")
        let outcome = try SinkFile.replace(path, with: SecretBytes(copying: "new\n".utf8), isOurs: { $0 == Self.digest("ours\n") })
        #expect(outcome == .changed)
        #expect(Self.read(path) == "theirs\n")
        #expect(Self.entries(dir) == ["tok"])
    }

    @Test func aRemovedFileIsNotRecreated() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        let outcome = try SinkFile.replace(dir + "/tok", with: SecretBytes(copying: "new\n".utf8), isOurs: { _ in true })
        #expect(outcome == .absent)
        #expect(Self.entries(dir).isEmpty)
    }

    @Test func aSymlinkStandingThereIsSwappedBackNotFollowed() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        Self.write(dir + "/target", "keep\n")
        symlink(dir + "/target", dir + "/tok")
        let outcome = try SinkFile.replace(dir + "/tok", with: SecretBytes(copying: "new\n".utf8), isOurs: { _ in true })
        #expect(outcome == .changed)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/tok")) == dir + "/target")
        #expect(Self.read(dir + "/target") == "keep\n")
        #expect(Self.entries(dir) == ["target", "tok"])
    }

    @Test func removeTakesOnlyOurFile() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        Self.write(dir + "/ours", "ours\n")
        Self.write(dir + "/theirs", "theirs\n")
        #expect(try SinkFile.remove(dir + "/ours", isOurs: { $0 == Self.digest("ours\n") }) == .done)
        #expect(try SinkFile.remove(dir + "/theirs", isOurs: { $0 == Self.digest("ours\n") }) == .changed)
        #expect(try SinkFile.remove(dir + "/gone", isOurs: { _ in true }) == .absent)
        #expect(Self.entries(dir) == ["theirs"])
        #expect(Self.read(dir + "/theirs") == "theirs\n")
    }

    @Test func aDirectoryOthersCanWriteIsRefusedWithExit2() throws {
        let dir = Self.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir, 0o777)
        do {
            try SinkFile.checkDirectory(dir, create: false)
            Issue.record("a world-writable directory was accepted")
        } catch let e as CredentialError {
            #expect(e.exitCode == 2, "usage (exit 2) expected: \(e)")
        }
        chmod(dir, 0o755)
        #expect(try SinkFile.checkDirectory(dir, create: false))
    }
}

/// A rewrite racing another program that keeps replacing the file: the other program's newest
/// file is always the one left, never ours (the rename-exchange and its check, man page SINKS).
@Suite struct SinkFileRaceTests {
    @Test func aConcurrentWriterIsNeverLost() throws {
        let dir = SinkFileTests.directory()
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/tok"
        SinkFileTests.write(path, "theirs-0\n")
        final class State: @unchecked Sendable { let lock = NSLock(); var stop = false; var last = "theirs-0\n" }
        let state = State()
        let writer = Thread {
            for n in 1...2000 {
                let text = "theirs-\(n)\n"
                SinkFileTests.write(dir + "/.writer", text)
                rename(dir + "/.writer", path)
                state.lock.lock(); state.last = text; state.lock.unlock()
            }
            state.lock.lock(); state.stop = true; state.lock.unlock()
        }
        writer.start()
        var outcomes: [SinkFile.Outcome] = []
        var after = 0
        while after < 20 { // while it writes, and a few times once it has stopped
            outcomes.append(try SinkFile.replace(path, with: SecretBytes(copying: "ours\n".utf8), isOurs: { $0 == SinkFileTests.digest("ours\n") }))
            state.lock.lock(); if state.stop { after += 1 }; state.lock.unlock()
        }
        #expect(outcomes.allSatisfy { $0 == .changed })
        state.lock.lock(); let last = state.last; state.lock.unlock()
        #expect(SinkFileTests.read(path) == last, "the writer's newest file was lost")
        #expect(SinkFileTests.entries(dir).filter { $0.contains(".tmp-") }.isEmpty)
    }
}
