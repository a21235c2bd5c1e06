import Foundation
import Testing
@testable import CLI
@testable import Credentials
@_spi(CredentialOwner) @testable import Stores
@testable import OAuth
@testable import UsageBackend
@testable import HelperProtocols
@testable import CredentialCore
@testable import Secrets
@testable import CommandLineDocs

/// The completions and the man page's generated regions are what `make docs` writes from the
/// verbs' registry; each file is valid for its tool (mandoc, bash, zsh, fish) and completes what
/// it should; the man page's own prose keeps its sections and examples.
@Suite struct DocsTests {
    static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() } // DocsTests.swift, CLITests, Tests
        return url.path
    }()

    static let manPage = repoRoot + "/man/chatgpt-credential.1"
    /// The concepts page: stores, the one owner, refresh, the access cache (man page DESCRIPTION).
    static let conceptsPage = repoRoot + "/man/chatgpt-credential.7"
    static let bashCompletion = repoRoot + "/completions/chatgpt-credential.bash"
    static let zshCompletion = repoRoot + "/completions/_chatgpt-credential"
    static let fishCompletion = repoRoot + "/completions/chatgpt-credential.fish"
    static let readme = repoRoot + "/README.md"

    static var verbNames: [String] { CommandLineSpec.verbs.map(\.name) }

    static func read(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    // MARK: the registry

    @Test func specIsNotEmpty() {
        // The tests below that walk every verb and option would pass vacuously on an empty table.
        #expect(CommandLineSpec.allLongOptions.count >= 20)
        #expect(Self.verbNames.count >= 7)
    }

    // MARK: generated: the completions and the man page's synopsis and option lists

    /// A generated file differs from what `make docs` writes (the registry changed, or someone
    /// edited the file): the first line that differs, and what to run.
    @Test(arguments: GeneratedFiles.paths)
    func generatedFilesAreWhatMakeDocsWrites(_ path: String) throws {
        var current: [String: String] = [:]
        for p in GeneratedFiles.paths { current[p] = try Self.read(Self.repoRoot + "/" + p) }
        let committed = current[path] ?? ""
        let generated = try GeneratedFiles.texts(current: current)[path] ?? ""
        guard generated != committed else { return }
        let a = committed.split(separator: "\n", omittingEmptySubsequences: false)
        let b = generated.split(separator: "\n", omittingEmptySubsequences: false)
        let line = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
        Issue.record("""
            \(path) differs from what `make docs` writes from the verbs' specs; run `make docs` and commit the result.
            First difference, line \(line + 1):
              committed: \(line < a.count ? String(a[line]) : "(end of file)")
              generated: \(line < b.count ? String(b[line]) : "(end of file)")
            """)
    }

    /// The man page's item heads and option lists are the registry's: every verb and option has
    /// its `.It` (what the old drift test checked, now by construction), each option once.
    @Test func manPageItemsAreTheRegistrysOptionsAndVerbs() throws {
        let items = try Self.read(Self.manPage).split(separator: "\n").map(String.init).filter { $0.hasPrefix(".It ") }
        for verb in Self.verbNames {
            #expect(items.contains { $0 == ".It Cm \(verb)" || $0 == ".It Xo Cm \(verb)" }, "man page has no .It entry for verb \(verb)")
        }
        let global = CommandLineSpec.globalOptions.map { ".It " + ManPage.option($0, short: " , Fl ", long: "-") }
        for head in global { #expect(items.filter { $0 == head }.count == 1, "man page: \(head)") }
        #expect(global.contains(".It Fl v , Fl -verbose") && global.contains(".It Fl -store Cm auto | secret-service | file"))
    }

    @Test func manPageKeepsItsEnvironmentAndSections() throws {
        let lines = try Self.read(Self.manPage).split(separator: "\n").map(String.init)
        for spec in CommandLineSpec.globalOptions {
            if let env = spec.env {
                #expect(lines.contains(".It Ev \(env)"), "ENVIRONMENT lacks \(env)")
            }
        }
        for section in Self.manSectionOrder {
            #expect(lines.contains(".Sh \(section)"), "man page lacks section \(section)")
        }
        let concepts = try Self.read(Self.conceptsPage).split(separator: "\n").map(String.init)
        for section in Self.conceptSectionOrder {
            #expect(concepts.contains(".Sh \(section)"), "chatgpt-credential(7) lacks section \(section)")
        }
    }

    /// The sections in the order people look things up (issue 23, item 7): what it is, a quick
    /// start, the verbs, the topics, then the reference sections. Sections not listed (one a
    /// feature adds) may stand anywhere; these keep their relative order.
    /// chatgpt-credential(1) is the command line; chatgpt-credential(7) how a sign-in is kept (the
    /// topics), its SECURITY last.
    static let manSectionOrder = ["NAME", "SYNOPSIS", "DESCRIPTION", "QUICK START", "VERBS",
                                  "PROTOCOLS", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES",
                                  "SEE ALSO", "STANDARDS"]
    static let conceptSectionOrder = ["NAME", "DESCRIPTION", "STORES", "REFRESH", "ACCESS CACHE", "BROKER", "SEE ALSO", "SECURITY"]

    @Test func manPageSectionsComeInLookUpOrder() throws {
        let headings = try Self.read(Self.manPage).split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix(".Sh ") }.map { String($0.dropFirst(4)) }
        let positions = Self.manSectionOrder.map { headings.firstIndex(of: $0) }
        #expect(!positions.contains(nil), "man page lacks one of \(Self.manSectionOrder): \(headings)")
        let found = positions.compactMap { $0 }
        #expect(found == found.sorted(), "man page sections out of order: \(headings)")
        #expect(headings.prefix(4) == ["NAME", "SYNOPSIS", "DESCRIPTION", "QUICK START"],
                "QUICK START must follow DESCRIPTION at once: \(headings)")
        #expect(headings.last == "STANDARDS", "STANDARDS must close chatgpt-credential(1): \(headings)")
        #expect(!headings.contains("CHOICES") && !headings.contains("SECURITY CONSIDERATIONS"))
        let concepts = try Self.read(Self.conceptsPage).split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix(".Sh ") }.map { String($0.dropFirst(4)) }
        let at = Self.conceptSectionOrder.compactMap { concepts.firstIndex(of: $0) }
        #expect(at.count == Self.conceptSectionOrder.count && at == at.sorted(), "chatgpt-credential(7) sections: \(concepts)")
        #expect(concepts.last == "SECURITY", "SECURITY must close chatgpt-credential(7): \(concepts)")
    }

    /// The man page is read by people who have only the repository and the installed package:
    /// it names no document outside them, and its first screenful gets a newcomer started.
    @Test func manPageIsSelfContainedAndStartsQuickly() throws {
        for page in [Self.manPage, Self.conceptsPage] {
            let man = try Self.read(page)
            #expect(!man.contains("SPEC"), "\(page) mentions SPEC")
            #expect(!man.contains("shared/"), "\(page) mentions shared/")
        }
        var others = [Self.readme: try Self.read(Self.readme), "--help": CommandLineSpec.mainHelp()]
        for path in [Self.bashCompletion, Self.zshCompletion, Self.fishCompletion] { others[path] = try Self.read(path) }
        for verb in CommandLineSpec.verbs { others["\(verb.name) --help"] = CommandLineSpec.verbHelp(verb) }
        for (name, text) in others {
            #expect(!text.contains("SPEC.md") && !text.contains("shared/"), "\(name) names a document outside the repository")
        }
        guard let mandoc = Self.which("mandoc") else { return } // CI installs mandoc
        let r = Self.run(mandoc, ["-T", "ascii", "-O", "width=80", Self.manPage])
        #expect(r.status == 0)
        let text = Self.stripOverstrike(r.stdout).split(separator: "\n", omittingEmptySubsequences: false)
        let quick = text.firstIndex { $0 == "QUICK START" }
        let verbs = text.firstIndex { $0 == "VERBS" }
        #expect(quick != nil && verbs != nil && quick! < verbs!, "QUICK START must come before VERBS")
        #expect((quick ?? .max) < 120, "QUICK START starts at rendered line \(quick ?? -1), not within the first 120")
        // 1,435 lines before the reordering; 914 before the topics moved to chatgpt-credential(7).
        #expect(text.count < 700, "the man page renders to \(text.count) lines at 80 columns")
        let concepts = Self.run(mandoc, ["-T", "ascii", "-O", "width=80", Self.conceptsPage])
        #expect(concepts.status == 0)
        let conceptLines = concepts.stdout.split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(conceptLines < 500, "chatgpt-credential(7) renders to \(conceptLines) lines at 80 columns")
        for needle in ["chatgpt-credential login", "ChatGPT-Account-ID: $(chatgpt-credential get --account-id)",
                       "chatgpt-credential status", "chatgpt-credential usage", "chatgpt-credential erase",
                       "credential.https://chatgpt.com.helper chatgpt", "credHelpers"] {
            let section = text[(quick ?? 0)..<(verbs ?? text.count)].joined(separator: "\n")
            #expect(section.contains(needle), "QUICK START lacks \(needle)")
        }
    }

    /// ARCHITECTURE.md is the map of the code (modules, the paths of a `get` and a refresh, the
    /// rules, where to add what); behaviour is described once, in the man pages. It held a second,
    /// drifting account of every verb (1,150 lines) before.
    @Test func architectureIsAMapNotASecondManual() throws {
        let text = try Self.read("ARCHITECTURE.md")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 350, "ARCHITECTURE.md has \(lines) lines")
        for heading in ["## Modules", "## `get`, as data flowing through", "## Rules of thumb", "## How to find your way"] {
            #expect(text.contains(heading), "ARCHITECTURE.md lacks \(heading)")
        }
        #expect(!text.contains("### Verbs") && !text.contains("### Exit status"),
                "ARCHITECTURE.md describes verbs or exit statuses, which the man page describes")
    }

    @Test func manPageRendersItsTopics() throws {
        guard let mandoc = Self.which("mandoc") else { return } // CI installs mandoc
        let r = Self.run(mandoc, ["-T", "ascii", Self.manPage])
        let r7 = Self.run(mandoc, ["-T", "ascii", Self.conceptsPage])
        #expect(r.status == 0 && r7.status == 0)
        let text = Self.stripOverstrike(r.stdout) + Self.stripOverstrike(r7.stdout)
        for needle in ["credential.https://chatgpt.com.helper chatgpt", "!chatgpt-credential --protocol git",
                       "\"credHelpers\": { \"chatgpt.com\": \"chatgpt\" }", "credentials not found in native keychain",
                       "max(300, --min-ttl)", "NAME.lock", "NAME.age", "CHATGPT_CREDENTIAL_ISSUER",
                       "CHATGPT_CREDENTIAL_PASSPHRASE_FILE", "CHATGPT_CREDENTIAL_DBUS_TIMEOUT",
                       "CHATGPT_CREDENTIAL_BACKEND", "$CHATGPT_CREDENTIAL_BACKEND/wham/usage", "no limits reported"] {
            #expect(text.contains(needle), "rendered man page lacks \(needle)")
        }
    }

    @Test func manPageListsEveryExitStatus() throws {
        let man = try Self.read(Self.manPage)
        guard let start = man.range(of: ".Sh EXIT STATUS"), let end = man.range(of: ".Sh EXAMPLES") else {
            Issue.record("no EXIT STATUS section"); return
        }
        let section = man[start.upperBound..<end.lowerBound]
        for code in 0...5 { #expect(section.contains(".It \(code)\n"), "EXIT STATUS lacks \(code)") }
    }

    @Test func manPageLintsClean() throws {
        guard let mandoc = Self.which("mandoc") else { return } // CI installs mandoc
        let r = Self.run(mandoc, ["-Tlint", "-Wwarning", Self.manPage, Self.conceptsPage])
        #expect(r.status == 0, "mandoc -Tlint -Wwarning exit \(r.status)")
        #expect(r.stdout.isEmpty && r.stderr.isEmpty, "mandoc lint output:\n\(r.stdout)\(r.stderr)")
    }

    // MARK: usage: the examples are what the renderer prints

    /// The report behind the README's and the man page's `usage` examples, at Tue 1 Dec 2026 09:40 UTC.
    static let usageNow: Int64 = 1_796_118_000
    static let usageExample = UsageReport(
        plan: "plus",
        rateLimit: UsageLimit(allowed: true, limitReached: false, windows: [
            UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 42, resetsAt: usageNow + 7380),
            UsageWindow(role: .secondary, windowSeconds: 604800, usedPercent: 12.5, resetsAt: usageNow + 367200),
        ]),
        credits: UsageCredits(hasCredits: false, unlimited: false, balance: "0"),
        additional: [NamedUsageLimit(name: "GPT-5-Codex-Mini", limit: UsageLimit(
            windows: [UsageWindow(role: .primary, windowSeconds: 18000, usedPercent: 3, resetsAt: usageNow + 3600)]))])

    static func usageExampleText(_ style: UsageRenderer.Style) -> String {
        UsageRenderer(style: style, now: usageNow, localTime: UsageRendererTests.utc).text(usageExample, plan: "plus")
    }

    @Test func readmeShowsWhatUsagePrints() throws {
        let readme = try Self.read(Self.readme)
        let plain = Self.usageExampleText(.plain)
        #expect(readme.contains("```console\n$ chatgpt-credential usage | cat\n" + plain + "```\n"), "README's plain usage example drifted:\n\(plain)")
        // The terminal example is the terminal rendering without its colour codes.
        var terminal = ""
        var it = Self.usageExampleText(.terminal(unicode: true)).unicodeScalars.makeIterator()
        while let c = it.next() {
            if c == "\u{1b}" { while let d = it.next(), d != "m" {}; continue }
            terminal.unicodeScalars.append(c)
        }
        #expect(readme.contains("```console\n$ chatgpt-credential usage\n" + terminal + "```\n"), "README's terminal usage example drifted:\n\(terminal)")
        #expect(readme.contains("chatgpt-credential usage --json"))
    }

    /// The README's `usage --json | jq` recipe, run with jq on the JSON of the example answer,
    /// prints each window's label and percentage as the text view does (`5 h … 42 % used` →
    /// `5h  42 % used  resets TIME`).
    @Test func readmeJqRecipePrintsWhatTheTextViewPrints() throws {
        guard let jq = Self.which("jq") else { return } // the Makefile's APT_PACKAGES installs jq
        let readme = try Self.read(Self.readme)
        let prefix = "chatgpt-credential usage --json | jq -r '"
        let start = try #require(readme.range(of: prefix), "the README has no usage --json | jq -r recipe")
        let filter = String(readme[start.upperBound...].prefix { $0 != "\n" }.dropLast()) // up to the closing quote
        let dir = NSTemporaryDirectory() + "ccred-jq-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try UsageRenderer.json(Self.usageExample, plan: "plus").write(toFile: dir + "/usage.json", atomically: true, encoding: .utf8)
        let r = Self.run(jq, ["-r", filter, dir + "/usage.json"])
        #expect(r.status == 0, "jq exit \(r.status): \(r.stderr)")
        // What the text view says per window: its label and percentage.
        let windows = Self.usageExample.rateLimit?.windows ?? []
        let expected = windows.map { w in
            "\(UsageRenderer.label(w).replacingOccurrences(of: " ", with: ""))  \(UsageRenderer.percent(w.usedPercent ?? 0)) used  resets \(Clock.rfc3339(w.resetsAt ?? 0))"
        }
        #expect(r.stdout.split(separator: "\n").map(String.init) == expected, "jq printed:\n\(r.stdout)")
        let plain = Self.usageExampleText(.plain)
        for w in windows {
            #expect(plain.contains("\n" + UsageRenderer.label(w)) && plain.contains(UsageRenderer.percent(w.usedPercent ?? 0) + " used"))
        }
        #expect(windows.count == 2 && expected.first?.hasPrefix("5h  ") == true)
    }

    @Test func manPageShowsWhatUsagePrints() throws {
        let man = try Self.read(Self.manPage)
        let plain = Self.usageExampleText(.plain)
        #expect(man.contains(".Bd -literal -offset indent\n" + plain + ".Ed\n"), "the man page's usage example drifted:\n\(plain)")
        #expect(man.contains(".It Ev CHATGPT_CREDENTIAL_BACKEND\n"))
        #expect(man.contains(".Cm usage\n.Op Fl -json\n.Op Fl -all\n"), "the SYNOPSIS lacks usage [--json] [--all]")
    }

    @Test func helpNamesUsageAndItsBackend() throws {
        let main = CommandLineSpec.mainHelp()
        #expect(main.contains("\n  usage     show the plan and rate-limit windows"))
        #expect(main.contains("CHATGPT_CREDENTIAL_* (") && main.contains(" BACKEND,")) // the variables in one line (issue 29)
        let verb = try #require(CommandLineSpec.verb("usage"))
        let help = CommandLineSpec.verbHelp(verb)
        #expect(help.hasPrefix("Usage: chatgpt-credential [GLOBAL OPTIONS] usage [--json] [--all]\n"))
        #expect(help.contains("--all") && help.contains("every profile found in either store"))
        #expect(help.contains("--json") && help.contains("$CHATGPT_CREDENTIAL_BACKEND/wham/usage"))
    }

    // MARK: bash

    /// Sources the bash completion with a stub `chatgpt-credential` on PATH, sets COMP_WORDS and
    /// COMP_CWORD from `words` (the last one is being completed) and returns COMPREPLY.
    static func bashComplete(_ words: [String], stubOutput: String = "", stubStderr: String = "") throws -> (reply: [String], stderr: String) {
        let stub = try StubBinary(stdout: stubOutput, stderr: stubStderr)
        defer { stub.remove() }
        let quoted = words.map { GetFormatter.shellQuote($0) }.joined(separator: " ")
        let script = """
        source \(GetFormatter.shellQuote(bashCompletion)) || exit 97
        COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
        COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
        _chatgpt_credential
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let r = run("/bin/bash", ["--norc", "--noprofile", "-c", script], path: stub.directory)
        #expect(r.status == 0, "bash exit \(r.status): \(r.stderr)")
        return (r.stdout.split(separator: "\n").map(String.init), r.stderr)
    }

    @Test func bashCompletesVerbs() throws {
        #expect(try Self.bashComplete(["chatgpt-credential", "g"]).reply == ["get"])
        #expect(Set(try Self.bashComplete(["chatgpt-credential", ""]).reply) == Set(Self.verbNames))
        #expect(Set(try Self.bashComplete(["chatgpt-credential", "--protocol", "docker", ""]).reply)
                == ["get", "store", "erase", "list", "version"])
    }

    /// A verb's sub-verbs (`sink add|list|remove|run`) are offered as its first word, once, and
    /// never among its options.
    @Test func bashCompletesSubVerbs() throws {
        let sink = try #require(CommandLineSpec.verbs.first { $0.name == "sink" })
        guard case .subcommands(let subs) = sink.operands else { Issue.record("sink has no sub-verbs"); return }
        #expect(try Self.bashComplete(["chatgpt-credential", "sink", ""]).reply == subs)
        #expect(try Self.bashComplete(["chatgpt-credential", "-v", "sink", "r"]).reply.sorted() == ["remove", "run"])
        #expect(try Self.bashComplete(["chatgpt-credential", "sink", "add", ""]).reply.isEmpty)
        #expect(try Self.bashComplete(["chatgpt-credential", "sink", "--format", "codex", ""]).reply == subs)
        #expect(try Self.bashComplete(["chatgpt-credential", "sink", "--"]).reply.allSatisfy { $0.hasPrefix("--") })
    }

    @Test func bashCompletesOptionValues() throws {
        #expect(try Self.bashComplete(["chatgpt-credential", "--store", ""]).reply == ["auto", "secret-service", "file"])
        #expect(try Self.bashComplete(["chatgpt-credential", "get", "--store", "=", "s"]).reply == ["secret-service"])
        #expect(try Self.bashComplete(["chatgpt-credential", "--protocol", ""]).reply == ["plain", "git", "docker"])
    }

    @Test func bashCompletesEveryOptionOfEveryVerb() throws {
        let globals = CommandLineSpec.globalOptions.map(\.long)
        for verb in CommandLineSpec.verbs {
            let reply = Set(try Self.bashComplete(["chatgpt-credential", verb.name, "--"]).reply)
            for option in globals + verb.options.map(\.long) {
                #expect(reply.contains(option), "bash: '\(verb.name) --<TAB>' lacks \(option)")
            }
            // Options of other verbs are not offered.
            let foreign = Set(CommandLineSpec.verbs.flatMap(\.options).map(\.long)).subtracting(verb.options.map(\.long))
            #expect(reply.isDisjoint(with: foreign), "bash: '\(verb.name) --<TAB>' offers \(reply.intersection(foreign))")
        }
    }

    @Test func bashCompletesProfilesFromStatusAll() throws {
        let status = Self.statusAllJSON
        let r = try Self.bashComplete(["chatgpt-credential", "--profile", ""], stubOutput: status, stubStderr: "boom")
        #expect(r.reply == ["default", "work"])
        #expect(r.stderr.isEmpty, "completion printed: \(r.stderr)")
        #expect(try Self.bashComplete(["chatgpt-credential", "get", "--profile", "w"], stubOutput: status).reply == ["work"])
    }

    @Test func bashProfileCompletionIsSilentWithoutTheBinary() {
        let script = "source \(GetFormatter.shellQuote(Self.bashCompletion)); COMP_WORDS=(chatgpt-credential --profile ''); COMP_CWORD=2; _chatgpt_credential; printf '%s\\n' \"${COMPREPLY[@]}\""
        let r = Self.run("/bin/bash", ["--norc", "--noprofile", "-c", script], path: "/nonexistent")
        #expect(r.status == 0)
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        #expect(r.stderr.isEmpty, "completion printed: \(r.stderr)")
    }

    // MARK: zsh

    @Test func zshCompletionParses() throws {
        guard let zsh = Self.which("zsh") else { return } // CI installs zsh
        let r = Self.run(zsh, ["-n", Self.zshCompletion])
        #expect(r.status == 0 && r.stderr.isEmpty, "zsh -n: \(r.stderr)")
        #expect(try Self.read(Self.zshCompletion).hasPrefix("#compdef chatgpt-credential\n"))
    }

    /// Types `line` and TAB into an interactive zsh (in a pty, `zsh/zpty`) whose completion system
    /// loads the repository's `_chatgpt-credential`, with a stub `chatgpt-credential` on PATH; returns
    /// the command line after the TAB and the words zsh listed (options, or values) when it listed
    /// some. nil without zsh.
    static func zshComplete(_ line: String, stubOutput: String = "") throws -> (buffer: String, listed: [String])? {
        guard let zsh = which("zsh") else { return nil }
        let stub = try StubBinary(stdout: stubOutput, stderr: "boom")
        defer { stub.remove() }
        let completions = URL(fileURLWithPath: zshCompletion).deletingLastPathComponent().path
        // The marker is computed, so the echo of the typed definition never matches it.
        let script = """
        zmodload zsh/zpty || exit 97
        zpty z zsh -f -i
        zpty -w z 'PS1="%% "; fpath=(\(completions) $fpath); autoload -U compinit; compinit -u -D'
        zpty -w z 'zstyle ":completion:*" list-separator "#"; LISTMAX=0; COLUMNS=400'
        zpty -w z 'show() { print -r -- "@@$((6*7))@@$BUFFER@@$((6*7))@@"; BUFFER=; }; zle -N show; bindkey "^X^P" show'
        zpty -w -n z \(GetFormatter.shellQuote(line))$'\\t\\C-x\\C-p'
        zpty -r z out '*@@42@@*@@42@@*'
        print -r -- "$out"
        zpty -d z
        """
        let r = run("/usr/bin/timeout", ["30", zsh, "-f", "-c", script], path: stub.directory)
        #expect(r.status == 0, "zsh exit \(r.status): \(r.stderr)")
        // Without the terminal's carriage returns, bells and escape sequences.
        let plain = String(String.UnicodeScalarView(r.stdout.unicodeScalars.filter { $0 != "\r" && $0 != "\u{7}" }))
        let text = plain.replacing(try Regex("\u{1b}\\[[0-9;?]*[A-Za-z]"), with: "")
        let parts = text.components(separatedBy: "@@42@@")
        guard parts.count >= 3 else { Issue.record("zsh printed no command line: \(text)"); return (line, []) }
        // A listing, after the typed line: one candidate a row, its description after the separator.
        let listing = parts[0].components(separatedBy: line).dropFirst().joined(separator: line)
        let listed = listing.split(separator: "\n").compactMap { row -> String? in
            let word = row.prefix { $0 != " " && $0 != "#" }
            return row.dropFirst(word.count).drop { $0 == " " }.hasPrefix("#") ? String(word) : nil
        }
        return (parts[1], listed)
    }

    @Test(arguments: [
        ("chatgpt-credential g", "chatgpt-credential get "),
        ("chatgpt-credential get --min", "chatgpt-credential get --min-ttl="),
        ("chatgpt-credential --store s", "chatgpt-credential --store secret-service "),
        ("chatgpt-credential --protocol docker l", "chatgpt-credential --protocol docker list "),
        // An exclusive group: with --json given, --env is not offered.
        ("chatgpt-credential get --json --e", "chatgpt-credential get --json --e"),
        // A repeatable option is offered again.
        ("chatgpt-credential serve --allow-uid 1 --allow", "chatgpt-credential serve --allow-uid 1 --allow-uid="),
        ("chatgpt-credential help sta", "chatgpt-credential help status "),
        ("chatgpt-credential status --a", "chatgpt-credential status --all "),
        ("chatgpt-credential --profile w", "chatgpt-credential --profile work "),
    ])
    func zshCompletes(_ line: String, _ completed: String) throws {
        guard let r = try Self.zshComplete(line, stubOutput: Self.statusAllJSON) else { return } // CI installs zsh
        #expect(r.buffer == completed, "zsh: '\(line)<TAB>'")
    }

    @Test func zshCompletesEveryOptionOfEveryVerb() throws {
        // help takes a verb's name, which zsh offers instead of options.
        for verb in CommandLineSpec.verbs where verb.operands != .verbName {
            guard let r = try Self.zshComplete("chatgpt-credential \(verb.name) --") else { return }
            let listed = Set(r.listed)
            for option in CommandLineSpec.globalOptions.map(\.long) + verb.options.map(\.long) {
                #expect(listed.contains(option), "zsh: '\(verb.name) --<TAB>' lacks \(option): \(r.listed)")
            }
            let foreign = Set(CommandLineSpec.verbs.flatMap(\.options).map(\.long)).subtracting(verb.options.map(\.long))
            #expect(listed.isDisjoint(with: foreign), "zsh: '\(verb.name) --<TAB>' offers \(listed.intersection(foreign))")
        }
    }

    // MARK: fish

    static func fishComplete(_ line: String, stubOutput: String = "") throws -> (reply: [String], stderr: String)? {
        guard let fish = which("fish") else { return nil }
        let stub = try StubBinary(stdout: stubOutput, stderr: "boom")
        defer { stub.remove() }
        let script = "source \(GetFormatter.shellQuote(fishCompletion)); or exit 97; complete -C \(GetFormatter.shellQuote(line))"
        let r = run(fish, ["--no-config", "-c", script], path: stub.directory)
        #expect(r.status == 0, "fish exit \(r.status): \(r.stderr)")
        let reply = r.stdout.split(separator: "\n").map { String($0.split(separator: "\t", maxSplits: 1).first ?? "") }
        return (reply, r.stderr)
    }

    @Test func fishCompletionParses() throws {
        guard let fish = Self.which("fish") else { return } // CI installs fish
        let r = Self.run(fish, ["--no-config", "-n", Self.fishCompletion])
        #expect(r.status == 0 && r.stderr.isEmpty, "fish -n: \(r.stderr)")
    }

    @Test func fishCompletes() throws {
        guard let st = try Self.fishComplete("chatgpt-credential --st") else { return }
        #expect(st.reply == ["--store"])
        #expect(try Self.fishComplete("chatgpt-credential g")?.reply == ["get"])
        #expect(Set(try Self.fishComplete("chatgpt-credential --store ")?.reply ?? []) == ["auto", "secret-service", "file"])
        #expect(Set(try Self.fishComplete("chatgpt-credential --protocol ")?.reply ?? []) == ["plain", "git", "docker"])
        let status = Self.statusAllJSON
        let profiles = try Self.fishComplete("chatgpt-credential --profile ", stubOutput: status)
        #expect(Set(profiles?.reply ?? []) == ["default", "work"])
        #expect(profiles?.stderr.isEmpty == true, "completion printed: \(profiles?.stderr ?? "")")
    }

    /// After `--protocol git` or `docker`, only that protocol's verbs (the plain ones would not run).
    @Test func fishCompletesTheProtocolsVerbs() throws {
        guard Self.which("fish") != nil else { return }
        #expect(Set(try Self.fishComplete("chatgpt-credential --protocol git ")?.reply ?? []) == ["get", "store", "erase"])
        #expect(Set(try Self.fishComplete("chatgpt-credential --protocol=docker ")?.reply ?? []) == ["get", "store", "erase", "list", "version"])
        #expect(Set(try Self.fishComplete("chatgpt-credential -v --protocol docker ")?.reply ?? []) == ["get", "store", "erase", "list", "version"])
        #expect(Set(try Self.fishComplete("chatgpt-credential --protocol plain ")?.reply ?? []) == Set(Self.verbNames))
        #expect(Set(try Self.fishComplete("chatgpt-credential ")?.reply ?? []) == Set(Self.verbNames))
        #expect(Set(try Self.fishComplete("chatgpt-credential sink ")?.reply ?? []) == ["add", "list", "remove", "run"])
    }

    @Test func fishCompletesEveryOptionOfEveryVerb() throws {
        guard Self.which("fish") != nil else { return }
        for verb in CommandLineSpec.verbs {
            let reply = Set(try Self.fishComplete("chatgpt-credential \(verb.name) --")?.reply ?? [])
            for option in CommandLineSpec.globalOptions.map(\.long) + verb.options.map(\.long) {
                #expect(reply.contains(option), "fish: '\(verb.name) --<TAB>' lacks \(option)")
            }
        }
    }

    // MARK: helpers

    /// What `status --all --json` prints for two profiles (one unreadable), with a hostile email
    /// and error text that hold `"profile":"…"` escaped, and a name that is not a profile name:
    /// only `default` and `work` may be offered.
    static let statusAllJSON = #"[{"profile":"default","store":"file","signed_in":true,"needs_login":false,"email":"x\"profile\":\"evil\"@example.com","plan":"plus","default":true},"#
        + #"{"profile":"work","store":"secret-service","signed_in":false,"needs_login":false,"error":"locked \"profile\":\"evil2\"","default":false},"#
        + #"{"profile":"bad name","store":"file"}]"# + "\n"

    /// A directory holding a fake `chatgpt-credential` that prints fixed text (what `status --all
    /// --json --non-interactive` would; nothing for other arguments) and fails loudly on stderr,
    /// to prove the completions stay quiet.
    struct StubBinary {
        let directory: String
        init(stdout: String, stderr: String) throws {
            directory = NSTemporaryDirectory() + "ccred-stub-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try stdout.write(toFile: directory + "/out", atomically: true, encoding: .utf8)
            let script = "#!/bin/sh\n[ \"$*\" = 'status --all --json --non-interactive' ] && cat '\(directory)/out'\nprintf '%s\\n' \(GetFormatter.shellQuote(stderr)) >&2\nexit 0\n"
            let path = directory + "/chatgpt-credential"
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o755)
        }
        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    struct Result { var status: Int32; var stdout: String; var stderr: String }

    /// Runs `executable` with PATH = `path` + the usual system directories, HOME in a temp dir.
    static func run(_ executable: String, _ args: [String], path: String? = nil) -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = args
        var env = ["PATH": [path, "/usr/local/bin:/usr/bin:/bin"].compactMap { $0 }.joined(separator: ":"),
                   "HOME": NSTemporaryDirectory(), "LC_ALL": "C.UTF-8", "TERM": "dumb"]
        env["XDG_CONFIG_HOME"] = NSTemporaryDirectory() + "ccred-docs-none"
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return Result(status: -1, stdout: "", stderr: "spawn failed: \(error)") }
        // Output is small; read stderr on another thread so neither pipe can fill up.
        final class Box: @unchecked Sendable { var data = Data() }
        let errBox = Box()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { errBox.data = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errBox.data, as: UTF8.self))
    }

    static func which(_ tool: String) -> String? {
        for dir in ["/usr/bin", "/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: dir + "/" + tool) {
            return dir + "/" + tool
        }
        return nil
    }

    /// Removes nroff bold/underline overstrikes (`X\bX`, `_\bX`).
    static func stripOverstrike(_ s: String) -> String {
        var out: [Character] = []
        for ch in s {
            if ch == "\u{8}" { if !out.isEmpty { out.removeLast() }; continue }
            out.append(ch)
        }
        return String(out)
    }
}
