import CredentialCore
import SystemRuntime
import OAuth
import UsageBackend
import Credentials
import AccessCache
import Broker
#if canImport(Glibc)
import Glibc
#endif

/// Every environment variable the tool reads (man page ENVIRONMENT), read once, at the
/// executable's edge (`main.swift`), into typed fields: the one place that looks at the
/// environment (ARCHITECTURE.md, "Rules of thumb"; `SettingsTests` fails when another file does).
/// A variable that is set but empty counts as unset. The modules below take the typed parts
/// (`Paths`, `SessionBus`, a timeout, an `IssuerConfig`), never the environment; what a child
/// inherits (`exec`'s program, the browser launcher) is `childEnvironment`, never read for a
/// setting.
public struct Settings {
    // MARK: defaults of the global options (flags win: `ArgumentParser`)

    /// `CHATGPT_CREDENTIAL_PROFILE`.
    public var profile: Profile?
    /// `CHATGPT_CREDENTIAL_STORE`.
    public var store: StoreChoice?
    /// `CHATGPT_CREDENTIAL_NONINTERACTIVE`: any value but empty, 0, false, no or off.
    public var nonInteractive = false
    /// `CHATGPT_CREDENTIAL_DEBUG` (`--verbose`): any value but empty, 0, false, no or off.
    public var debug = false
    /// `CHATGPT_CREDENTIAL_CACHE`: exactly `on` (true) or `off` (false).
    public var cacheEnabled: Bool?
    /// `CHATGPT_CREDENTIAL_CACHE_TTL`: whole seconds within `AccessCacheSettings.ttlRange`.
    public var cacheTTL: Int64?
    /// `CHATGPT_CREDENTIAL_BROKER`: `unix:/absolute/path` (client mode).
    package var broker: BrokerAddress?
    /// A client-mode `get`'s request the warm path already sent (main.swift takes it from
    /// CWarmPath at the edge; BrokerClient.get continues on its socket).
    package var brokerHandoff: BrokerHandoff?

    // MARK: where tokens may be sent (checked where the man page says: before any network I/O)

    /// `CHATGPT_CREDENTIAL_ISSUER`, or the default issuer. A refused value stays an error until a
    /// verb needs the issuer (`Runner` checks it before any verb but help and version): exit 2.
    public var issuer: Result<IssuerConfig, CredentialError> = .success(.default)
    /// `CHATGPT_CREDENTIAL_BACKEND`, or the default backend; `usage` checks it first: exit 2.
    public var backend: Result<BackendConfig, CredentialError> = .success(.default)

    // MARK: stores, locks

    /// `CHATGPT_CREDENTIAL_PASSPHRASE_FILE`, else the systemd credential
    /// `$CREDENTIALS_DIRECTORY/chatgpt-credential.passphrase` when it is there (a unit's
    /// `LoadCredential=`; man page, ENVIRONMENT). The store reads it once, into `SecretBytes`.
    public var passphraseFile: String?
    /// The name of the systemd credential that holds the passphrase.
    public static let passphraseCredential = "chatgpt-credential.passphrase"
    /// `CHATGPT_CREDENTIAL_DBUS_TIMEOUT`: seconds for each Secret Service call, instead of 3 or
    /// 30 (`Deadline.secretServiceSeconds`). A value it does not accept is ignored.
    public var dbusTimeout: Double?
    /// `CHATGPT_CREDENTIAL_LOCK_TIMEOUT`: seconds to wait for the profile's lock (nil: 60),
    /// clamped to 0...600; not a number (NaN) is ignored.
    public var lockTimeout: Double?
    /// `HOME`, `XDG_DATA_HOME`, `XDG_CONFIG_HOME` (`Paths` keeps only absolute ones; a relative
    /// XDG directory is made absolute here, from the current directory: man page ENVIRONMENT).
    public var home: String?
    public var dataHome: String?
    public var configHome: String?
    /// `XDG_RUNTIME_DIR`: `Paths.runtimeBase` and where the session bus may be.
    public var runtimeDirectory: String?
    /// `DBUS_SESSION_BUS_ADDRESS`.
    public var busAddress: String?

    // MARK: sign-in, Codex, usage, the broker

