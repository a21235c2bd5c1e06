import Foundation
import Testing
@testable import CLI

/// "One verb, one file" (ARCHITECTURE.md, "How to find your way"): each verb's spec — its
/// options, help and parsing — is declared in its own `CLI/…Command.swift`, which also holds what
/// it does, and nowhere else names its options.
@Suite struct VerbLayoutTests {
    static func source(_ name: String) throws -> String {
        try String(contentsOfFile: DocsTests.repoRoot + "/Sources/CLI/" + name, encoding: .utf8)
    }

    static func fileName(of verb: String) -> String {
        verb.prefix(1).uppercased() + verb.dropFirst() + "Command.swift"
    }

    @Test(arguments: CommandLineSpec.verbs.map(\.name))
    func eachVerbIsDeclaredInItsOwnFile(_ verb: String) throws {
        let file = try Self.source(Self.fileName(of: verb))
        #expect(file.contains("name: \"\(verb)\""), "\(Self.fileName(of: verb)) does not declare the VerbSpec of '\(verb)'")
        // Its behaviour is there too (help's and version's `Runner` methods included).
        #expect(file.contains("extension Runner {"), "\(Self.fileName(of: verb)) has no behaviour")
    }

    @Test func theParserAndTheSpecNameNoVerbOption() throws {
        let verbOptions = Set(CommandLineSpec.verbs.flatMap(\.options).map(\.long))
            .subtracting(CommandLineSpec.globalOptions.map(\.long))
        for shared in ["ArgumentParser.swift", "CommandLineSpec.swift", "Invocation.swift"] {
            let text = try Self.source(shared)
            for option in verbOptions {
                #expect(!text.contains("\"\(option)\""), "\(shared) names the verb option \(option): it belongs in its verb's file")
            }
        }
    }
}
