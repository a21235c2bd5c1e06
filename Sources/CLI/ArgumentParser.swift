import CredentialCore
import SystemRuntime
import OAuth
import HelperProtocols
import Credentials
import AccessCache
import Secrets
import Broker

/// Table-driven argv parsing (see `CommandLineSpec`). Global options may stand before or after
/// the verb; `--opt=value` and `--opt value` both work; environment variables (`Settings`)
/// supply defaults and flags win. The verb's own options are collected by its `VerbSpec`'s table
/// and read by its `Verb` type's `init` (in the verb's `…Command.swift`). Every error is a
/// `CredentialError.usage` naming the offending word.
public enum ArgumentParser {
    /// The protocol argv[0] names (`git-credential-…`, `docker-credential-…`), else plain.
    static func wireOfProgramName(_ argv: [String]) -> WireProtocol {
        let argv0 = argv.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
        if argv0.hasPrefix("git-credential-") { return .git }
        if argv0.hasPrefix("docker-credential-") { return .docker }
        return .plain
    }

    /// The protocol `argv` asks for (its program name, or the last valid `--protocol` before any
    /// `--`), read without parsing the rest: how to report an error the parser met.
    public static func wireNamed(by argv: [String]) -> WireProtocol {
        var wire = wireOfProgramName(argv)
        var args = argv.dropFirst()[...]
        while let arg = args.popFirst(), arg != "--" {
            let value = arg == "--protocol" ? args.first : arg.hasPrefix("--protocol=") ? String(arg.dropFirst("--protocol=".count)) : nil
            if let value, let w = WireProtocol(rawValue: value) { wire = w }
        }
        return wire
    }

    /// The command line when the environment was refused (`refusal`, exit 2): `--version`,
    /// `version` and help asked for touch nothing a variable sets, so they still answer, as they
    /// would with the variable unset (man page ENVIRONMENT); anything else — no verb at all
    /// among it — is the refusal, which says what to fix.
    public static func parse(_ argv: [String], refusedEnvironment refusal: CredentialError) throws -> Invocation {
        guard let invocation = try? parse(argv, settings: Settings()), invocation.command.needsNoCredential,
              (invocation.command.verb as? HelpCommand)?.short != true else { throw refusal }
        return invocation
    }

    public static func parse(_ argv: [String], settings: Settings) throws -> Invocation {
        var globals = GlobalOptions()
        globals.wire = wireOfProgramName(argv)

        // Defaults from the environment (`Settings`, which refused invalid values already).
        if let p = settings.profile { globals.profile = p; globals.profileNamed = true }
        if let s = settings.store { globals.store = s }
        if settings.nonInteractive { globals.nonInteractive = true }
        if settings.debug { globals.verbose = true }
        if let c = settings.cacheEnabled { globals.cache.enabled = c }
        if let t = settings.cacheTTL { globals.cache.ttl = t }
        if let b = settings.broker { globals.broker = b }

        var verb: String?
        /// The verb's type and spec, looked up once (nil: a word that names no verb, as git's and docker's may).
        var verbType: (any Verb.Type)?
        var verbSpec: VerbSpec?
        var verbFlags: [String: String?] = [:]
        var verbLists: [String: [String]] = [:]
        var rest: [String] = []
        var wantHelp = false
        var wantVersion = false
        var args = ArraySlice(argv.dropFirst())

        while let arg = args.popFirst() {
            if arg == "--" {
                rest = Array(args)
                args = []
                break
            }
            if arg.hasPrefix("-") && arg != "-" {
                var name = arg
                var inline: String?
                if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                    name = String(arg[..<eq])
                    inline = String(arg[arg.index(after: eq)...])
                } else if !arg.hasPrefix("--") {
                    // Short options: -v, -h (no bundling of options that take values).
                    guard arg.count == 2, let spec = CommandLineSpec.globalOptions.first(where: { $0.short == arg.last }) else {
                        throw CredentialError.usage("unknown option '\(Sanitize.line(arg, limit: 60))'" + Suggestion.forOption(arg, verb: verb), namesItsHelp: true)
                    }
                    name = spec.long
                }
                func value(_ spec: OptionSpec) throws -> String {
                    if let inline { return inline }
                    guard let next = args.popFirst() else { throw CredentialError.usage("option \(spec.long) needs a value (\(spec.value ?? "VALUE"))") }
                    return next
                }
                if let spec = CommandLineSpec.globalOptions.first(where: { $0.long == name }) {
                    if spec.value == nil, inline != nil { throw CredentialError.usage("option \(name) takes no value") }
                    switch name {
                    case "--profile": globals.profile = try Profile(try value(spec)); globals.profileNamed = true
                    case "--store": globals.store = try storeChoice(try value(spec), from: "--store")
                    case "--protocol":
                        let v = try value(spec)
                        guard let w = WireProtocol(rawValue: v) else {
                            throw CredentialError.usage("invalid value '\(Sanitize.line(v, limit: 40))' for --protocol: use plain, git or docker")
                        }
                        globals.wire = w
                    case "--non-interactive": globals.nonInteractive = true
                    case "--verbose": globals.verbose = true
                    case "--no-cache": globals.cache.enabled = false
                    case "--broker": globals.broker = try BrokerAddress.parse(try value(spec), from: "--broker")
                    case "--version": wantVersion = true
                    case "--help": wantHelp = true
                    default: break
                    }
                    continue
                }
                // A verb option: only valid once the verb is known (plain protocol).
                guard verb != nil, globals.wire == .plain, let vspec = verbSpec,
                      let spec = vspec.options.first(where: { $0.long == name }) else {
                    if let v = verb, globals.wire == .plain, verbSpec != nil {
                        throw CredentialError.usage("unknown option '\(Sanitize.line(name, limit: 60))' for '\(v)'" + Suggestion.forOption(name, verb: v), namesItsHelp: true)
                    }
                    throw CredentialError.usage("unknown option '\(Sanitize.line(name, limit: 60))'" + Suggestion.forOption(name, verb: nil), namesItsHelp: true)
                }
                if spec.repeatable {
                    verbLists[spec.long, default: []].append(try value(spec))
                    verbFlags[spec.long] = .some(nil)
                    continue
                }
                if verbFlags[spec.long] != nil { throw CredentialError.usage("option \(spec.long) given twice") }
                if spec.value == nil {
                    if inline != nil { throw CredentialError.usage("option \(name) takes no value") }
                    verbFlags[spec.long] = .some(nil)
                } else if spec.valueOptional {
                    if let inline { verbFlags[spec.long] = inline }
                    else if let next = args.first, !next.hasPrefix("-") { verbFlags[spec.long] = next; args.removeFirst() }
                    else { verbFlags[spec.long] = .some(nil) }
                } else {
                    verbFlags[spec.long] = try value(spec)
                }
                continue
            }
            if verb == nil {
                verb = arg
                verbType = CommandLineSpec.verbType(arg)
                verbSpec = verbType?.spec
                if globals.wire == .plain, verbSpec == nil {
                    throw CredentialError.usage("unknown verb '\(Sanitize.line(arg, limit: 60))'"
                        + Suggestion.forVerb(arg, refused: globals.broker == nil ? [] : ClientModeAdvice.refusedVerbs), namesItsHelp: true)
                }
                if verbSpec?.operands == .command {
                    // Everything after its own options is the command (exec).
                    while let next = args.first, next.hasPrefix("-"), next != "--" {
                        args.removeFirst()
                        try absorbGlobal(next, &args, &globals, &wantHelp, &wantVersion)
                    }
                    if args.first == "--" { args.removeFirst() }
                    rest = Array(args)
                    args = []
                    break
                }
                continue
            }
            if verbSpec?.operands == .verbName, rest.isEmpty {
                rest.append(arg)
                continue
            }
            if case .subcommands? = verbSpec?.operands, rest.count < 2 {
                rest.append(arg)
                continue
            }
            throw CredentialError.usage("unexpected argument '\(Sanitize.line(arg, limit: 60))'")
        }

