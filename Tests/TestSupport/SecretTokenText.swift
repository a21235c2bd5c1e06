import CredentialCore
import Secrets

// Test data is no secret: tests write tokens as literals ("" is the empty token) and build them
// from Strings. Shipped code has neither convenience (a token there comes from bytes: a parse,
// a payload, guarded memory), so they live here, in the test doubles' module, never shipped.

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
