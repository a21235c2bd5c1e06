import CredentialCore
import Stores

extension CredentialOwner {
    /// The stored credential when it can be seen cheaply — from the access cache, or from a store
    /// whose read costs no passphrase prompt or scrypt — for messages such as "this replaces the
    /// sign-in of …". nil when there is none, or when finding out would cost more than a message is
    /// worth (errors are not reported here: the verb that follows meets them itself).
    package func peek() -> (email: String, accountId: String)? {
        if let hit = cached() { return (hit.credential.email, hit.credential.accountId) }
        guard !selector.store(of: selector.readKind(of: profile)).isExpensiveToRead(profile) else { return nil }
        return (try? locate()).flatMap { $0.map { ($0.document.email, $0.document.accountId) } }
    }
}
