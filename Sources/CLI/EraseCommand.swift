import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import Secrets
import Broker

/// `erase` on the command line (man page VERBS).
struct EraseCommand: Verb {
    static let spec = VerbSpec(
        name: "erase",
        summary: "revoke the refresh token and remove the stored credential",
        details: """
        Removes the profile's credential from every store that holds a copy, damaged
        copies included, revoking its refresh token at the issuer first (best effort,
        10 s; not for a credential imported from Codex). Exit 0 when no copy remains,
        5 naming a copy that could not be removed.
        """,
        options: [OptionSpec("--no-revoke", "do not contact the issuer; only remove the stored credential")],
        examples: ["\(CommandLineSpec.programName) erase",
                   "\(CommandLineSpec.programName) --profile work erase --no-revoke"],
        wordsFromOtherTools: ["logout": "", "log-out": "", "signout": "", "sign-out": "", "logoff": "", "remove": ""])

    var revoke = true

    init(_ a: VerbArguments) throws { revoke = !a.has("--no-revoke") }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.erase(g, revoke: revoke) }
    static var clientMode: ClientModePolicy<Self> { .refused }
}

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
