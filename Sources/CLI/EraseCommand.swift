import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `erase [--no-revoke]` (man page VERBS): every copy removed through the one owner, the refresh
/// token revoked first unless imported or asked not to.
extension Runner {
    func erase(_ g: GlobalOptions, revoke: Bool) throws -> Outcome {
        _ = try eraseEverywhere(g, revoke: revoke)
        return .exit(0)
    }

    /// `erase` through the owner; true when a copy was removed.
    func eraseEverywhere(_ g: GlobalOptions, revoke: Bool) throws -> Bool {
        let erasure = try owner(g).erase(revoke: revoke ? { self.services.revoke(g, $0) } : nil)
        for n in erasure.notices { console.err("chatgpt-credential: " + n) }
        if erasure.removed.isEmpty {
            console.err("chatgpt-credential: profile '\(g.profile.name)' holds no credential; nothing to erase")
            return false
        }
        let places = erasure.removed.map { $0.location(for: g.profile) }.joined(separator: " and ")
        console.err("chatgpt-credential: erased profile '\(g.profile.name)' from \(places)")
        return true
    }
}
