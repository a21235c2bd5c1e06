import Foundation
import Testing

/// Package.swift's module-graph comment (ARCHITECTURE.md, "Modules") says what each module
/// imports; the targets' dependency lists are what the build enforces. They must say the same, so
/// a reader of the comment is not misled (an outside review once found five places where they
/// did not).
@Suite struct ModuleGraphCommentTests {
    /// `//   NAME <- A, B, C(Loader)   description` lines, as name -> dependencies.
    static func commented(_ text: String) -> [String: Set<String>] {
        var graph: [String: Set<String>] = [:]
        let lines = text.split(separator: "\n").map(String.init)
        for (i, line) in lines.enumerated() where line.hasPrefix("//   ") && line.contains(" <- ") {
            let parts = line.dropFirst(5).components(separatedBy: " <- ")
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            // The list ends where two spaces begin the description; a list ending in a comma
            // goes on in the next line, indented.
            var list = parts[1].components(separatedBy: "  ")[0]
            if list.hasSuffix(","), i + 1 < lines.count {
                list += " " + lines[i + 1].dropFirst(2).trimmingCharacters(in: .whitespaces).components(separatedBy: "  ")[0]
            }
            var deps = Set<String>()
            for item in list.split(separator: ",") {
                let word = item.trimmingCharacters(in: .whitespaces)
                if word.hasSuffix("(Loader)") {
                    let base = String(word.dropLast("(Loader)".count))
                    deps.formUnion([base, base + "Loader"])
                } else {
                    deps.insert(word)
                }
            }
            graph[name] = deps
        }
        return graph
    }

    /// `.target(name: "NAME", dependencies: [...])` and `.executableTarget(...)`, the first
    /// dependencies list after each name.
    static func declared(_ text: String) -> [String: Set<String>] {
        var graph: [String: Set<String>] = [:]
        let pattern = try! NSRegularExpression(
            pattern: #"\.(?:target|executableTarget)\(\s*name: "([A-Za-z-]+)",\s*dependencies: \[([^\]]*)\]"#)
        let range = NSRange(text.startIndex..., in: text)
        for match in pattern.matches(in: text, range: range) {
            let name = String(text[Range(match.range(at: 1), in: text)!])
            let list = String(text[Range(match.range(at: 2), in: text)!])
            graph[name] = Set(list.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }.filter { !$0.isEmpty })
        }
        return graph
    }

    @Test func theCommentNamesEachModulesDependenciesAsTheTargetsDo() throws {
        let text = try String(contentsOfFile: DocsTests.repoRoot + "/Package.swift", encoding: .utf8)
        let comment = Self.commented(text)
        let targets = Self.declared(text)
        #expect(comment.count >= 15, "the module-graph comment was not found (\(comment.count) lines)")
        for (name, deps) in comment.sorted(by: { $0.key < $1.key }) {
            let actual = try #require(targets[name], "the comment names \(name), which is no target with dependencies")
            #expect(deps == actual, "\(name): the comment says \(deps.sorted()), the target depends on \(actual.sorted())")
        }
    }
}
