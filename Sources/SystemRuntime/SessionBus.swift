#if canImport(Glibc)
import Glibc
#endif

/// Where the D-Bus session bus is, found the way a login session finds it (man page STORES,
/// "Finding the Secret Service"; ENVIRONMENT): `DBUS_SESSION_BUS_ADDRESS`, else
/// `$XDG_RUNTIME_DIR/bus`, else `/run/user/UID/bus` (what logind and dbus-user-session make), so
/// cron, `su -`, socket activation and a stripped service environment reach the desktop's
/// keyring. The variables are read once by the executable (`CLI/Settings.swift`); `find()` looks
/// at the sockets. The Secret Service store connects to what `find()` returns and the access
/// cache's store identity is made from it, so both name one bus whichever way it was found.
public struct SessionBus: Sendable, Equatable {
    /// `DBUS_SESSION_BUS_ADDRESS`; nil when unset or empty.
    public var address: String?
    /// `XDG_RUNTIME_DIR` as given (not checked to be absolute here); nil when unset or empty.
    public var runtimeDirectory: String?
    /// The user whose bus is looked for: the effective uid (the owner every socket found must have).
    public var userID: uid_t
    /// The directory holding one runtime directory per uid (logind's); a test may name another.
    public var perUserRuntimeRoot: String

    public init(address: String? = nil, runtimeDirectory: String? = nil, userID: uid_t = geteuid(),
                perUserRuntimeRoot: String = "/run/user") {
        self.address = address
        self.runtimeDirectory = runtimeDirectory
        self.userID = userID
        self.perUserRuntimeRoot = perUserRuntimeRoot
    }

    /// A bus found: the D-Bus address to connect to, and where it came from.
    public struct Found: Sendable, Equatable {
        public enum Source: Sendable, Equatable {
            /// `DBUS_SESSION_BUS_ADDRESS`, as given.
            case variable
            /// `$XDG_RUNTIME_DIR/bus`.
            case runtimeDirectory
            /// `/run/user/UID/bus`.
            case perUserRuntimeDirectory
        }
        public var address: String
        public var source: Source
    }

    /// `DBUS_SESSION_BUS_ADDRESS` when set; else `$XDG_RUNTIME_DIR/bus` when it is a socket owned
    /// by this user (stat, as GDBus looks there); else `/run/user/UID/bus` when it is itself a
    /// socket owned by this user (lstat: a symlink there is not logind's). Nil when none is: then
    /// there is no session bus to ask (an autolaunched one would not be the desktop's keyring).
    /// Costs at most two stats; nothing is connected to.
    public func find() -> Found? {
        if let address, !address.isEmpty { return Found(address: address, source: .variable) }
        if let socket = runtimeDirectorySocket, isUsersSocket(socket, follow: true) {
            return Found(address: Self.unixAddress(socket), source: .runtimeDirectory)
        }
        if isUsersSocket(perUserSocket, follow: false) {
            return Found(address: Self.unixAddress(perUserSocket), source: .perUserRuntimeDirectory)
        }
        return nil
    }

    /// Why `find()` found nothing, naming each place looked at (one clause, for messages).
    public var notFoundReason: String {
        let runtime = runtimeDirectorySocket.map { "\($0) is not a socket of this user" }
            ?? (runtimeDirectory == nil ? "XDG_RUNTIME_DIR is unset" : "XDG_RUNTIME_DIR is not an absolute path")
        return "no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS is unset, \(runtime), \(perUserSocket) is not a socket of this user)"
    }

    /// `$XDG_RUNTIME_DIR/bus` for an absolute runtime directory; nil otherwise.
    var runtimeDirectorySocket: String? {
        guard let dir = runtimeDirectory, dir.hasPrefix("/") else { return nil }
        return (dir.hasSuffix("/") ? dir : dir + "/") + "bus"
    }

    /// `/run/user/UID/bus`.
    var perUserSocket: String { perUserRuntimeRoot + "/\(userID)/bus" }

    private func isUsersSocket(_ path: String, follow: Bool) -> Bool {
        var st = stat()
        guard (follow ? stat(path, &st) : lstat(path, &st)) == 0 else { return false }
        return st.st_mode & S_IFMT == S_IFSOCK && st.st_uid == userID
    }

    /// The D-Bus address of a socket path: `unix:path=` and the path escaped.
    public static func unixAddress(_ path: String) -> String { "unix:path=" + escapedAddressValue(path) }

    /// D-Bus address value escaping (what `g_dbus_address_escape_value` does): bytes outside
    /// `[-0-9A-Za-z_/\\.*]` become `%XX`.
    public static func escapedAddressValue(_ value: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in value.utf8 {
            switch b {
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "/"), UInt8(ascii: "\\"), UInt8(ascii: "."), UInt8(ascii: "*"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
