import CLI
import HelperProtocols

/// The generated regions of the man page, between `.\" BEGIN GENERATED WHAT` and
/// `.\" END GENERATED WHAT` (WHAT: `synopsis`, `global-options`, `verb NAME` — a verb's item head in
/// VERBS — and `options NAME`, its option list). The synopsis and the item heads are written whole
/// from the registry; in an option list each `.It` line is, and the text under it is the page's own
/// (kept as it stands; a new option starts with its `--help` line). Everything outside the
/// regions is the page's own prose.
public enum ManPage {
    /// `page` with every generated region written from the registry. Throws `DocsError` when a
    /// region is missing, unknown, repeated or unterminated.
    public static func updating(_ page: String) throws -> String {
        try updating([page])[0]
    }

    /// The man pages with their generated regions written, each region in whichever page holds it
    /// (the command line and a concepts page may share them out), each exactly once in all.
    public static func updating(_ pages: [String]) throws -> [String] {
        var regions: [String: [String]] = ["synopsis": synopsis(), "global-options": []]
        var optionLists: [String: [OptionSpec]] = ["global-options": CommandLineSpec.globalOptions]
        for verb in CommandLineSpec.verbs {
            regions["verb " + verb.name] = itemHead(verb)
            if !verb.options.isEmpty { optionLists["options " + verb.name] = verb.options; regions["options " + verb.name] = [] }
        }
        var seen: Set<String> = []
        let updated = try pages.map { page in
            var out: [String] = []
            var lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)[...]
            while let line = lines.popFirst() {
                out.append(line)
                guard let name = marker("BEGIN", line) else {
                    if let stray = marker("END", line) { throw DocsError("the man page ends region '\(stray)' it never began") }
                    continue
                }
                guard regions[name] != nil else { throw DocsError("the man page has a generated region '\(name)' that names nothing in the registry") }
                guard seen.insert(name).inserted else { throw DocsError("the man page has the generated region '\(name)' twice") }
                var old: [String] = []
                while let next = lines.first, marker("END", next) == nil {
                    if marker("BEGIN", next) != nil { throw DocsError("the man page's region '\(name)' holds another region") }
                    old.append(lines.removeFirst())
                }
                guard let end = lines.popFirst(), marker("END", end) == name else {
                    throw DocsError("the man page's region '\(name)' has no '.\\\" END GENERATED \(name)'")
                }
                out += optionLists[name].map { optionList($0, keeping: old) } ?? regions[name]!
                out.append(end)
            }
            return out.joined(separator: "\n")
        }
        let missing = regions.keys.filter { !seen.contains($0) }.sorted()
        if !missing.isEmpty {
            throw DocsError("the man page lacks the generated region(s) \(missing.map { "'\($0)'" }.joined(separator: ", ")): "
                + "add '.\\\" BEGIN GENERATED NAME' and '.\\\" END GENERATED NAME' lines where each belongs")
        }
        return updated
    }

    /// The region's name when `line` is its BEGIN or END marker.
    static func marker(_ kind: String, _ line: String) -> String? {
        let prefix = ".\\\" \(kind) GENERATED "
        guard line.hasPrefix(prefix) else { return nil }
        return String(line.dropFirst(prefix.count))
    }

    // MARK: SYNOPSIS and the verbs' item heads

    static func synopsis() -> [String] {
        let program = CommandLineSpec.programName
        var s = [".Nm \(program)"]
        s += CommandLineSpec.settingOptions.map { ".Op " + option($0, short: " | ", long: "-") }
        s += [".Ar VERB", ".Op Ar verb-options", ".Pp"]
        for verb in CommandLineSpec.verbs {
            s += [".Nm \(program)", ".Op Ar global-options", ".Cm \(verb.name)"] + elements(verb)
        }
        let actions = CommandLineSpec.globalOptions.filter { !CommandLineSpec.settingOptions.map(\.long).contains($0.long) }
        s += [".Nm \(program)", "." + actions.map { option($0, short: " | Fl ", long: "-") }.joined(separator: " | ")]
        s += [".Pp",
              ".Nm git-credential-chatgpt", ".Cm " + GitCredentialProtocol.Verb.allCases.map(\.rawValue).joined(separator: " | "),
              ".Nm docker-credential-chatgpt", ".Cm " + DockerCredentialProtocol.Verb.allCases.map(\.rawValue).joined(separator: " | ")]
        return s
    }

    /// `.It Xo Cm get` … `.Xc`: the verb's synopsis as the head of its item in VERBS.
    static func itemHead(_ verb: VerbSpec) -> [String] {
        let rest = elements(verb)
        return rest.isEmpty ? [".It Cm \(verb.name)"] : [".It Xo Cm \(verb.name)"] + rest + [".Xc"]
    }

    /// One macro line per option group and operand: `.Op Fl -json | Fl -env`, `.Op Fl -min-ttl Ar SECONDS`.
    static func elements(_ verb: VerbSpec) -> [String] {
        var s = verb.optionGroups.map { group in
            ".Op " + group.map { option($0, short: " | ", long: "Fl -") }.joined(separator: " | ")
                + (group.count == 1 && group[0].repeatable ? " ..." : "")
        }
        switch verb.operands {
        case .none: break
        case .verbName: s.append(".Op Ar VERB")
        case .command: s += [".Fl -", ".Ar CMD", ".Op Ar ARG ..."]
        case .subcommands(let words): s += [".Cm " + words.joined(separator: " | "), ".Op Ar PATH"]
        }
        return s
    }

    /// An option in mdoc, its value spelled out: `Fl -store Cm auto | secret-service | file`,
    /// `Fl -from-codex Op Ar PATH`. With a short name, `Fl v` + `short` + `long` + `verbose`
    /// (`Fl v | -verbose` in a synopsis, `Fl v , Fl -verbose` as an item head).
    static func option(_ o: OptionSpec, short: String, long: String) -> String {
        var s = o.short.map { "Fl \($0)" + short + long } ?? "Fl -"
        s += o.long.dropFirst(2)
        if !o.choices.isEmpty { s += " Cm " + o.choices.joined(separator: " | ") }
        else if let v = o.value { s += o.valueOptional ? " Op Ar \(v)" : " Ar \(v)" }
        return s
    }

    // MARK: option lists

    /// The list of `options`, each `.It` line written from its spec, the text under it kept from
    /// `old` (the region as it stands) by the option's long name, else its `--help` line.
    static func optionList(_ options: [OptionSpec], keeping old: [String]) -> [String] {
        let bodies = itemBodies(old)
        var s = [".Bl -tag -width Ds -compact"]
        for o in options {
            s.append(".It " + option(o, short: " , Fl ", long: "-"))
            s += bodies[o.long] ?? [sentence(o.help)]
        }
        s.append(".El")
        return s
    }

    /// The text under each `.It` of the region's outer list, by the option its head names.
    static func itemBodies(_ region: [String]) -> [String: [String]] {
        var bodies: [String: [String]] = [:]
        var current: String?
        var depth = 0
        for line in region {
            if line.hasPrefix(".Bl") { depth += 1; if depth == 1 { continue } }
            if line.hasPrefix(".El") { depth -= 1; if depth == 0 { current = nil; continue } }
            if depth == 1, line.hasPrefix(".It ") { current = longOption(inHead: line); continue }
            if let c = current { bodies[c, default: []].append(line) }
        }
        return bodies
    }

    /// `--verbose` for `.It Fl v , Fl -verbose`: the first `Fl -NAME` of the head.
    static func longOption(inHead head: String) -> String? {
        let words = head.split(separator: " ")
        for (i, w) in words.enumerated() where w == "Fl" && i + 1 < words.count && words[i + 1].hasPrefix("-") {
            return "-" + words[i + 1]
        }
        return nil
    }

    /// A `--help` line as a sentence of mdoc text.
    static func sentence(_ help: String) -> String {
        (help.prefix(1).uppercased() + help.dropFirst() + ".").replacing("\\", with: "\\e")
    }
}

/// A generated file that cannot be written as asked: one line saying what to fix.
public struct DocsError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
