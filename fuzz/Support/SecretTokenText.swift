// Fuzz inputs are no secrets: the targets write tokens as literals and build them from Strings.
// Shipped code has neither convenience (see SecretToken), so they live here and in TestSupport.
import CredentialCore
import Secrets

extension SecretToken: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) {
        self.init(copying: value)
    }
}

extension SecretToken {
    /// A copy of the UTF-8 of `text` in a guarded buffer of its own (the String is not wiped).
    public init(copying text: some StringProtocol) {
        self.init(SecretBytes(copying: text.utf8))
    }
}
