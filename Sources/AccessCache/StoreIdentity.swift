import CredentialCore
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// Which store an entry stands for, so that a profile's credential in one Secret Service (or one
/// file) is never answered from an entry written for another: two D-Bus sessions, two data homes.
public enum StoreIdentity: Sendable, Equatable {
    /// The session bus the Secret Service is reached on, as libsecret (GDBus) finds it,
    /// normalised (`normalisedBusAddress`).
    case secretService(busAddress: String)
    /// The encrypted file's real path (`file(normalising:)`).
    case file(path: String)

    /// The kernel caps a key's description at 4095 bytes (KEY_MAX_DESC_SIZE, with the NUL).
    static let maxDescriptionBytes = 4095
    /// `v2`: the payload format it was named for. Version 3 of the payload (the store's version
    /// added) kept the name, so that a change made by this binary still revokes the entries an
    /// older one still running (a broker across an upgrade) would serve; each reads the other's
    /// payload as damaged, a miss, and refills the entry in its own format.
    static let descriptionPrefix = "chatgpt-credential:v2:"

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

    /// The Secret Service's identity: the session bus it is reached on, found as the store finds
    /// it (`SessionBus.find`: the variable, `$XDG_RUNTIME_DIR/bus`, `/run/user/UID/bus`) and
    /// normalised (`normalisedBusAddress`), so every spelling of one bus, and every way of finding
    /// it, is one identity. Nil when no bus is found or the address cannot be parsed: then the
    /// Secret Service is not cached. Touches nothing but a stat or two and a realpath, so `auto`
    /// can name the store without loading libsecret.
    public static func secretService(bus: SessionBus) -> StoreIdentity? {
        bus.find().flatMap { normalisedBusAddress($0.address) }.map { .secretService(busAddress: $0) }
    }

    /// The file store's identity: the encrypted file's real path — the real path of its
    /// directory plus the file's name — so a trailing slash, a `..` or a symlink in
    /// XDG_DATA_HOME names the same entry. Nil when the directory does not exist (nothing is
    /// stored there yet) or the path is not absolute.
    public static func file(normalising path: String) -> StoreIdentity? {
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/") else { return nil }
        let name = String(path[path.index(after: slash)...])
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        let dir = slash == path.startIndex ? "/" : String(path[..<slash])
        guard let real = realPath(dir) else { return nil }
        return .file(path: (real == "/" ? "" : real) + "/" + name)
    }

    static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    /// A D-Bus address reduced to what names the bus (man page ACCESS CACHE): each
    /// `;`-separated entry keeps its transport and the keys that say where to connect — for
    /// `unix`, `path` (its real path when it exists) or `abstract`; for `tcp` and `nonce-tcp`,
    /// `host`, `port` and `family`; for anything else every key but `guid` — with values
    /// unescaped and escaped again canonically and keys in a fixed order. So `guid=…`, another
    /// key order, `%2f` for `/`, or a symlinked socket directory give the same identity. Nil when
    /// the address cannot be parsed (no transport, a key without `=`, a bad escape).
    public static func normalisedBusAddress(_ address: String) -> String? {
        guard let parsed = parsedBusAddress(address) else { return nil }
        var entries: [String] = []
        for (transport, parsedKeys) in parsed {
            var keys = parsedKeys
            let kept: [String]
            switch transport {
            case "unix":
                if let path = keys["path"] {
                    keys["path"] = path.hasPrefix("/") ? (realPath(path) ?? path) : path
                    kept = ["path"]
                } else if keys["abstract"] != nil {
                    kept = ["abstract"]
                } else {
                    kept = keys.keys.filter { $0 != "guid" }.sorted()
                }
            case "tcp", "nonce-tcp":
                kept = ["host", "port", "family"].filter { keys[$0] != nil }
            default:
                kept = keys.keys.filter { $0 != "guid" }.sorted()
            }
            entries.append(transport + ":" + kept.map { $0 + "=" + escapedAddressValue(keys[$0]!) }.joined(separator: ","))
        }
        return entries.joined(separator: ";")
    }

    /// The socket path of each entry of a D-Bus address (nil for an entry that names none: an
    /// abstract socket, tcp), as given; nil when the address cannot be parsed.
    public static func socketPaths(ofBusAddress address: String) -> [String?]? {
        parsedBusAddress(address)?.map { $0.transport == "unix" ? $0.keys["path"] : nil }
    }

    /// A D-Bus address's `;`-separated entries, each its transport and its keys with values
    /// unescaped; nil when it cannot be parsed (no entry, no transport, a key without `=`, a bad
    /// escape).
    static func parsedBusAddress(_ address: String) -> [(transport: String, keys: [String: String])]? {
        var entries: [(transport: String, keys: [String: String])] = []
        for entry in address.split(separator: ";", omittingEmptySubsequences: true) {
            guard let colon = entry.firstIndex(of: ":"), colon != entry.startIndex else { return nil }
            var keys: [String: String] = [:]
            for pair in entry[entry.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: true) {
                guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex,
                      let value = unescapedAddressValue(pair[pair.index(after: eq)...]) else { return nil }
                keys[String(pair[..<eq])] = value
            }
            entries.append((String(entry[..<colon]), keys))
        }
        return entries.isEmpty ? nil : entries
    }

    /// The inverse of `escapedAddressValue`: `%XX` becomes the byte; nil for a bad escape.
    static func unescapedAddressValue(_ value: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(value.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == UInt8(ascii: "%") else { out.append(b); continue }
            let hex = bytes.prefix(2)
            guard hex.count == 2, hex.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }),
                  let v = UInt8(String(decoding: hex, as: UTF8.self), radix: 16) else { return nil }
            out.append(v)
            bytes = bytes.dropFirst(2)
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func escapedAddressValue(_ value: String) -> String { SessionBus.escapedAddressValue(value) }
}
