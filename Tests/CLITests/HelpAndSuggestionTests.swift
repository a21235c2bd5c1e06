import Testing
@testable import CLI

/// Help fits the width it is given and breaks only at spaces; typos get the nearest word.
@Suite struct HelpAndSuggestionTests {
    static func helps(width: Int) -> [String] {
        [CommandLineSpec.mainHelp(width: width)] + CommandLineSpec.verbs.map { CommandLineSpec.verbHelp($0, width: width) }
    }

    @Test(arguments: [80, 100, 120])
    func everyHelpLineFitsTheWidth(_ width: Int) {
        for text in Self.helps(width: width) {
            for line in text.split(separator: "\n") {
                // A single word longer than the width may stand alone; nothing else may overflow.
                let overflows = line.count > width && line.split(separator: " ").count > 1
                #expect(!overflows, "line of \(line.count) columns at width \(width): \(line)")
            }
        }
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
        #expect(CommandLineSpec.mainHelp().contains("-H \"ChatGPT-Account-ID: $(chatgpt-credential get --account-id)\""))
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
