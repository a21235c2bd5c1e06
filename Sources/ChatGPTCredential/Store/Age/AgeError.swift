/// Why an age file could not be decrypted. The four classes are the ones the age spec (and the
/// C2SP CCTV vectors) distinguish; they stay distinct so the store can tell "wrong key" from
/// "damaged file".
public enum AgeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No stanza in the header could be unwrapped with the identities given (wrong key/passphrase).
    case noMatch
    /// The file key was recovered but the header MAC does not match: the header was altered.
    case hmacFailure
    /// The header is malformed, uses an unsupported version, or a stanza is invalid.
    case headerFailure(String)
    /// The header verified but the encrypted payload is damaged, truncated or has trailing data.
    case payloadFailure(String)

    public var description: String {
        switch self {
        case .noMatch: return "no identity matched any recipient stanza"
        case .hmacFailure: return "the header MAC does not match"
        case .headerFailure(let r): return "invalid header: \(r)"
        case .payloadFailure(let r): return "damaged payload: \(r)"
        }
    }

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
