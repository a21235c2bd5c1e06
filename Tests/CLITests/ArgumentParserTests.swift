import Testing
@testable import CLI
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import HelperProtocols
@testable import AccessCache
@testable import CredentialCore
@testable import Secrets

@Suite struct ArgumentParserTests {
    func parse(_ args: [String], env: [String: String] = [:], argv0: String = "chatgpt-credential") throws -> Invocation {
        try ArgumentParser.parse([argv0] + args, settings: Settings(environment: env))
    }

    @Test func globalOptionsBeforeOrAfterTheVerb() throws {
        let a = try parse(["--profile", "work", "get", "--store", "file"])
        let b = try parse(["get", "--profile=work", "--store=file"])
        for inv in [a, b] {
            #expect(inv.globals.profile.name == "work")
            #expect(inv.globals.store == .file)
            guard let o = inv.command.verb as? GetCommand else { Issue.record("not get"); return }
            #expect(o.options == GetOptions())
        }
    }

    @Test func environmentSuppliesDefaultsAndFlagsWin() throws {
        let env = ["CHATGPT_CREDENTIAL_PROFILE": "envp", "CHATGPT_CREDENTIAL_STORE": "secret-service",
                   "CHATGPT_CREDENTIAL_NONINTERACTIVE": "1", "CHATGPT_CREDENTIAL_DEBUG": "1"]
        let inv = try parse(["status"], env: env)
        #expect(inv.globals.profile.name == "envp")
        #expect(inv.globals.store == .secretService)
        #expect(inv.globals.nonInteractive && inv.globals.verbose)
        let flagged = try parse(["--profile", "flag", "--store", "file", "status"], env: env)
        #expect(flagged.globals.profile.name == "flag")
        #expect(flagged.globals.store == .file)
    }

