import Credentials
import CredentialCore
import SystemRuntime

/// Every profile found in either store (`status --all`, `usage --all`): one listing so that the
/// verbs that act on all profiles agree on which ones there are.
struct ProfileListing {
    /// Each (profile, store) pair found, in the stores' order: a profile kept in both stores
    /// appears twice.
    var found: [(profile: Profile, kind: StoreKind)] = []
    /// Stores that could not be listed (locked, not answering); their profiles are missing.
    var problems: [CredentialError] = []

    /// Each profile name once, sorted: the order `usage --all` reports in.
    var names: [Profile] {
        var seen: Set<String> = []
        return found.map(\.profile).filter { seen.insert($0.name).inserted }.sorted { $0.name < $1.name }
    }
}

extension Runner {
    /// Lists the profiles of the stores `g.store` allows (auto: both; an absent Secret Service
    /// is no problem then). Names that are not valid profile names are skipped.
    func everyProfile(_ g: GlobalOptions) -> ProfileListing {
        let (found, problems) = services.makeSelector(g).allProfiles()
        var listing = ProfileListing(problems: problems)
        for (name, kind) in found {
            guard let profile = try? Profile(name) else { continue }
            listing.found.append((profile, kind))
        }
        return listing
    }
}
