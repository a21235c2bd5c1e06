import Foundation
import Testing
@testable import AccessCache
@testable import CredentialCore
@testable import SystemRuntime
import TestSupport

/// The normalised store identities (man page ACCESS CACHE): every spelling of one bus or one
/// encrypted file is one identity, and different stores stay different.
@Suite struct StoreIdentityTests {
    typealias N = StoreIdentity

    // MARK: the bus address

    @Test func theGuidAndOtherKeysAreDropped() {
        #expect(N.normalisedBusAddress("unix:path=/nonexistent/ccred/bus,guid=0123456789abcdef") == "unix:path=/nonexistent/ccred/bus")
        #expect(N.normalisedBusAddress("unix:guid=1,path=/nonexistent/ccred/bus") == "unix:path=/nonexistent/ccred/bus")
        #expect(N.normalisedBusAddress("unix:abstract=/tmp/dbus-XYZ,guid=abc") == "unix:abstract=/tmp/dbus-XYZ")
        #expect(N.normalisedBusAddress("tcp:port=4000,host=127.0.0.1,guid=1,bind=*") == "tcp:host=127.0.0.1,port=4000")
        #expect(N.normalisedBusAddress("launchd:guid=1,env=DBUS_LAUNCHD") == "launchd:env=DBUS_LAUNCHD")
    }

    @Test func escapesAreCanonical() {
        // %2f is "/", and an escaped letter is the letter; a space stays escaped (as GDBus writes it).
        #expect(N.normalisedBusAddress("unix:path=%2fnonexistent%2Fccred/b%75s") == "unix:path=/nonexistent/ccred/bus")
        #expect(N.normalisedBusAddress("unix:path=/nonexistent/a b/bus") == "unix:path=/nonexistent/a%20b/bus")
        #expect(N.normalisedBusAddress("unix:path=/nonexistent/a%20b/bus") == "unix:path=/nonexistent/a%20b/bus")
    }

    @Test func differentBusesStayDifferent() {
        let a = N.normalisedBusAddress("unix:path=/nonexistent/ccred/bus1")
        #expect(a != nil)
        #expect(a != N.normalisedBusAddress("unix:path=/nonexistent/ccred/bus2"))
        #expect(a != N.normalisedBusAddress("unix:abstract=/nonexistent/ccred/bus1"))
        #expect(N.normalisedBusAddress("tcp:host=127.0.0.1,port=1") != N.normalisedBusAddress("tcp:host=127.0.0.1,port=2"))
        // Several entries: each normalised, the order kept (GDBus tries them in order).
        #expect(N.normalisedBusAddress("unix:path=/n/a,guid=1;unix:abstract=b") == "unix:path=/n/a;unix:abstract=b")
    }

    @Test(arguments: ["", "nocolon", ":path=/x", "unix:path", "unix:=x", "unix:path=%zz", "unix:path=%2", "unix:path=%+f"])
    func unparsableAddressesAreNotCached(_ address: String) {
        #expect(N.normalisedBusAddress(address) == nil)
        #expect(N.secretService(bus: SessionBus(address: address)) == (address.isEmpty ? nil : nil))
    }

    @Test func aSocketPathIsItsRealPath() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: dir + "/real/bus", contents: nil))
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/real")
        let real = "unix:path=" + N.escapedAddressValue(dir + "/real/bus")
        for spelling in [dir + "/link/bus", dir + "/real/../real/bus", dir + "//real/./bus", dir + "/real/bus"] {
            #expect(N.normalisedBusAddress("unix:path=" + N.escapedAddressValue(spelling) + ",guid=42") == real, "\(spelling)")
        }
    }

    /// One bus, found three ways (the variable, with a guid and another spelling of the path;
    /// `$XDG_RUNTIME_DIR/bus`; `/run/user/UID/bus`, here under a stand-in root): one identity.
    @Test func oneBusFoundAnyWayIsOneIdentity() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let runtime = dir + "/users/\(geteuid())"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let socket = try #require(BoundUnixSocket(at: runtime + "/bus"))
        defer { withExtendedLifetime(socket) {} }
        let none = dir + "/none"
        let ways = [
            SessionBus(address: "unix:guid=7,path=" + N.escapedAddressValue(dir + "/users/./\(geteuid())//bus"), perUserRuntimeRoot: none),
            SessionBus(runtimeDirectory: runtime, perUserRuntimeRoot: none),
            SessionBus(perUserRuntimeRoot: dir + "/users"),
        ]
        let identities = ways.map { N.secretService(bus: $0) }
        #expect(identities[0] != nil)
        #expect(Set(identities.map { "\(String(describing: $0))" }).count == 1, "\(identities)")
        #expect(N.secretService(bus: SessionBus(perUserRuntimeRoot: none)) == nil)
    }

    // MARK: the encrypted file

    @Test func theFileIsItsDirectorysRealPathPlusItsName() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/data/chatgpt-credential", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir + "/alias", withDestinationPath: dir + "/data")
        let expected = StoreIdentity.file(path: dir + "/data/chatgpt-credential/work.age")
        for spelling in [dir + "/data/chatgpt-credential/work.age", dir + "/data//chatgpt-credential/work.age",
                         dir + "/alias/chatgpt-credential/work.age", dir + "/data/../data/chatgpt-credential/work.age",
                         dir + "/./data/chatgpt-credential/./work.age"] {
            #expect(N.file(normalising: spelling) == expected, "\(spelling)")
        }
        // The file itself need not exist (a symlink there is the store's to refuse, not followed here).
        #expect(N.file(normalising: dir + "/data/chatgpt-credential/other.age") == .file(path: dir + "/data/chatgpt-credential/other.age"))
        // No directory yet, a relative path: nothing to cache.
        #expect(N.file(normalising: dir + "/missing/work.age") == nil)
        #expect(N.file(normalising: "relative/work.age") == nil)
        #expect(N.file(normalising: dir + "/data/") == nil)
    }

    /// The same key is reached from a data home written with a trailing slash (Paths appends to it).
    @Test func aTrailingSlashInTheDataHomeIsTheSameFile() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/chatgpt-credential", withIntermediateDirectories: true)
        let plain = Paths(dataHome: dir).encryptedFile(for: .default)!
        let slash = Paths(dataHome: dir + "/").encryptedFile(for: .default)!
        #expect(plain != slash)
        #expect(N.file(normalising: plain) == N.file(normalising: slash))
        #expect(N.file(normalising: plain) != nil)
    }

    static func tempDir() throws -> String {
        var template = Array("/tmp/ccred-ident-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw CocoaError(.fileWriteUnknown) }
        return String(cString: p)
    }
}
