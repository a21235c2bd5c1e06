import CredentialCore
import SystemRuntime
import Credentials
#if canImport(Glibc)
import Glibc
#endif

/// What a verb's Secret Service failure adds (`Runner.advised`, a `Verb`'s `keyringAdvice`).
enum KeyringAdvice: Sendable {
    case none
    /// It writes a new credential: the encrypted file can take it instead.
    case keepInTheFile
    /// It reads this profile's credential: the encrypted file's copy, when there is one.
    case useTheFileCopy
}

extension Runner {
    /// A Secret Service that cannot be used says how to fix it; `--store file` is added only
    /// where following it works (man page, STORES): with an explicit `--store secret-service`
    /// when the file store holds this profile, or for a verb that writes a new credential.
    /// Under `auto` the file store is already read first and written when the keyring is not
    /// usable, so there the advice would lead nowhere.
    func advised(_ e: CredentialError, _ command: Command, _ g: GlobalOptions) -> CredentialError {
        guard g.store == .secretService, g.wire == .plain else { return e }
        let hint: String
        switch command.verb?.keyringAdvice ?? .none {
        case .keepInTheFile: hint = "; or add --store file to keep the credential in the encrypted file"
        case .useTheFileCopy:
            let file = services.makeSelector(g).store(of: .file)
            guard let path = file.path(for: g.profile), access(path, F_OK) == 0 else { return e }
            hint = "; or use --store file, which holds this profile"
        case .none: return e
        }
        switch e {
        case .keyringLocked(let m): return .keyringLocked(m + hint)
        case .storeUnavailable(let m, secretService: true): return .storeUnavailable(m + hint, secretService: true)
        case .storeNotAnswering(let m): return .storeNotAnswering(m + hint)
        default: return e
        }
    }
}