    /// `SSH_CONNECTION` or `SSH_TTY` is set: `login` defaults to the device flow.
    public var overSSH = false
    /// `DISPLAY` or `WAYLAND_DISPLAY` is set: a browser can be opened here.
    public var hasDisplay = false
    /// `BROWSER`: the programs that open the sign-in page, separated by ':'.
    public var browser: String?
    /// `CODEX_HOME`: where `store --from-codex` looks (else `~/.codex`).
    public var codexHome: String?
    /// `CHATGPT_LOCAL_HOME`: where ChatMock keeps its auth.json (else `~/.chatgpt-local`), for
    /// `sink add --format chatmock`'s default path.
    public var chatgptLocalHome: String?
    /// `NO_COLOR` is set: `usage` draws no bars or colour.
    public var noColor = false
    /// `TERM`.
    public var term: String?
    /// The character locale: the first of `LC_ALL`, `LC_CTYPE`, `LANG` that is set.
    public var locale: String?
    /// `LISTEN_PID` and `LISTEN_FDS` as numbers (systemd socket activation); nil: unset or not a number.
    public var listenPID: Int32?
    public var listenFDs: Int?

    // MARK: children

    /// The environment as this process received it, for what a child inherits (`exec`'s program,
    /// the browser launcher) and nothing else: no setting is read from it.
    public var childEnvironment: [String: String] = [:]

    /// Nothing set (unit tests set the fields they need).
    public init() {}

