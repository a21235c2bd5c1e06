import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// Which store an entry stands for, so that a profile's credential in one Secret Service (or one
/// file) is never answered from an entry written for another: two D-Bus sessions, two data homes.
public enum StoreIdentity: Sendable, Equatable {
    /// The session bus the Secret Service is reached on, as libsecret (GDBus) finds it.
    case secretService(busAddress: String)
    /// The encrypted file's absolute path.
    case file(path: String)

    /// The kernel caps a key's description at 4095 bytes (KEY_MAX_DESC_SIZE, with the NUL).
    static let maxDescriptionBytes = 4095
    /// Versioned with the payload format (`CachePayload.version`): another format never reads
    /// this one's keys, it simply does not find them.
    static let descriptionPrefix = "chatgpt-credential:v\(CachePayload.version):"

    /// The key's description: `chatgpt-credential:v2:PROFILE:secret-service:ADDRESS` or
    /// `chatgpt-credential:v2:PROFILE:file:PATH`. A profile name has no `:`, so the profile and
    /// the identity cannot be confused. Nil when the identity cannot be a description (a relative
    /// path, a NUL or control byte, too long): such a store is simply not cached.
    func keyDescription(for profile: Profile) -> String? {
        let identity: String
        switch self {
        case .secretService(let address):
            guard !address.isEmpty else { return nil }
            identity = "secret-service:" + address
        case .file(let path):
            guard path.hasPrefix("/") else { return nil }
            identity = "file:" + path
        }
        let description = Self.descriptionPrefix + profile.name + ":" + identity
        guard description.utf8.count <= Self.maxDescriptionBytes,
              !description.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        return description
    }

    /// The Secret Service's identity as GDBus finds the session bus: `DBUS_SESSION_BUS_ADDRESS`,
    /// else `$XDG_RUNTIME_DIR/bus` when it is a socket of this user. Nil when neither applies
    /// (no bus, or one GDBus would autolaunch): then the Secret Service is not cached. Touches
    /// nothing but one stat, so `auto` can name the store without loading libsecret.
    public static func secretService(environment: [String: String]) -> StoreIdentity? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty {
            return .secretService(busAddress: address)
        }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        let socket = runtime + "/bus"
        var st = stat()
        guard stat(socket, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK, st.st_uid == geteuid() else { return nil }
        return .secretService(busAddress: "unix:path=" + escapedAddressValue(socket))
    }

    /// D-Bus address value escaping (what `g_dbus_address_escape_value` does): bytes outside
    /// `[-0-9A-Za-z_/\\.*]` become `%XX`.
    static func escapedAddressValue(_ value: String) -> String {
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
