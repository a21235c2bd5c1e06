import AccessCache
import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// The real wiring: Secret Service through libsecret, the age file store, the issuer over HTTPS.
extension Services {
    public static func live(settings: Settings, console: Console) -> Services {
        // Each store is handed its typed settings, never the environment.
        let paths = settings.paths
        let bus = settings.sessionBus
        let issuer = settings.issuer
        // The stores are built by the owner's module (ARCHITECTURE.md, "Rules of thumb").
        let stores = LiveStores(paths: paths, passphraseFile: settings.passphraseFile,
                                bus: bus, dbusTimeout: settings.dbusTimeout,
                                prompt: { TerminalPassphrasePrompt() })
        var services = Services(
            settings: settings,
            paths: paths,
            makeSelector: { g in stores.selector(choice: g.store, nonInteractive: g.nonInteractive) },
            makeRefresher: { _ in IssuerClient(config: try issuer.get()) },
            revoke: { _, refreshToken in
                do {
                    let client = IssuerClient(config: try issuer.get())
                    return client.revoke(refreshToken: refreshToken) ? nil : "the issuer did not confirm"
                } catch let e as CredentialError {
                    return e.message
                } catch {
                    return "\(error)"
                }
            },
            // Tuning for tests and slow machines: how long a waiting `get` queues behind another
            // process's refresh before exit 4 (default 60 s).
            lockTimeout: settings.lockTimeout ?? 60)
        services.lookupForeignSecret = { attributes in try stores.lookupForeignSecret(attributes: attributes) }
        services.fileStoreKey = { profiles in stores.fileStoreKey(profiles: profiles) }
        services.fileStoreVersion = { profile in stores.fileStoreVersionPassingReadChecks(profile) }
        let fileIdentities = RememberedFileIdentities()
        services.makeCache = { g in
            // The kernel keeps a user keyring per user namespace: an entry made in another one
            // could not be revoked by a change made on the host (man page ACCESS CACHE).
            guard UserNamespace.isInitial else {
                if g.verbose { console.err("chatgpt-credential: debug: access cache not used: this process is in a user namespace other than the first") }
                return nil
            }
            let keyring = KeyringCache(settings: g.cache, diagnostic: { line in
                if g.verbose { console.err("chatgpt-credential: debug: " + Sanitize.line(line)) }
            })
            // Entries are keyed by the store's identity, normalised: the encrypted file's real
            // path, or the bus on which libsecret would find the Secret Service (found without
            // loading libsecret). A hit for the file store is served only while the file (and its
            // key) would pass a store read's owner and mode checks, and only while it is the file
            // the entry was filled from (man page ACCESS CACHE).
            return CredentialCache(keyring: keyring, identity: { kind, profile in
                switch kind {
                case .file: return paths.encryptedFile(for: profile).flatMap { fileIdentities.current($0) }
                case .secretService: return StoreIdentity.secretService(bus: bus)
                }
            }, storeCheck: { kind, profile in
                // The store's own checks: a refusal is a miss, and the read then reports it.
                guard kind == .file else { return [] }
                return stores.fileStoreVersionPassingReadChecks(profile)
            }, rememberedIdentity: { kind, profile in
                // A broker's lookups skip resolving the file's directory again (RememberedFileIdentities).
                guard kind == .file else { return nil }
                return paths.encryptedFile(for: profile).flatMap { fileIdentities.remembered($0) }
            })
        }
        return services
    }
}
