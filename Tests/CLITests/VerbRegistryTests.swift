import Testing
@testable import CLI
@testable import CredentialCore

/// The registry (`CommandLineSpec.verbTypes`) is the one list of verbs: what the parser accepts,
/// the synopsis `--help` and the man page show, and the exclusive groups they draw all come from
/// each verb's spec.
@Suite struct VerbRegistryTests {
    func parse(_ args: [String]) throws -> Invocation {
        try ArgumentParser.parse(["chatgpt-credential"] + args, settings: Settings())
    }

    @Test func namesAreUniqueAndEachParsesToItsOwnType() throws {
        let names = CommandLineSpec.verbTypes.map { $0.spec.name }
        #expect(Set(names).count == names.count, "\(names)")
        for type in CommandLineSpec.verbTypes where type.spec.operands != .command {
            let verb = try #require(try parse([type.spec.name]).command.verb, "\(type.spec.name)")
            #expect(Swift.type(of: verb) == type, "'\(type.spec.name)' parsed to \(Swift.type(of: verb))")
        }
        #expect(try parse(["exec", "true"]).command.verb is ExecCommand)
    }

    /// The usage lines the man page's VERBS and the contract give, made from the options.
    @Test(arguments: [
        ("login", "login [--device | --browser | --no-browser] [--clipboard]"),
        ("get", "get [--account-id | --id-token | --json | --header | --env] [--min-ttl SECONDS] [--force-refresh]"),
        ("store", "store [--from-codex [PATH]]"),
        ("erase", "erase [--no-revoke]"),
        ("status", "status [--json] [--all]"),
        ("usage", "usage [--json] [--all]"),
        ("refresh", "refresh [--all] [--if-idle DAYS]"),
        ("exec", "exec -- CMD [ARG…]"),
        ("serve", "serve [--socket PATH] [--idle-exit SECONDS] [--allow-uid UID]… [--print-socket]"),
        ("help", "help [VERB]"),
        ("sink", "sink [--format codex|chatmock|token|env|json] [--path PATH] [--take-over] [--on-change CMD] [--json] add|list|remove|run [PATH]"),
        ("version", "version"),
        ("doctor", "doctor [--json]"),
    ])
    func synopsisComesFromTheOptions(_ verb: String, _ synopsis: String) throws {
        #expect(try #require(CommandLineSpec.verb(verb)).synopsis == synopsis)
    }

    /// What the synopsis and zsh's exclusions draw as one group is what the verb refuses to take
    /// twice: two options of a group are a usage error naming the group, in order.
    @Test func exclusiveGroupsAreWhatTheVerbsRefuse() throws {
        var groups = 0
        for spec in CommandLineSpec.verbs {
            for group in spec.optionGroups where group.count > 1 {
                groups += 1
                #expect(Set(group.compactMap(\.exclusiveGroup)).count == 1)
                let names = group.map(\.long)
                for (i, a) in names.enumerated() {
                    for b in names[(i + 1)...] {
                        #expect(throws: CredentialError.usage("choose one of " + names.joined(separator: ", "))) {
                            try parse([spec.name, a, b])
                        }
                    }
                }
            }
            // A group is contiguous: no name of a group stands apart from the rest of it.
            let named = spec.optionGroups.compactMap { $0.first?.exclusiveGroup }
            #expect(Set(named).count == named.count, "\(spec.name): a group is split: \(named)")
        }
        #expect(groups == 2) // get's formats, login's flows
        // Options of different groups, or of none, go together.
        #expect(try parse(["get", "--json", "--min-ttl", "600", "--force-refresh"]).command.verb is GetCommand)
        #expect(try parse(["login", "--device", "--clipboard"]).command.verb is LoginCommand)
    }
}
