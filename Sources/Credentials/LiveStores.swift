import CredentialCore
import SystemRuntime
import Secrets
import Stores
#if canImport(Glibc)
import Glibc
#endif

/// The real stores, built here in the owner's module and nowhere else (ARCHITECTURE.md, "Rules of
/// thumb"): the command line hands over the typed settings it has (never the environment) and
/// gets back a selector, the Secret Service lookup of another program's secret and the file
/// store's read checks; it names no store type, and its build cannot import `Stores`.
public struct LiveStores {
    let paths: Paths
    let passphraseFile: String?
    let bus: SessionBus
    let dbusTimeout: Double?
    let prompt: () -> PassphrasePrompt
    /// The file store's key and its directory, worked out once.
    let identityPaths: (file: String, directory: String)?

    /// `prompt`: how to ask for a passphrase, made each time a file store is, and only when
    /// someone may be asked (see `selector`).
    public init(paths: Paths, passphraseFile: String?, bus: SessionBus, dbusTimeout: Double?,
                prompt: @escaping () -> PassphrasePrompt) {
        self.paths = paths
        self.passphraseFile = passphraseFile
        self.bus = bus
        self.dbusTimeout = dbusTimeout
        self.prompt = prompt
        identityPaths = AgeFileStore.keyPaths(paths.identityFile)
    }

    /// The stores `choice` selects from (man page, STORES). `nonInteractive`: the file store asks
    /// nobody for a passphrase (`--non-interactive`).
    public func selector(choice: StoreChoice, nonInteractive: Bool) -> StoreSelector {
        let paths = paths, passphraseFile = passphraseFile, bus = bus, dbusTimeout = dbusTimeout, prompt = prompt
        // The work the selector is made for begins now, before any wait for the profile's lock.
        let begun = Clock.monotonicMillis()
        return StoreSelector(
            choice: choice,
            secretService: { SecretServiceStore(bus: bus, timeout: dbusTimeout, begun: begun) },
            file: {
                AgeFileStore(paths: paths, passphraseFile: passphraseFile,
                             prompt: nonInteractive ? nil : prompt())
            },
            fileHolds: { profile in
                // One lstat: whether the encrypted file exists decides where auto looks.
                guard let path = paths.encryptedFile(for: profile) else { return false }
                var st = stat()
                return lstat(path, &st) == 0
            },
            probe: { SecretServiceStore.probe(bus: bus, timeout: dbusTimeout) })
    }

    /// Another program's secret in the Secret Service, by its attributes (the Codex keyring
    /// import), or nil when there is none.
    public func lookupForeignSecret(attributes: [(String, String)]) throws -> SecretBytes? {
        try SecretServiceStore(bus: bus, timeout: dbusTimeout).lookup(attributes: attributes)
    }

    /// What opens the encrypted files, for `doctor`.
    public enum FileStoreKey: Equatable {
        /// Passphrase mode: the file passes a read's checks.
        case passphraseFile(String)
        /// Passphrase mode, and a read would refuse the file: why.
        case refusedPassphraseFile(String)
        /// The key file exists (its mode is the caller's to check).
        case identity(String)
        /// No key file, and `needing` of the profiles' files are not passphrase-protected: they cannot be read.
        case missingIdentity(String, needing: [Profile])
        /// No key yet, and no file needs one.
        case none
    }

    /// What opens the files of `profiles` (those with an encrypted file).
    public func fileStoreKey(profiles: [Profile]) -> FileStoreKey {
        if let passphraseFile {
            do {
                try AgeFileStore.checkPassphraseFile(passphraseFile)
                return .passphraseFile(passphraseFile)
            } catch let e as CredentialError {
                return .refusedPassphraseFile(e.message)
            } catch {
                return .refusedPassphraseFile("\(passphraseFile): \(error)")
            }
        }
        guard let key = paths.identityFile else { return .none }
        var st = stat()
        if lstat(key, &st) == 0 { return .identity(key) }
        let file = AgeFileStore(paths: paths, passphraseFile: nil, prompt: nil)
        let needing = profiles.filter { !file.isExpensiveToRead($0) }
        return needing.isEmpty ? .none : .missingIdentity(key, needing: needing)
    }

    /// The file store's own checks (`AgeFileStore.versionPassingReadChecks`), for the access
    /// cache: the file's version when they pass; nil for a refusal (a miss, and the read then
    /// reports it) or no file (man page ACCESS CACHE).
    public func fileStoreVersionPassingReadChecks(_ profile: Profile) -> [UInt8]? {
        // No directory: a store read would refuse (HOME not set), so this is a miss too.
        guard let directory = paths.dataDirectory else { return nil }
        return (try? AgeFileStore.versionPassingReadChecks(profile, directory: directory, identity: identityPaths)) ?? nil
    }
}
