import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The seams between the command layer and the outside world: stores, the issuer, the clock.
/// `Services.live` wires the real ones; unit tests inject memory stores and scripted issuers.
public struct Services {
    /// The environment, read once by the executable (`Settings`).
    public var settings: Settings
    public var paths: Paths
    public var now: () -> Int64
    public var makeSelector: (GlobalOptions) -> StoreSelector
    /// Built only when a refresh is actually needed, so the fresh-token path loads no network code.
    public var makeRefresher: (GlobalOptions) throws -> TokenRefreshing
    /// Best-effort revocation (10 s); returns a notice on failure, nil on success.
    public var revoke: (GlobalOptions, SecretToken) -> String?
    public var lockTimeout: Double
    /// The access cache for these options; nil: none (unit tests).
    package var makeCache: (GlobalOptions) -> CredentialCache?
    /// A read-only Secret Service lookup of another program's item by attributes (Codex's, for
    /// `store --from-codex`); nil: no such item. Default: none (unit tests).
    package var lookupForeignSecret: ([(String, String)]) throws -> SecretBytes?
    /// What opens the encrypted files of these profiles (`doctor`). Default: the key file when
    /// it exists (unit tests).
    package var fileStoreKey: ([Profile]) -> LiveStores.FileStoreKey
    /// The version (`dev:ino:size:mtime`) of the profile's encrypted file when a read's checks
    /// would pass it; nil for none or a refusal. Default: nil (unit tests).
    package var fileStoreVersion: (Profile) -> [UInt8]?

    public init(settings: Settings = Settings(), paths: Paths, now: @escaping () -> Int64 = Clock.now,
                makeSelector: @escaping (GlobalOptions) -> StoreSelector,
                makeRefresher: @escaping (GlobalOptions) throws -> TokenRefreshing,
                revoke: @escaping (GlobalOptions, SecretToken) -> String?,
                lockTimeout: Double = 60) {
        self.makeCache = { _ in nil }
        self.lookupForeignSecret = { _ in nil }
        self.fileStoreVersion = { _ in nil }
        self.fileStoreKey = { _ in
            guard let key = paths.identityFile, access(key, F_OK) == 0 else { return .none }
            return .identity(key)
        }
        self.settings = settings
        self.paths = paths
        self.now = now
        self.makeSelector = makeSelector
        self.makeRefresher = makeRefresher
        self.revoke = revoke
        self.lockTimeout = lockTimeout
    }
}
