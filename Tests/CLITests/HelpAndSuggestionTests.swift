import Testing
@testable import CLI

/// Help fits the width it is given and breaks only at spaces; typos get the nearest word.
@Suite struct HelpAndSuggestionTests {
    static func helps(width: Int) -> [String] {
        [CommandLineSpec.mainHelp(width: width), CommandLineSpec.shortHelp(width: width)] + CommandLineSpec.verbs.map { CommandLineSpec.verbHelp($0, width: width) }
    }

    /// Wrapped to the terminal, and never wider than 80 columns (a wide terminal too): `--help`
    /// fits 80 columns. An example is a command to copy and is not wrapped; on a terminal
    /// narrower than it, the terminal folds it.
    @Test(arguments: [50, 60, 80, 100, 200])
    func everyHelpLineFitsTheWidth(_ width: Int) {
        let fits = min(width, 80)
        for text in Self.helps(width: width) {
            var inExamples = false
            for line in text.split(separator: "\n") {
                if !line.hasPrefix(" ") { inExamples = line == "Examples:" }
                if inExamples && line.hasPrefix("  ") { #expect(line.count <= 80, "example of \(line.count) columns: \(line)"); continue }
                // A single word longer than the width may stand alone; nothing else may overflow.
                let overflows = line.count > fits && line.split(separator: " ").count > 1
                #expect(!overflows, "line of \(line.count) columns at width \(width): \(line)")
            }
        }
    }

    /// No help shows a regular expression (`--profile`'s names are said in words) and an option
    /// with a few values spells them out (`--protocol plain|git|docker`), in every help (issue 29).
    @Test func noHelpShowsAPatternAndChoicesAreSpelledOut() {
        for text in Self.helps(width: 80) {
            for pattern in ["[A-Za-z", "{0,", "]{", "\\d", "[a-z"] {
                #expect(!text.contains(pattern), "a help shows '\(pattern)':\n\(text)")
            }
            #expect(!text.contains("--protocol PROTOCOL") && !text.contains("--store STORE"), "\(text)")
        }
        #expect(CommandLineSpec.mainHelp().contains("--protocol plain|git|docker"))
        #expect(CommandLineSpec.mainHelp().contains("--store auto|secret-service|file"))
        // The global line of a verb's help is wrapped: compare its words.
        let get = CommandLineSpec.verbHelp(CommandLineSpec.verb("get")!).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(get.contains("--protocol plain|git|docker") && get.contains("--profile NAME"))
    }

    /// The short help: the usage line, six verbs, where to read more; at most 15 lines.
    @Test func shortHelpIsTheUsageLineSixVerbsAndWhereToReadMore() {
        let short = CommandLineSpec.shortHelp()
        let lines = short.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count <= 15, "\(lines.count) lines")
        #expect(lines.first == "Usage: chatgpt-credential [GLOBAL OPTIONS] VERB [VERB OPTIONS]")
        let verbs = lines.filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }.map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(verbs.count == 6 && verbs.prefix(3) == ["login", "get", "status"], "\(verbs)")
        #expect(short.contains("chatgpt-credential --help") && short.contains("man chatgpt-credential"))
    }

    /// Wrapping never cuts a word: the words of a wrapped text are the words of the original.
    @Test func wrapBreaksOnlyAtSpaces() {
        let text = "the code is pushed to the clipboard with OSC 52 unconditionally when asked"
        for width in 10...40 {
            let wrapped = CommandLineSpec.wrap(text, width: width, indent: 4)
            #expect(wrapped.split(whereSeparator: { $0 == " " || $0 == "\n" }) == text.split(separator: " "))
        }
    }

    @Test func everyVerbHasAnExampleAndTheCurlLineIsComplete() {
        for v in CommandLineSpec.verbs { #expect(!v.examples.isEmpty, "\(v.name) has no example") }
        // The curl line is the man page's QUICK START and the README's; `--help` stays within 40 lines.
        #expect(CommandLineSpec.mainHelp().split(separator: "\n", omittingEmptySubsequences: false).count <= 41)
    }

    @Test(arguments: [
        ("lgoin", "login"), ("staus", "status"), ("gte", "get"), ("ueage", "usage"), ("erse", "erase"),
    ])
    func verbTypos(_ typo: String, _ meant: String) {
        #expect(Suggestion.closest(to: typo, among: CommandLineSpec.verbs.map(\.name)) == meant)
    }

    @Test func farWordsGetNoSuggestion() {
        #expect(Suggestion.closest(to: "frobnicate", among: CommandLineSpec.verbs.map(\.name)) == nil)
        #expect(Suggestion.closest(to: "x", among: ["get"]) == nil)
        #expect(Suggestion.closest(to: "--nope", among: ["--json", "--no-cache"]) == nil)
    }

    @Test func optionTyposAndWordsFromOtherTools() {
        #expect(Suggestion.closest(to: "--devcie", among: ["--device", "--browser", "--no-browser"]) == "--device")
        #expect(Suggestion.forVerb("token") == "; to do that here: chatgpt-credential get (see: chatgpt-credential get --help)")
        #expect(Suggestion.forVerb("logout") == "; to do that here: chatgpt-credential erase (see: chatgpt-credential erase --help)")
        #expect(Suggestion.distance(Array("ab".utf8), Array("ba".utf8)) == 1)
        #expect(Suggestion.forVerb("list") == "; to do that here: chatgpt-credential status --all (see: chatgpt-credential status --help)")
    }

    /// Each verb names the words other tools use for its job: a word is pointed at one verb only,
    /// and is never a verb's own name (it would shadow nothing, but it would mislead).
    @Test func wordsFromOtherToolsPointAtOneVerbEach() {
        var claimedBy: [String: [String]] = [:]
        for v in CommandLineSpec.verbs { for word in v.wordsFromOtherTools.keys { claimedBy[word, default: []].append(v.name) } }
        for (word, verbs) in claimedBy {
            #expect(verbs.count == 1, "'\(word)' is claimed by \(verbs)")
            #expect(CommandLineSpec.verb(word) == nil, "'\(word)' is a verb")
        }
        #expect(Set(Suggestion.verbsFromOtherTools.keys) == Set(claimedBy.keys))
        #expect(claimedBy.count >= 18) // not vacuous
    }
}
