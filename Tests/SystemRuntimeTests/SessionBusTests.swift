import Foundation
import Testing
@testable import SystemRuntime
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Finding the session bus as a login session does (man page STORES, "Finding the Secret
/// Service"): the variable, then `$XDG_RUNTIME_DIR/bus`, then `/run/user/UID/bus` — a socket of
/// this user each time. `perUserRuntimeRoot` stands in for /run/user.
@Suite struct SessionBusTests {
    /// A directory with `run/` (an XDG_RUNTIME_DIR) and `users/UID/` (a /run/user), removed after.
    final class Place {
        let root: String
        var runtime: String { root + "/run" }
        var users: String { root + "/users" }
        var perUser: String { users + "/\(geteuid())" }
        private var sockets: [BoundUnixSocket] = []

        init() throws {
            root = NSTemporaryDirectory() + "ccred-session-bus-\(UUID().uuidString)"
            for d in [runtime, perUser] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        }

        /// A UNIX socket bound at `path`.
        func socket(at path: String) throws {
            sockets.append(try #require(BoundUnixSocket(at: path), "bind \(path): \(errno)"))
        }

        func bus(address: String? = nil, runtime: String? = nil) -> SessionBus {
            SessionBus(address: address, runtimeDirectory: runtime, perUserRuntimeRoot: users)
        }

        deinit {
            sockets.removeAll()
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    @Test func theVariableWinsAsGiven() throws {
        let p = try Place()
        try p.socket(at: p.runtime + "/bus")
        try p.socket(at: p.perUser + "/bus")
        #expect(p.bus(address: "unix:path=/elsewhere,guid=1", runtime: p.runtime).find()
                == SessionBus.Found(address: "unix:path=/elsewhere,guid=1", source: .variable))
    }

    @Test func thenTheRuntimeDirectorysSocketThenTheUsersOwn() throws {
        let p = try Place()
        #expect(p.bus(runtime: p.runtime).find() == nil)
        try p.socket(at: p.perUser + "/bus")
        #expect(p.bus(runtime: p.runtime).find() == SessionBus.Found(address: SessionBus.unixAddress(p.perUser + "/bus"), source: .perUserRuntimeDirectory))
        #expect(p.bus().find()?.source == .perUserRuntimeDirectory) // XDG_RUNTIME_DIR unset
        try p.socket(at: p.runtime + "/bus")
        #expect(p.bus(runtime: p.runtime).find() == SessionBus.Found(address: SessionBus.unixAddress(p.runtime + "/bus"), source: .runtimeDirectory))
        #expect(p.bus(runtime: p.runtime + "/").find()?.source == .runtimeDirectory)
        #expect(p.bus(runtime: "relative").find()?.source == .perUserRuntimeDirectory) // a relative one is ignored
    }

    @Test func onlyASocketOfThisUserIsABus() throws {
        let p = try Place()
        // A regular file, and a symlink to a socket, at /run/user/UID/bus: neither is logind's bus.
        _ = FileManager.default.createFile(atPath: p.perUser + "/bus", contents: nil)
        #expect(p.bus().find() == nil)
        try FileManager.default.removeItem(atPath: p.perUser + "/bus")
        try p.socket(at: p.root + "/real-bus")
        try FileManager.default.createSymbolicLink(atPath: p.perUser + "/bus", withDestinationPath: p.root + "/real-bus")
        #expect(p.bus().find() == nil)
        // $XDG_RUNTIME_DIR/bus is looked at as GDBus does: through a symlink.
        try FileManager.default.createSymbolicLink(atPath: p.runtime + "/bus", withDestinationPath: p.root + "/real-bus")
        #expect(p.bus(runtime: p.runtime).find()?.source == .runtimeDirectory)
        // Another user's socket is not this user's bus.
        guard geteuid() == 0 else { return }
        #expect(lchown(p.root + "/real-bus", 65534, 65534) == 0)
        #expect(p.bus(runtime: p.runtime).find() == nil)
    }

    @Test func theReasonNamesEveryPlaceLookedAt() throws {
        let p = try Place()
        #expect(p.bus().notFoundReason
                == "no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, XDG_RUNTIME_DIR is unset, \(p.perUser)/bus is not a socket of this user)")
        #expect(p.bus(runtime: p.runtime).notFoundReason
                == "no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, \(p.runtime)/bus is not a socket of this user, \(p.perUser)/bus is not a socket of this user)")
        #expect(SessionBus(userID: 1234).notFoundReason.hasSuffix(", /run/user/1234/bus is not a socket of this user)"))
    }

    @Test func aFoundSocketsAddressIsEscaped() {
        #expect(SessionBus.unixAddress("/tmp/a b/bus,x") == "unix:path=/tmp/a%20b/bus%2Cx")
    }
}
