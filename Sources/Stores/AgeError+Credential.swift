import Secrets
import Age
import CredentialCore

extension AgeError {
    /// The store-level error: no match is a wrong key, everything else a corrupt file (all exit 5).
    /// `path` names the file, `keyHint` says which key was tried and `recovery` what to do.
    func credentialError(path: String, keyHint: String, recovery: String) -> CredentialError {
        switch self {
        case .noMatch:
            return .wrongKey("\(path) cannot be decrypted with \(keyHint) (wrong key); \(recovery)")
        case .hmacFailure:
            return .storeCorrupt("\(path) is damaged (header MAC mismatch); \(recovery)")
        case .headerFailure(let r):
            return .storeCorrupt("\(path) is not a valid age file (\(r)); \(recovery)")
        case .payloadFailure(let r):
            return .storeCorrupt("\(path) is damaged or truncated (\(r)); \(recovery)")
        }
    }
}
