import Testing
@testable import CLI
@testable import CredentialCore
import TestSupport

/// `serve`'s options (man page BROKER): defaults, the repeatable --allow-uid, and bad values as
/// usage errors (exit 2).
@Suite struct ServeArgumentsTests {
    func parse(_ args: [String]) throws -> Command {
        try ArgumentParser.parse(["chatgpt-credential"] + args, settings: Settings()).command
    }

    func serveOptions(_ args: [String]) throws -> ServeOptions? {
        (try parse(args).verb as? ServeCommand)?.options
    }

    @Test func defaultsLeaveEverythingToTheServer() throws {
        guard let o = try serveOptions(["serve"]) else { Issue.record("not serve"); return }
        #expect(o == ServeOptions())
        #expect(o.socket == nil && o.idleExit == nil && o.allowedUIDs.isEmpty)
    }

    /// Issue 29: `serve --print-socket` says where the broker listens and serves nothing (what
    /// the README's recipes bind; ReadmeRecipesTests checks the path with and without /run/user).
    @Test func printSocketIsAFlag() throws {
        let plain = try #require(try parse(["serve"]).verb as? ServeCommand)
        #expect(!plain.printSocket)
        let printing = try #require(try parse(["serve", "--socket", "/srv/b.sock", "--print-socket"]).verb as? ServeCommand)
        #expect(printing.printSocket && printing.options.socket == "/srv/b.sock")
        #expect(throws: CredentialError.usage("option --print-socket takes no value")) { try parse(["serve", "--print-socket=yes"]) }
    }

    @Test func everyOptionAndRepeatedAllowUID() throws {
        guard let o = try serveOptions(["--profile", "work", "serve", "--socket", "/tmp/x/b.sock", "--idle-exit=30",
                                              "--allow-uid", "1001", "--allow-uid=0"]) else { Issue.record("not serve"); return }
        #expect(o == ServeOptions(socket: "/tmp/x/b.sock", idleExit: 30, allowedUIDs: [1001, 0]))
    }

    @Test(arguments: [["serve", "--idle-exit", "-1"], ["serve", "--idle-exit", "1.5"], ["serve", "--idle-exit", ""],
                      ["serve", "--allow-uid", "root"], ["serve", "--allow-uid", "4294967295"], ["serve", "--allow-uid", "-3"],
                      ["serve", "--socket", ""], ["serve", "--socket", "a", "--socket", "b"], ["serve", "extra"],
                      // A relative socket path, and the overflow uid (every unmapped user of a namespace).
                      ["serve", "--socket", "relative.sock"], ["serve", "--socket", "./b.sock"], ["serve", "--allow-uid", "65534"],
                      ["serve", "--json"]])
    func badValuesAreUsageErrors(_ args: [String]) {
        let e = thrownCredentialError { _ = try parse(args) }
        #expect(e?.exitCode == 2, "\(args): \(String(describing: e))")
    }

    @Test func helpNamesTheEndpointsAndOptions() throws {
        let help = CommandLineSpec.verbHelp(try #require(CommandLineSpec.verb("serve")))
        for needle in ["/v1/token", "/v1/usage", "/v1/health", "--socket PATH", "--idle-exit SECONDS", "--allow-uid UID"] {
            #expect(help.contains(needle), "serve --help lacks \(needle)")
        }
    }
}
