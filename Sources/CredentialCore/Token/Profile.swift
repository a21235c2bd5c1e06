import Secrets

/// A profile name: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}` (man page, `--profile`). Used in file names
/// and Secret Service attributes, so it is validated once, here. It starts with a letter or digit
/// so that no profile's file is a hidden file, an option-like word or another profile's temp file
/// (`.NAME.age.tmp-…`, see `AtomicFile`).
public struct Profile: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public static let `default` = Profile(unchecked: "default")

    /// What a valid name is, in words (for messages).
    public static let nameRule = "use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"

    public init(_ name: String) throws {
        guard Profile.isValid(name) else {
            throw CredentialError.usage("invalid profile name '\(Sanitize.line(name, limit: 80))': \(Profile.nameRule)")
        }
        self.name = name
    }

    package init(unchecked name: String) { self.name = name }

    public static func isValid(_ name: String) -> Bool {
        let b = Array(name.utf8)
        guard (1...64).contains(b.count), isAlphanumeric(b[0]) else { return false }
        return b.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 46 || $0 == 95 || $0 == 45 }
    }

    private static func isAlphanumeric(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
    }

    public var description: String { name }

    /// `chatgpt-credential VERB` for this profile, for every message that tells the person what
    /// to run (the profile is named unless it is the default one).
    public func command(_ verb: String) -> String {
        self == .default ? "chatgpt-credential \(verb)" : "chatgpt-credential --profile \(name) \(verb)"
    }

    /// The command that signs this profile in.
    public var loginCommand: String { command("login") }

    /// What to do about a damaged or undecryptable stored copy.
    public var removeDamagedHint: String { "remove it with '\(command("erase"))' and sign in again: \(loginCommand)" }
}