    @Test func refreshTakesAllAndIfIdleFromOneToThreeHundredSixtyFiveDays() throws {
        guard let plain = try parse(["refresh"]).command.verb as? RefreshCommand else { Issue.record("not refresh"); return }
        #expect(!plain.all && plain.ifIdleDays == nil)
        guard let idle = try parse(["refresh", "--all", "--if-idle", "7"]).command.verb as? RefreshCommand else { Issue.record(); return }
        #expect(idle.all && idle.ifIdleDays == 7)
        guard let edge = try parse(["refresh", "--if-idle=365"]).command.verb as? RefreshCommand else { Issue.record(); return }
        #expect(edge.ifIdleDays == 365)
        for bad in ["0", "366", "-1", "abc", "7d", "", "1.5"] {
            #expect(throws: CredentialError.usage("invalid value '\(bad)' for --if-idle: a number of days from 1 to 365")) {
                try parse(["refresh", "--if-idle", bad])
            }
        }
        #expect(throws: CredentialError.usage("option --if-idle needs a value (DAYS)")) { try parse(["refresh", "--if-idle"]) }
        #expect(throws: CredentialError.usage("unknown option '--json' for 'refresh' (see: chatgpt-credential refresh --help)", namesItsHelp: true)) { try parse(["refresh", "--json"]) }
    }

    /// Whether a usage error already points at a help page is said by its thrower (a "did you
    /// mean"), not read from its words: an argument quoting "(see: " still gets the pointer.
    @Test func anArgumentQuotingSeeStillPointsAtTheHelp() {
        let e = #expect(throws: CredentialError.usage("unexpected argument '(see: x)'")) { try parse(["get", "(see: x)"]) }
        #expect(e?.message == "unexpected argument '(see: x)' (see: chatgpt-credential --help)")
        #expect(e?.exitCode == 2)
        let typo = #expect(throws: CredentialError.usage("unknown option '--jsno' for 'get'; did you mean '--json'? (see: chatgpt-credential get --help)", namesItsHelp: true)) {
            try parse(["get", "--jsno"])
        }
        #expect(typo?.message == "unknown option '--jsno' for 'get'; did you mean '--json'? (see: chatgpt-credential get --help)")
    }

    @Test func getFormatsAndTTL() throws {
        guard let o = (try parse(["get", "--json", "--min-ttl", "900", "--force-refresh"]).command.verb as? GetCommand)?.options else { Issue.record(); return }
        #expect(o.format == .json && o.minTTL == 900 && o.requiredTTL == 900 && o.forceRefresh)
        guard let small = (try parse(["get", "--min-ttl", "10"]).command.verb as? GetCommand)?.options else { Issue.record(); return }
        #expect(small.minTTL == 300 && small.requiredTTL == 10)
    }

    @Test(arguments: [
        (["bogus"], "unknown verb 'bogus'; the verbs are \(CommandLineSpec.verbs.map(\.name).joined(separator: ", ")) (see: chatgpt-credential --help)"),
        (["lgoin"], "unknown verb 'lgoin'; did you mean 'login'? (see: chatgpt-credential login --help)"),
        (["logout"], "unknown verb 'logout'; to do that here: chatgpt-credential erase (see: chatgpt-credential erase --help)"),
        (["get", "--jsn"], "unknown option '--jsn' for 'get'; did you mean '--json'? (see: chatgpt-credential get --help)"),
        (["help", "staus"], "unknown verb 'staus'; did you mean 'status'? (see: chatgpt-credential status --help)"),
        (["get", "--json", "--env"], "choose one of --account-id, --id-token, --json, --header, --env"),
        (["get", "--min-ttl"], "option --min-ttl needs a value (SECONDS)"),
        (["get", "--min-ttl", "-5"], "invalid value '-5' for --min-ttl: a number of seconds from 0 to 31622400"),
        (["get", "--min-ttl", "abc"], "invalid value 'abc' for --min-ttl: a number of seconds from 0 to 31622400"),
        (["get", "--nope"], "unknown option '--nope' for 'get' (see: chatgpt-credential get --help)"),
        (["--profile", "bad name", "get"], "invalid profile name 'bad name': use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        (["--profile", ".y.age.tmp-4000000-x", "get"],
         "invalid profile name '.y.age.tmp-4000000-x': use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        (["--profile", "-x", "get"], "invalid profile name '-x': use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        (["--profile", String(repeating: "a", count: 65), "get"],
         "invalid profile name '\(String(repeating: "a", count: 65))': use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        (["--store", "cloud", "get"], "invalid value 'cloud' for --store: use auto, secret-service or file"),
        (["--protocol", "ftp", "get"], "invalid value 'ftp' for --protocol: use plain, git or docker"),
        (["login", "--device", "--browser"], "choose one of --device, --browser, --no-browser"),
        (["exec"], "exec needs a command: chatgpt-credential exec -- CMD [ARG…]"),
        (["get", "extra"], "unexpected argument 'extra'"),
        (["status", "--json=yes"], "option --json takes no value"),
        (["-x"], "unknown option '-x' (see: chatgpt-credential --help)"),
        (["usage", "--min-ttl", "600"], "unknown option '--min-ttl' for 'usage' (see: chatgpt-credential usage --help)"),
        (["usage", "--every"], "unknown option '--every' for 'usage' (see: chatgpt-credential usage --help)"),
        (["usage", "--json", "--json"], "option --json given twice"),
        (["usage", "now"], "unexpected argument 'now'"),
    ])
    func usageErrors(_ args: [String], _ message: String) {
        // The messages ending in a help page are the "did you mean"s, which say so themselves.
        let e = #expect(throws: CredentialError.usage(message, namesItsHelp: message.contains("(see: "))) { try parse(args) }
        #expect(e?.exitCode == 2)
    }

    /// No verb: the short help (stderr, exit 2), not a one-line "missing verb" (issue 29).
    @Test func noVerbIsTheShortHelp() throws {
        for args in [[], ["--profile", "work"], ["-v"]] {
            let help = try #require(try parse(args).command.verb as? HelpCommand, "\(args)")
            #expect(help.short && help.verb == nil, "\(args)")
        }
        #expect((try parse(["--help"]).command.verb as? HelpCommand)?.short == false)
    }

    @Test func usageTakesJSONAndGlobalOptions() throws {
        guard let plain = try parse(["usage"]).command.verb as? UsageCommand else { Issue.record("not usage"); return }
        #expect(!plain.json && !plain.all)
        let inv = try parse(["usage", "--json", "--profile", "work", "-v"])
        guard let json = inv.command.verb as? UsageCommand else { Issue.record("not usage"); return }
        #expect(json.json && !json.all && inv.globals.profile.name == "work" && inv.globals.verbose)
        guard let all = try parse(["usage", "--all", "--json"]).command.verb as? UsageCommand else { Issue.record("not usage"); return }
        #expect(all.json && all.all)
        #expect(throws: CredentialError.usage("option --all given twice")) { try parse(["usage", "--all", "--all"]) }
        guard let help = try parse(["usage", "--help"]).command.verb as? HelpCommand else { Issue.record("not help"); return }
        #expect(help.verb == "usage")
    }

    @Test func badEnvironmentValueIsUsage() {
        #expect(throws: CredentialError.usage("invalid value 'nowhere' for CHATGPT_CREDENTIAL_STORE: use auto, secret-service or file")) {
            try parse(["get"], env: ["CHATGPT_CREDENTIAL_STORE": "nowhere"])
        }
    }

    @Test func accessCacheIsOnWithFiveMinutesByDefault() throws {
        #expect(try parse(["get"]).globals.cache == AccessCacheSettings(enabled: true, ttl: 300))
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "", "CHATGPT_CREDENTIAL_CACHE_TTL": ""]).globals.cache
                == AccessCacheSettings(enabled: true, ttl: 300))
    }

    @Test func noCacheFromTheFlagAnywhereOrTheEnvironment() throws {
        for args in [["--no-cache", "get"], ["get", "--no-cache"], ["exec", "--no-cache", "--", "env"], ["status", "--json", "--no-cache"]] {
            #expect(try parse(args).globals.cache.enabled == false, "\(args)")
        }
        #expect(try parse(["--no-cache", "get"], argv0: "git-credential-chatgpt").globals.cache.enabled == false)
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "off"]).globals.cache.enabled == false)
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_CACHE": "on"]).globals.cache.enabled == true)
        // The flag wins over the environment.
        #expect(try parse(["get", "--no-cache"], env: ["CHATGPT_CREDENTIAL_CACHE": "on"]).globals.cache.enabled == false)
    }

    @Test func cacheTTLFromTheEnvironment() throws {
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_CACHE_TTL": "1"]).globals.cache.ttl == 1)
        #expect(try parse(["get"], env: ["CHATGPT_CREDENTIAL_CACHE_TTL": "3600"]).globals.cache.ttl == 3600)
    }

    @Test(arguments: [
        ("CHATGPT_CREDENTIAL_CACHE", "maybe", "invalid value 'maybe' for CHATGPT_CREDENTIAL_CACHE: use on or off"),
        ("CHATGPT_CREDENTIAL_CACHE", "OFF", "invalid value 'OFF' for CHATGPT_CREDENTIAL_CACHE: use on or off"),
        ("CHATGPT_CREDENTIAL_CACHE", "0", "invalid value '0' for CHATGPT_CREDENTIAL_CACHE: use on or off"),
        ("CHATGPT_CREDENTIAL_CACHE_TTL", "0", "invalid value '0' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from 1 to 3600"),
        ("CHATGPT_CREDENTIAL_CACHE_TTL", "3601", "invalid value '3601' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from 1 to 3600"),
        ("CHATGPT_CREDENTIAL_CACHE_TTL", "5m", "invalid value '5m' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from 1 to 3600"),
        ("CHATGPT_CREDENTIAL_CACHE_TTL", "-1", "invalid value '-1' for CHATGPT_CREDENTIAL_CACHE_TTL: a number of seconds from 1 to 3600"),
    ])
    func badCacheSettingsAreUsageErrors(_ name: String, _ value: String, _ message: String) {
        #expect(throws: CredentialError.usage(message)) { try parse(["get"], env: [name: value]) }
        #expect(CredentialError.usage(message).exitCode == 2)
    }

    @Test func noCacheTakesNoValue() {
        #expect(throws: CredentialError.usage("option --no-cache takes no value")) { try parse(["get", "--no-cache=yes"]) }
    }

    @Test func execTakesEverythingAfterDoubleDash() throws {
        let inv = try parse(["exec", "--profile", "p", "--", "sh", "-c", "echo --json"])
        guard let exec = inv.command.verb as? ExecCommand else { Issue.record(); return }
        #expect(exec.argv == ["sh", "-c", "echo --json"])
        #expect(inv.globals.profile.name == "p")
        guard let bare = try parse(["exec", "env"]).command.verb as? ExecCommand else { Issue.record(); return }
        #expect(bare.argv == ["env"])
    }

    @Test func programNameSelectsProtocol() throws {
        let git = try parse(["get"], argv0: "/usr/local/bin/git-credential-chatgpt")
        guard case .helper(.git, let verb) = git.command else { Issue.record(); return }
        #expect(verb == "get")
        let docker = try parse(["list"], argv0: "docker-credential-chatgpt")
        guard case .helper(.docker, "list") = docker.command else { Issue.record(); return }
        let flag = try parse(["--protocol", "git", "frobnicate"])
        guard case .helper(.git, "frobnicate") = flag.command else { Issue.record(); return }
    }

    @Test func storeFromCodexOptionalPath() throws {
        guard let none = try parse(["store"]).command.verb as? StoreCommand else { Issue.record(); return }
        #expect(none.fromCodex == nil)
        guard let dflt = try parse(["store", "--from-codex"]).command.verb as? StoreCommand else { Issue.record(); return }
        #expect(dflt.fromCodex == .some(nil))
        guard let path = try parse(["store", "--from-codex", "/x/auth.json"]).command.verb as? StoreCommand else { Issue.record(); return }
        #expect(path.fromCodex == .some("/x/auth.json"))
    }

    /// `--take-over` imports a sign-in from a file in the format's own shape: only `codex` and
    /// `chatmock` have one; any other format is exit 2 before a file is looked at.
    @Test func takeOverIsOnlyForTheAuthJSONFormats() throws {
        for format in ["token", "env", "json"] {
            #expect(throws: CredentialError.usage("--take-over is for --format codex or chatmock (a file in their shape holding a sign-in); a \(format) sink never replaces a file it did not write")) {
                try parse(["sink", "add", "--format", format, "--path", "/x/auth.json", "--take-over"])
            }
        }
        for format in ["codex", "chatmock"] {
            #expect(try parse(["sink", "add", "--format", format, "--path", "/x/auth.json", "--take-over"]).command.verb is SinkCommand)
        }
    }

    @Test func helpAndVersion() throws {
        for (args, verb) in [(["--help"], nil), (["get", "--help"], "get"), (["help", "erase"], "erase")] as [([String], String?)] {
            guard let help = try parse(args).command.verb as? HelpCommand else { Issue.record("\(args)"); return }
            #expect(help.verb == verb, "\(args)")
        }
        guard case .version = try parse(["--version"]).command else { Issue.record(); return }
    }

    /// `--version` is a global option: before or after a verb it prints the version and the verb
    /// does not run (an `erase --version` erases nothing).
    @Test func versionWinsWhereverItStands() throws {
        for args in [["get", "--version"], ["--version", "get"], ["erase", "--no-revoke", "--version"], ["--version", "status", "--json"],
                     ["get", "--help", "--version"], ["exec", "--version", "--", "true"], ["--protocol", "git", "get", "--version"]] {
            guard case .version = try parse(args).command else { Issue.record("\(args) runs \(try parse(args).command)"); continue }
        }
        // What follows `--` is exec's command, not ours.
        guard let exec = try parse(["exec", "--", "tool", "--version"]).command.verb as? ExecCommand else { Issue.record(); return }
        #expect(exec.argv == ["tool", "--version"])
        // A bad option is still refused first (exit 2).
        #expect(throws: CredentialError.self) { try parse(["get", "--version", "--bogus"]) }
    }

    /// A verb's help names its own options in full and every global option once, in one short
    /// line (--help and --version are the main help's).
    @Test func everyVerbHelpNamesEveryOption() {
        for v in CommandLineSpec.verbs {
            let text = CommandLineSpec.verbHelp(v)
            for o in v.options { #expect(text.contains("  " + CommandLineSpec.optionHead(o)), "\(v.name) help lacks \(o.long)") }
            let short = text.components(separatedBy: "\nGlobal options: ").last ?? ""
            for o in CommandLineSpec.globalOptions where o.long != "--help" && o.long != "--version" {
                #expect(short.contains(o.long), "\(v.name) help's global line lacks \(o.long)")
            }
        }
        let main = CommandLineSpec.mainHelp()
        for o in CommandLineSpec.globalOptions { #expect(main.contains(o.long), "main help lacks \(o.long)") }
    }
}
