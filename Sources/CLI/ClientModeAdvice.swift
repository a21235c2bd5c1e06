import CredentialCore

/// Advice printed in client mode never names a verb client mode refuses as something to run
/// here (man page BROKER, Client mode): where a message says to run one (`sign in again:
/// chatgpt-credential login`, relayed from the broker or made here of its answer), it says to run
/// it on the broker's side. The verbs are those whose `clientMode` is `.refused`.
enum ClientModeAdvice {
    /// The verbs client mode refuses, from each verb's own policy.
    static var refusedVerbs: Set<String> {
        Set(CommandLineSpec.verbTypes.filter { $0.refusedInClientMode }.map { $0.spec.name })
    }

    /// `text` with every `chatgpt-credential [OPTIONS] VERB` that names a refused verb placed on
    /// the broker's side: `…: chatgpt-credential login` becomes `… on the broker's side:
    /// chatgpt-credential login` ("here" dropped: `sign in here:` is not here); elsewhere `on the
    /// broker's side` ends the clause. A clause (between `;`, `(` and `)`) that already says
    /// "broker's side", or points at the verb's `--help`, is left alone.
    static func onTheBrokersSide(_ text: String, refused: Set<String> = refusedVerbs) -> String {
        var chars = Array(text)
        let program = Array(CommandLineSpec.programName + " ")
        let side = "broker's side"
        func indices(of needle: [Character], in hay: [Character]) -> [Int] {
            guard hay.count >= needle.count else { return [] }
            return (0...(hay.count - needle.count)).filter { Array(hay[$0..<($0 + needle.count)]) == needle }
        }
        // From the last to the first, so that what is inserted does not move what is still to do.
        for start in indices(of: program, in: chars).reversed() {
            // The verb: the first word after the program that is not an option or its value.
            var words = String(chars[(start + program.count)...]).split(separator: " ", omittingEmptySubsequences: true).makeIterator()
            var verb: String?
            while let w = words.next() {
                if w == "--profile" || w == "--store" || w == "--broker" { _ = words.next(); continue }
                if w.hasPrefix("-") { continue }
                verb = String(w.drop(while: { $0 == "'" || $0 == "\"" }).prefix(while: { $0.isLetter || $0 == "-" }))
                break
            }
            guard let verb, refused.contains(verb) else { continue }
            let separators: Set<Character> = [";", "(", ")"]
            let clauseStart = (chars[..<start].lastIndex(where: { separators.contains($0) }) ?? -1) + 1
            let clauseEnd = chars[start...].firstIndex(where: { separators.contains($0) }) ?? chars.count
            let clause = String(chars[clauseStart..<clauseEnd])
            // Its help (`VERB --help`) runs here too: only running the verb is for the broker's side.
            if clause.contains(side) || clause.contains(" --help") { continue }
            if start >= 2, chars[start - 2] == ":", chars[start - 1] == " " {
                var at = start - 2
                if at >= 5, String(chars[(at - 5)..<at]) == " here" { chars.removeSubrange((at - 5)..<at); at -= 5 }
                chars.insert(contentsOf: " on the " + side, at: at)
            } else {
                // The clause ends after the command: say it there, before any closing period.
                var end = clauseEnd
                while end > clauseStart, chars[end - 1] == " " || chars[end - 1] == "." { end -= 1 }
                chars.insert(contentsOf: " on the " + side, at: end)
            }
        }
        return String(chars)
    }
}

extension CredentialError {
    /// This error as client mode reports it: its advice on the broker's side (`ClientModeAdvice`).
    /// The exit code is unchanged.
    var inClientMode: CredentialError {
        let f = { (m: String) in ClientModeAdvice.onTheBrokersSide(m) }
        switch self {
        case .failure(let m): return .failure(f(m))
        case .loginFailed(let m): return .loginFailed(f(m))
        case .usage(let m): return .usage(f(m))
        case .badInput(let m): return .badInput(f(m))
        case .temporary(let m): return .temporary(f(m))
        case .interrupted(let m): return .interrupted(f(m))
        case .keyringLocked(let m): return .keyringLocked(f(m))
        case .storeUnavailable(let m): return .storeUnavailable(f(m))
        case .storeNotAnswering(let m): return .storeNotAnswering(f(m))
        case .storeCorrupt(let m): return .storeCorrupt(f(m))
        case .wrongKey(let m): return .wrongKey(f(m))
        case .storeFailure(let m): return .storeFailure(f(m))
        case .brokerAnswered(let status, let m, let broker): return .brokerAnswered(status: status, message: f(m), broker: broker)
        // Made only where a store is read, never in client mode (its 401s come as brokerAnswered).
        case .notSignedIn, .notFoundKeyringUnreachable, .refreshRejected, .backendRejected, .lockTimeout, .permissionsTooOpen, .storeReadOnly:
            return self
        }
    }
}
