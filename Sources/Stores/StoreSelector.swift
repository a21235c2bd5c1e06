import CredentialCore
import Age
import Secrets

/// What a quick look at the Secret Service found.
public enum SecretServiceAvailability: Equatable, Sendable {
    case available
    case locked(String)
    case unavailable(String)
}

/// Picks the store for a profile (SPEC "Stores", auto). Reading under `auto` looks at the
/// encrypted file first — one stat — and otherwise asks the Secret Service, so `get` finds the
/// credential wherever `login` put it and never consults a stale copy in the other store.
/// A locked keyring with no file for the profile is reported as locked, never as "not signed in".
public final class StoreSelector {
    public let choice: StoreChoice
    private let makeSecretService: () -> CredentialStore
    private let makeFile: () -> CredentialStore
    private let fileHolds: (Profile) -> Bool
    private let probe: () -> SecretServiceAvailability
    private lazy var secretService: CredentialStore = makeSecretService()
    private lazy var file: CredentialStore = makeFile()

    public init(choice: StoreChoice,
                secretService: @escaping () -> CredentialStore,
                file: @escaping () -> CredentialStore,
                fileHolds: @escaping (Profile) -> Bool,
                probe: @escaping () -> SecretServiceAvailability) {
        self.choice = choice
        self.makeSecretService = secretService
        self.makeFile = file
        self.fileHolds = fileHolds
        self.probe = probe
    }

    /// The store holding the profile's credential and the document, or nil when none holds it.
    public func locate(_ profile: Profile) throws -> (store: CredentialStore, document: TokenDocument)? {
        switch choice {
        case .secretService:
            return try secretService.load(profile).map { (secretService, $0) }
        case .file:
            return try file.load(profile).map { (file, $0) }
        case .auto:
            if fileHolds(profile) {
                return try file.load(profile).map { (file, $0) }
            }
            do {
                return try secretService.load(profile).map { (secretService, $0) }
            } catch CredentialError.storeUnavailable {
                return nil // no Secret Service and no file: simply not signed in
            }
        }
    }

    /// Where a new credential (login, store) goes. Under `auto`: the Secret Service when it is
    /// usable, else the encrypted file with a one-line notice.
    public func destination(for profile: Profile, notice: (String) -> Void) throws -> CredentialStore {
        switch choice {
        case .secretService: return secretService
        case .file: return file
        case .auto:
            switch probe() {
            case .available: return secretService
            case .locked(let why), .unavailable(let why):
                notice("notice: the Secret Service is not usable (\(why)); storing the credential in the encrypted file \(file.location(for: profile)) instead")
                return file
            }
        }
    }

    /// Under `auto`, the stores other than `store` that may still hold an older copy; cleared
    /// after a login so that no stale single-use refresh token is left behind.
    public func others(than store: CredentialStore) -> [CredentialStore] {
        guard choice == .auto else { return [] }
        return store === file ? [secretService] : [file]
    }

    /// Profiles found in the stores this choice reaches, with the store each is in.
    public func allProfiles() -> (found: [(String, StoreKind)], problems: [String]) {
        var found: [(String, StoreKind)] = []
        var problems: [String] = []
        let stores: [CredentialStore]
        switch choice {
        case .auto: stores = [secretService, file]
        case .secretService: stores = [secretService]
        case .file: stores = [file]
        }
        for s in stores {
            do {
                for p in try s.profiles() where !found.contains(where: { $0.0 == p && $0.1 == s.kind }) { found.append((p, s.kind)) }
            } catch CredentialError.storeUnavailable(_) where choice == .auto {
                continue // auto without a Secret Service: the file store is the only one
            } catch let e as CredentialError {
                problems.append("\(s.kind.rawValue): \(e.message)")
            } catch {
                problems.append("\(s.kind.rawValue): \(error)")
            }
        }
        return (found, problems)
    }
}
