import CredentialCore
import Secrets

/// What a quick look at the Secret Service found.
public enum SecretServiceAvailability: Equatable, Sendable {
    case available
    case locked(String)
    case unavailable(String)
    /// It could not be asked at all: no session bus found, the bus or the service did not answer
    /// or is not there, no libsecret. A keyring this process cannot see may exist.
    case unreachable(String)
    /// It answers, but its default collection (this D-Bus object path) keeps secrets only in
    /// memory: a restart of the keyring daemon loses them (man page, STORES).
    case volatile(collection: String)
}

/// A profile's credential as found in one store.
public struct LocatedCredential {
    public let store: CredentialStore
    public var document: TokenDocument
    /// The store's version of the very bytes `document` was parsed from (nil: not read from the
    /// store as it is, e.g. a document this process made).
    public let version: [UInt8]?

    public init(store: CredentialStore, document: TokenDocument, version: [UInt8]? = nil) {
        self.store = store
        self.document = document
        self.version = version
    }

    /// `store`'s copy, read once: the document and the version of its bytes.
    public static func read(_ profile: Profile, from store: CredentialStore) throws -> LocatedCredential? {
        try store.loadVersioned(profile).map { LocatedCredential(store: store, document: $0.document, version: $0.version) }
    }
}

/// Picks the store for a profile (man page STORES, auto). Reading under `auto` looks at the
/// encrypted file first — one stat — and otherwise asks the Secret Service, so `get` finds the
/// credential wherever `login` put it and never consults a stale copy in the other store.
/// A locked keyring with no file for the profile is reported as locked, and a Secret Service that
/// does not answer in time as not answering: never as "not signed in". A Secret Service that
/// cannot be reached at all (no bus found, a bus that does not answer, nobody providing the
/// service, no libsecret) with no file for the profile is `notFoundKeyringUnreachable`, which
/// names both: a keyring this process cannot see may hold the sign-in.
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
    public func locate(_ profile: Profile) throws -> LocatedCredential? {
        switch choice {
        case .secretService:
            return try LocatedCredential.read(profile, from: secretService)
        case .file:
            return try LocatedCredential.read(profile, from: file)
        case .auto:
            if fileHolds(profile) {
                return try LocatedCredential.read(profile, from: file)
            }
            do {
                return try LocatedCredential.read(profile, from: secretService)
            } catch CredentialError.storeUnavailable(let why, _) {
                throw CredentialError.notFoundKeyringUnreachable(profile: profile.name, keyring: Self.withoutAdvice(why),
                                                                 file: file.location(for: profile))
            }
        }
    }

    /// The kind of store `locate` would read the profile from, decided without touching either
    /// store (under `auto`: one lstat of the file), for the access cache's lookup.
    public func readKind(of profile: Profile) -> StoreKind {
        switch choice {
        case .secretService: return .secretService
        case .file: return .file
        case .auto: return fileHolds(profile) ? .file : .secretService
        }
    }

    /// The store of `kind`.
    public func store(of kind: StoreKind) -> CredentialStore {
        kind == .file ? file : secretService
    }

    /// Where a new credential (login, store) goes. Under `auto`: the Secret Service when it is
    /// usable and durable, else the encrypted file with a one-line notice. An explicit store is
    /// obeyed without a probe (`volatileWriteNotice` then says when the write landed in memory only).
    public func destination(for profile: Profile, notice: (String) -> Void) throws -> CredentialStore {
        switch choice {
        case .secretService: return secretService
        case .file: return file
        case .auto:
            switch probe() {
            case .available: return secretService
            case .volatile(let collection):
                notice("notice: storing the credential in the encrypted file \(file.location(for: profile)) because the Secret Service's default collection \(collection) keeps secrets only in memory")
                return file
            case .locked(let why), .unavailable(let why), .unreachable(let why):
                notice("notice: storing the credential in the encrypted file \(file.location(for: profile)) because \(Self.firstClause(why))")
                return file
            }
        }
    }

    /// What a quick look at the Secret Service finds now (one probe), whatever the choice: for
    /// `doctor`.
    public func secretServiceAvailability() -> SecretServiceAvailability { probe() }

    /// Under `auto`, why a sign-in made now would be kept in the encrypted file beside any
    /// keyring this process cannot reach (`login` says so before it starts: man page STORES); nil
    /// when the Secret Service could be asked, or with an explicit store. One probe.
    public func keyringOutOfReach() -> String? {
        guard choice == .auto, case .unreachable(let why) = probe() else { return nil }
        return Self.withoutAdvice(why)
    }

    /// A reason cut to its first clause, before any "; advice" or " (detail)": notices are one
    /// short sentence without nested parentheses (man page, STORES).
    public static func firstClause(_ why: String) -> String {
        let chars = Array(why)
        var end = chars.count
        for i in chars.indices.dropLast() where (chars[i] == ";" && chars[i + 1] == " ") || (chars[i] == " " && chars[i + 1] == "(") {
            end = i
            break
        }
        return String(chars[..<end])
    }

    /// A reason without the advice after its first "; " (what to do is said by whoever embeds it).
    static func withoutAdvice(_ why: String) -> String {
        let chars = Array(why)
        for i in chars.indices.dropLast() where chars[i] == ";" && chars[i + 1] == " " { return String(chars[..<i]) }
        return why
    }

    /// The notice for a credential just written to a Secret Service collection that lives only in
    /// memory (an explicit `--store secret-service`), or nil when `store` kept it durably.
    public static func volatileWriteNotice(after store: CredentialStore) -> String? {
        guard let secretService = store as? SecretServiceStore, let collection = secretService.lastWrittenCollection,
              !SecretServiceStore.isDurable(collection: collection) else { return nil }
        return "notice: the Secret Service collection \(collection) keeps secrets only in memory: the credential will not survive a restart of the keyring daemon; use --store file to keep it on disk"
    }

    /// The other store: after a write to `store`, the profile's copy there is removed (explicit
    /// `--store` too), so `auto` never serves a stale copy.
    public func counterpart(of store: CredentialStore) -> CredentialStore {
        store === file ? secretService : file
    }

    /// Under `auto`, where a rotated document goes when saving it to `store` failed after the
    /// issuer already rotated (reserve before spending: ARCHITECTURE.md, `get` step 5); nil for an
    /// explicit store.
    public func fallback(for store: CredentialStore) -> CredentialStore? {
        choice == .auto ? counterpart(of: store) : nil
    }

    /// Every store that may hold a copy of a profile, in the order `erase` removes them.
    public var allStores: [CredentialStore] { [secretService, file] }

    /// The store an explicit `--store` names; nil under `auto`. It not being there at all is an
    /// error, where under `auto` it only means "no copy there".
    public var chosen: CredentialStore? {
        switch choice {
        case .auto: return nil
        case .secretService: return secretService
        case .file: return file
        }
    }

    /// Profiles found in the stores this choice reaches, with the store each is in.
    public func allProfiles() -> (found: [(String, StoreKind)], problems: [CredentialError]) {
        var found: [(String, StoreKind)] = []
        var problems: [CredentialError] = []
        let stores: [CredentialStore]
        switch choice {
        case .auto: stores = [secretService, file]
        case .secretService: stores = [secretService]
        case .file: stores = [file]
        }
        for s in stores {
            do {
                for p in try s.profiles() where !found.contains(where: { $0.0 == p && $0.1 == s.kind }) { found.append((p, s.kind)) }
            } catch CredentialError.storeUnavailable where choice == .auto {
                continue // auto without a Secret Service: the file store is the only one
            } catch let e as CredentialError {
                problems.append(e)
            } catch {
                problems.append(.storeFailure("\(s.kind.rawValue): \(error)"))
            }
        }
        return (found, problems)
    }
}
