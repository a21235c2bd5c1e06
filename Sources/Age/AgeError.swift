import Secrets

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
}
