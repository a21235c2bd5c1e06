/// Where the D-Bus session bus is, as libsecret (GDBus) looks for it: `DBUS_SESSION_BUS_ADDRESS`,
/// else `$XDG_RUNTIME_DIR/bus` (man page ENVIRONMENT). Read once by the executable
/// (`CLI/Settings.swift`); the Secret Service store and the access cache's store identity take
/// this value, never the environment.
public struct SessionBus: Sendable, Equatable {
    /// `DBUS_SESSION_BUS_ADDRESS`; nil when unset or empty.
    public var address: String?
    /// `XDG_RUNTIME_DIR` as given (not checked to be absolute here); nil when unset or empty.
    public var runtimeDirectory: String?

    public init(address: String? = nil, runtimeDirectory: String? = nil) {
        self.address = address
        self.runtimeDirectory = runtimeDirectory
    }
}