    /// Reads `environment` (the process's, as `main.swift` collected it). An invalid
    /// `CHATGPT_CREDENTIAL_PROFILE`, `_STORE`, `_CACHE`, `_CACHE_TTL` or `_BROKER` is a usage error
    /// (exit 2), in that order, before the command line is looked at, even when a flag would
    /// override it; a refused `_ISSUER` or `_BACKEND` is kept for the verb that needs it.
    public init(environment: [String: String]) throws {
        func value(_ name: String) -> String? {
            guard let v = environment[name], !v.isEmpty else { return nil }
            return v
        }
        func truthy(_ name: String) -> Bool {
            guard let v = value(name) else { return false }
            return !["0", "false", "no", "off"].contains(v.lowercased())
        }
        if let p = value("CHATGPT_CREDENTIAL_PROFILE") {
            // Named for the variable: the person did not type the value on this command line.
            guard let named = try? Profile(p) else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(p, limit: 80))' for CHATGPT_CREDENTIAL_PROFILE: \(Profile.nameRule)")
            }
            profile = named
        }
        if let s = value("CHATGPT_CREDENTIAL_STORE") { store = try ArgumentParser.storeChoice(s, from: "CHATGPT_CREDENTIAL_STORE") }
        nonInteractive = truthy("CHATGPT_CREDENTIAL_NONINTERACTIVE")
        debug = truthy("CHATGPT_CREDENTIAL_DEBUG")
        if let c = value("CHATGPT_CREDENTIAL_CACHE") { cacheEnabled = try Self.cacheSwitch(c) }
        if let t = value("CHATGPT_CREDENTIAL_CACHE_TTL") { cacheTTL = try Self.cacheTTL(t) }
        if let b = value("CHATGPT_CREDENTIAL_BROKER") { broker = try BrokerAddress.parse(b, from: "CHATGPT_CREDENTIAL_BROKER") }

        issuer = Self.checked { try IssuerConfig(setting: value(OAuthConstants.issuerEnvironmentVariable)) }
        backend = Self.checked { try BackendConfig(setting: value(BackendConfig.environmentVariable)) }

        passphraseFile = value("CHATGPT_CREDENTIAL_PASSPHRASE_FILE") ?? value("CREDENTIALS_DIRECTORY").flatMap { dir in
            // Only an absolute directory systemd made, and only when the credential is in it.
            let path = dir + "/" + Self.passphraseCredential
            return dir.hasPrefix("/") && access(path, F_OK) == 0 ? path : nil
        }
        dbusTimeout = value("CHATGPT_CREDENTIAL_DBUS_TIMEOUT").flatMap(Seconds.dbusTimeout.parse)
        lockTimeout = value("CHATGPT_CREDENTIAL_LOCK_TIMEOUT").flatMap(Seconds.lockTimeout.parse)
        home = value("HOME")
        dataHome = value("XDG_DATA_HOME").map(Self.fromCurrentDirectory)
        configHome = value("XDG_CONFIG_HOME").map(Self.fromCurrentDirectory)
        runtimeDirectory = value("XDG_RUNTIME_DIR")
        busAddress = value("DBUS_SESSION_BUS_ADDRESS")

        overSSH = value("SSH_CONNECTION") != nil || value("SSH_TTY") != nil
        hasDisplay = value("DISPLAY") != nil || value("WAYLAND_DISPLAY") != nil
        browser = value("BROWSER")
        codexHome = value("CODEX_HOME")
        chatgptLocalHome = value("CHATGPT_LOCAL_HOME")
        noColor = value("NO_COLOR") != nil
        term = value("TERM")
        locale = value("LC_ALL") ?? value("LC_CTYPE") ?? value("LANG")
        listenPID = value("LISTEN_PID").flatMap { Int32($0) }
        listenFDs = value("LISTEN_FDS").flatMap { Int($0) }

        childEnvironment = environment
    }

    /// `path` when absolute, else the current directory's `path` (as `cd` would reach it; the
    /// store's identity and lock then follow its real path). Left relative, so ignored, when the
    /// current directory cannot be named.
    static func fromCurrentDirectory(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        let base = String(cString: cwd)
        return (base == "/" ? "" : base) + "/" + path
    }

    /// The XDG directories of the file store and its key.
    public var paths: Paths {
        Paths(home: home, dataHome: dataHome, configHome: configHome, runtimeDirectory: runtimeDirectory)
    }

    /// Where libsecret finds the session bus.
    public var sessionBus: SessionBus { SessionBus(address: busAddress, runtimeDirectory: runtimeDirectory) }

    // MARK: parsing

    /// `CHATGPT_CREDENTIAL_CACHE`: exactly `on` or `off` (a typo must not silently mean either).
    static func cacheSwitch(_ s: String) throws -> Bool {
        switch s {
        case "on": return true
        case "off": return false
        default: throw CredentialError.usage("invalid value '\(Sanitize.line(s, limit: 40))' for CHATGPT_CREDENTIAL_CACHE: use on or off")
        }
    }

    static func cacheTTL(_ s: String) throws -> Int64 {
        guard let ttl = Seconds.cacheTTL.parse(s) else {
            let range = AccessCacheSettings.ttlRange
            throw CredentialError.usage("invalid value '\(Sanitize.line(s, limit: 40))' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int64(ttl)
    }

    /// A refused URL stays a `CredentialError` (exit 2) for the verb that needs it.
    static func checked<T>(_ make: () throws -> T) -> Result<T, CredentialError> {
        do { return .success(try make()) } catch let e as CredentialError { return .failure(e) } catch {
            return .failure(.usage(Sanitize.line("\(error)")))
        }
    }

    /// The one reader of a number of seconds; each variable says how it may be spelled, its
    /// range, and whether a value outside it is clamped into it or not accepted (what is then
    /// done with it is the variable's: `CACHE_TTL` is exit 2, `DBUS_TIMEOUT` is ignored).
    struct Seconds {
        enum Spelling {
            /// Decimal digits only: `300`.
            case whole
            /// Decimal digits with at most one `.`: `3`, `0.5`, `1.25` (no sign, no exponent).
            case decimal
            /// Any number Swift's `Double` reads (a sign, an exponent, `inf`); NaN is not accepted.
            case number
        }
        var spelling: Spelling
        var range: ClosedRange<Double>
        /// Outside `range`: clamped into it (true), or not accepted (false).
        var clamps: Bool

        /// `CHATGPT_CREDENTIAL_CACHE_TTL`: whole seconds, 1 to 3600.
        static let cacheTTL = Seconds(spelling: .whole,
                                      range: Double(AccessCacheSettings.ttlRange.lowerBound)...Double(AccessCacheSettings.ttlRange.upperBound),
                                      clamps: false)
        /// `CHATGPT_CREDENTIAL_DBUS_TIMEOUT`: more than 0, at most 3600.
        static let dbusTimeout = Seconds(spelling: .decimal, range: Double.leastNonzeroMagnitude...3600, clamps: false)
        /// `CHATGPT_CREDENTIAL_LOCK_TIMEOUT`: at most 600 (man page), less than 0 is 0.
        static let lockTimeout = Seconds(spelling: .number, range: 0...600, clamps: true)

        func parse(_ text: String) -> Double? {
            switch spelling {
            case .whole:
                guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            case .decimal:
                let digits = text.utf8.filter { $0 >= 48 && $0 <= 57 }.count
                let dots = text.utf8.filter { $0 == 46 }.count
                guard digits > 0, dots <= 1, digits + dots == text.utf8.count else { return nil }
            case .number:
                break
            }
            guard let value = Double(text), !value.isNaN else { return nil }
            if clamps { return min(max(value, range.lowerBound), range.upperBound) }
            return range.contains(value) ? value : nil
        }
    }
}
