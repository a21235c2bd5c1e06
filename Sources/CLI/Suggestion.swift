/// "Did you mean …" for a mistyped verb, option or profile (the man page's "Typos"): the closest
/// candidate by edit distance (a swap of two neighbours counts as one edit, as git's does), and
/// the words people bring from other tools (`logout`, `token`) pointed at ours.
enum Suggestion {
    /// Words from gh, codex and docker that are not verbs here, and the verb (with options) that
    /// does the job: each verb's `wordsFromOtherTools`.
    static let verbsFromOtherTools: [String: String] = {
        var words: [String: String] = [:]
        for verb in CommandLineSpec.verbs {
            for (word, options) in verb.wordsFromOtherTools { words[word] = options.isEmpty ? verb.name : verb.name + " " + options }
        }
        return words
    }()

    /// The candidate closest to `word`, when it is close enough to be a typo: at most one edit
    /// for short words, two from six characters on, and never further than a third of the word.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let w = Array(word.lowercased().utf8)
        guard !w.isEmpty else { return nil }
        var best: (name: String, distance: Int)?
        for c in candidates {
            let d = distance(w, Array(c.lowercased().utf8))
            if best == nil || d < best!.distance { best = (c, d) }
        }
        guard let best else { return nil }
        let core = w.drop { $0 == UInt8(ascii: "-") }.count
        let allowed = core >= 6 ? 2 : 1
        return best.distance <= allowed && best.distance * 3 <= max(3, core) ? best.name : nil
    }

    /// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
    static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var prev2 = [Int](repeating: 0, count: b.count + 1)
        var prev = Array(0...b.count)
        var cur = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            cur[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { cur[j] = min(cur[j], prev2[j - 2] + 1) }
            }
            (prev2, prev, cur) = (prev, cur, prev2)
        }
        return prev[b.count]
    }

    /// The hint for an unknown verb: the verb meant, and where its help is. `refused`: the verbs
    /// client mode refuses, when it is on; one of them is meant for the broker's side (man page
    /// BROKER, Client mode), never "here".
    static func forVerb(_ word: String, refused: Set<String> = []) -> String {
        let program = CommandLineSpec.programName
        if let meant = verbsFromOtherTools[word.lowercased()] {
            let verb = String(meant.split(separator: " ")[0])
            if refused.contains(verb) {
                return "; to do that on the broker's side: \(program) \(meant), which client mode refuses here (see: \(program) \(verb) --help)"
            }
            return "; to do that here: \(program) \(meant) (see: \(program) \(verb) --help)"
        }
        let verbs = CommandLineSpec.verbs.map(\.name)
        if let meant = closest(to: word, among: verbs) {
            let place = refused.contains(meant) ? " Client mode refuses it here: run it on the broker's side" : ""
            return "; did you mean '\(meant)'?\(place) (see: \(program) \(meant) --help)"
        }
        return "; the verbs are \(verbs.joined(separator: ", ")) (see: \(program) --help)"
    }

    /// The hint for an unknown option: the closest option of the verb (or a global one).
    static func forOption(_ word: String, verb: String?) -> String {
        let program = CommandLineSpec.programName
        let own = verb.flatMap(CommandLineSpec.verb)?.options.map(\.long) ?? []
        let candidates = own + CommandLineSpec.globalOptions.map(\.long)
        let help = verb.map { "\(program) \($0) --help" } ?? "\(program) --help"
        if let meant = closest(to: word, among: candidates) { return "; did you mean '\(meant)'? (see: \(help))" }
        return " (see: \(help))"
    }
}