        // A global option like the others: wherever it stands, the version is printed and no
        // verb runs (man page OPTIONS).
        if wantVersion { return Invocation(globals: globals, command: .version) }
        let help = Invocation(globals: globals, command: .verb(HelpCommand(verb: globals.wire == .plain ? verb : nil)))
        if globals.wire != .plain {
            guard let verb else {
                if wantHelp { return help }
                throw CredentialError.usage("missing \(globals.wire.rawValue) helper verb (get, store, erase…)")
            }
            if wantHelp { return help }
            return Invocation(globals: globals, command: .helper(globals.wire, verb: verb))
        }
        guard let verb else {
            if wantHelp { return help }
            return Invocation(globals: globals, command: .verb(HelpCommand.short))
        }
        if wantHelp { return help }
        guard let type = verbType, let spec = verbSpec else { throw CredentialError.usage("unknown verb '\(Sanitize.line(verb, limit: 60))'") }
        if spec.operands == .none, !rest.isEmpty {
            throw CredentialError.usage("unexpected argument '\(Sanitize.line(rest[0], limit: 60))'")
        }
        let command = try type.init(VerbArguments(values: verbFlags, lists: verbLists, operands: rest))
        return Invocation(globals: globals, command: .verb(command))
    }

    private static func absorbGlobal(_ arg: String, _ args: inout ArraySlice<String>, _ g: inout GlobalOptions, _ help: inout Bool, _ version: inout Bool) throws {
        var name = arg, inline: String?
        if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") { name = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...]) }
        func value() throws -> String {
            if let inline { return inline }
            guard let v = args.popFirst() else { throw CredentialError.usage("option \(name) needs a value") }
            return v
        }
        switch name {
        case "--profile": g.profile = try Profile(try value()); g.profileNamed = true
        case "--store": g.store = try storeChoice(try value(), from: "--store")
        case "--non-interactive": g.nonInteractive = true
        case "-v", "--verbose": g.verbose = true
        case "--no-cache": g.cache.enabled = false
        case "--broker": g.broker = try BrokerAddress.parse(try value(), from: "--broker")
        case "-h", "--help": help = true
        case "--version": version = true
        default: throw CredentialError.usage("unknown option '\(Sanitize.line(name, limit: 60))' for 'exec' (put the command after --)")
        }
    }

    static func storeChoice(_ s: String, from source: String) throws -> StoreChoice {
        guard let c = StoreChoice(rawValue: s) else {
            throw CredentialError.usage("invalid value '\(Sanitize.line(s, limit: 40))' for \(source): use auto, secret-service or file")
        }
        return c
    }
}
