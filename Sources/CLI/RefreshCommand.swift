import CredentialCore
import SystemRuntime
import Credentials

/// `refresh [--all] [--if-idle DAYS]` (man page, `refresh` and KEEP AN IDLE SIGN-IN ALIVE): a
/// refresh now, through the one owner exactly as `get --force-refresh` would do it, for one
/// profile or every profile found; nothing on stdout, one line per profile on stderr.
struct RefreshCommand: Verb {
    static let spec = VerbSpec(
        name: "refresh",
        summary: "refresh now (for timers), printing nothing on stdout",
        details: """
        Refreshes the profile's tokens now through the one owner (the lock, reserve before
        spend, the shared back-off) and prints one line per profile on stderr: refreshed,
        not idle (skipped), or the error. Exit status: the worst of the profiles', in the
        order 5, 3, 1, 4, 0; with --all and no profile found, 0. A daily systemd user timer
        runs 'refresh --all --if-idle 7' (see KEEP AN IDLE SIGN-IN ALIVE in the man page).
        """,
        options: [
            OptionSpec("--all", "every profile found in either store"),
            OptionSpec("--if-idle", value: "DAYS", "only profiles last refreshed at least DAYS days ago (1-365)"),
        ],
        examples: ["\(CommandLineSpec.programName) refresh", "\(CommandLineSpec.programName) refresh --all --if-idle 7   # what the daily timer runs"])

    var all = false
    /// nil: refresh whatever the age.
    var ifIdleDays: Int?

    init(_ a: VerbArguments) throws {
        if let raw = a.value("--if-idle") {
            guard let n = Int(raw), Self.idleDaysRange.contains(n) else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(raw, limit: 40))' for --if-idle: a number of days from \(Self.idleDaysRange.lowerBound) to \(Self.idleDaysRange.upperBound)")
            }
            ifIdleDays = n
        }
        all = a.has("--all")
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome { try runner.refresh(g, all: all, ifIdleDays: ifIdleDays) }
    static var clientMode: ClientModePolicy<Self> { .refused }
    var keyringAdvice: KeyringAdvice { all ? .none : .useTheFileCopy }

    /// `--if-idle DAYS`: a day to a year.
    static let idleDaysRange = 1...365

    /// What a refresh run asks of the owner: a refresh whatever the expiry, and no stored token
    /// "still usable" instead — a refresh that did not happen is that profile's error (exit 3, 4,
    /// 5 or 1, as `get` would give once its token ran out), never a silent success.
    static let need = Freshness(forceRefresh: true, requiredTTL: .max)

    /// The profiles' exit codes combined: the one that asks the most of a person wins. 5 (a store
    /// to unlock or repair) over 3 (sign in again) over 1 (something to fix, such as a missing
    /// libcurl) over 4 (temporary: the next run retries by itself) over 0.
    static func worst(_ a: Int32, _ b: Int32) -> Int32 {
        rank(a) >= rank(b) ? a : b
    }

    private static func rank(_ code: Int32) -> Int {
        switch code {
        case 0: return 0
        case 4: return 1
        case 1: return 2
        case 3: return 3
        case 5: return 4
        default: return 5 // a signal's 128+n, or 2: nothing the others say outweighs them
        }
    }
}

extension Runner {
    func refresh(_ g: GlobalOptions, all: Bool, ifIdleDays: Int?) throws -> Outcome {
        var profiles: [Profile] = [g.profile]
        var exit: Int32 = 0
        if all {
            // The profiles `status --all` lists, each once: under `auto` a name in both stores is
            // the copy `get --profile NAME` would use.
            let (found, problems) = services.makeSelector(g).allProfiles()
            for p in problems {
                console.err("chatgpt-credential: refresh: " + p.message)
                exit = RefreshCommand.worst(exit, p.exitCode)
            }
            profiles = []
            for (name, _) in found {
                guard let profile = try? Profile(name), !profiles.contains(profile) else { continue }
                profiles.append(profile)
            }
            if profiles.isEmpty, problems.isEmpty {
                console.err("chatgpt-credential: refresh: no profile is signed in; nothing to refresh")
            }
        }
        for profile in profiles {
            var one = g
            one.profile = profile
            exit = RefreshCommand.worst(exit, refreshOne(one, ifIdleDays: ifIdleDays))
            // A signal that waited for this profile's save ends the run before the next one.
            try stopIfSignalled()
        }
        return .exit(exit)
    }

    /// One profile: its line on stderr, and its exit code.
    private func refreshOne(_ g: GlobalOptions, ifIdleDays: Int?) -> Int32 {
        let name = "profile '\(g.profile.name)'"
        let owner = owner(g)
        do {
            guard let located = try owner.locate() else { throw CredentialError.notSignedIn(profile: g.profile.name) }
            let now = services.now()
            if let days = ifIdleDays {
                let d = located.document
                guard let since = d.idleSince else {
                    console.err("chatgpt-credential: \(name): not refreshed: when it was last refreshed is unknown (get refreshes it before it expires); skipped")
                    return 0
                }
                let age = now - since
                guard age >= Int64(days) * 86400 else {
                    let when = d.lastRefresh > 0 ? "last refreshed" : "stored without a known last refresh"
                    console.err("chatgpt-credential: \(name): not idle (\(when) \(TimeSpan.span(max(0, age))) ago, less than \(days) d); skipped")
                    return 0
                }
            }
            let fresh = try owner.fresh(located, RefreshCommand.need)
            for n in fresh.notices { console.err("chatgpt-credential: \(name): " + n) }
            let until = "valid until \(Clock.rfc3339(fresh.credential.expiresAt)) (\(TimeSpan.expiry(fresh.credential.expiresAt - services.now())))"
            if fresh.refreshed {
                console.err("chatgpt-credential: \(name): refreshed; the new access token is \(until)")
            } else {
                console.err("chatgpt-credential: \(name): refreshed by another process meanwhile; its access token is \(until)")
            }
            return 0
        } catch let e as CredentialError {
            console.err("chatgpt-credential: \(name): error: " + e.message)
            return e.exitCode
        } catch {
            console.err("chatgpt-credential: \(name): error: \(Sanitize.line("\(error)"))")
            return 1
        }
    }
}
