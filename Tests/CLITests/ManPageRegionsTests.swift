import Testing
@testable import CLI
@testable import CommandLineDocs

/// How `make docs` rewrites the man page: the generated regions whole from the registry, an
/// option list's `.It` lines from the specs with the text under each kept, and a page whose
/// regions do not match the registry refused with the region to fix.
@Suite struct ManPageRegionsTests {
    /// A page with every region, empty, in one list (enough for `ManPage.updating`).
    static func page(dropping dropped: String? = nil, adding extra: [String] = [], statusOptions: [String] = []) -> String {
        var names = ["synopsis", "global-options"]
        for v in CommandLineSpec.verbs {
            names.append("verb " + v.name)
            if !v.options.isEmpty { names.append("options " + v.name) }
        }
        var lines = [".Sh VERBS"]
        for name in names where name != dropped {
            lines.append(".\\\" BEGIN GENERATED \(name)")
            if name == "options status" { lines += statusOptions }
            lines.append(".\\\" END GENERATED \(name)")
        }
        return (lines + extra).joined(separator: "\n") + "\n"
    }

    func region(_ name: String, in page: String) -> [String] {
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: ".\\\" BEGIN GENERATED \(name)"),
              let end = lines.firstIndex(of: ".\\\" END GENERATED \(name)") else { return [] }
        return Array(lines[(start + 1)..<end])
    }

    @Test func anOptionKeepsItsTextAndANewOneStartsWithItsHelp() throws {
        let old = [".Bl -tag -width Ds", ".It Fl -json Ar OLD-HEAD", "One object with", ".Bl -tag -width Ds", ".It Ql x", "nested", ".El",
                   ".It Fl -gone", "Removed from the registry.", ".El"]
        let updated = try ManPage.updating(Self.page(statusOptions: old))
        #expect(region("options status", in: updated) == [
            ".Bl -tag -width Ds -compact",
            ".It Fl -json", "One object with", ".Bl -tag -width Ds", ".It Ql x", "nested", ".El",
            ".It Fl -all", "Every profile found in either store.",
            ".El",
        ])
        #expect(region("verb get", in: updated) == [
            ".It Xo Cm get", ".Op Fl -account-id | Fl -id-token | Fl -json | Fl -header | Fl -env",
            ".Op Fl -min-ttl Ar SECONDS", ".Op Fl -force-refresh", ".Xc",
        ])
        #expect(region("verb serve", in: updated).contains(".Op Fl -allow-uid Ar UID ..."))
        #expect(region("verb exec", in: updated) == [".It Xo Cm exec", ".Fl -", ".Ar CMD", ".Op Ar ARG ...", ".Xc"])
        let synopsis = region("synopsis", in: updated)
        #expect(synopsis.contains(".Op Fl v | -verbose") && synopsis.contains(".Op Fl -store Cm auto | secret-service | file"))
        #expect(synopsis.contains(".Fl -version | Fl h | Fl -help"))
        #expect(synopsis.suffix(4) == [".Nm git-credential-chatgpt", ".Cm get | store | erase",
                                       ".Nm docker-credential-chatgpt", ".Cm get | store | erase | list | version"])
        // Writing it again changes nothing.
        #expect(try ManPage.updating(updated) == updated)
    }

    @Test(arguments: [
        ("verb get" as String?, nil as String?, "the man page lacks the generated region(s) 'verb get'"),
        (nil, ".\\\" BEGIN GENERATED verb frobnicate", "the man page has a generated region 'verb frobnicate' that names nothing in the registry"),
        (nil, ".\\\" BEGIN GENERATED synopsis", "the man page has the generated region 'synopsis' twice"),
        (nil, ".\\\" END GENERATED synopsis", "the man page ends region 'synopsis' it never began"),
    ])
    func aPageThatDoesNotMatchTheRegistryIsRefused(_ dropped: String?, _ extra: String?, _ message: String) {
        do {
            _ = try ManPage.updating(Self.page(dropping: dropped, adding: extra.map { [$0, ".\\\" END GENERATED " + ($0.split(separator: " ").dropFirst(3).joined(separator: " "))] } ?? []))
            Issue.record("accepted: \(message)")
        } catch let e as DocsError {
            #expect(e.description.hasPrefix(message), "\(e.description)")
        } catch { Issue.record("\(error)") }
    }

    /// The regions may be shared out between pages (the command line's and a concepts page),
    /// each once in all.
    @Test func theRegionsMayLiveInTwoPages() throws {
        let first = ".\\\" BEGIN GENERATED synopsis\n.\\\" END GENERATED synopsis\n"
        let rest = Self.page(dropping: "synopsis")
        let updated = try ManPage.updating([first, rest])
        #expect(region("synopsis", in: updated[0]).first == ".Nm chatgpt-credential")
        #expect(region("verb get", in: updated[1]).first == ".It Xo Cm get")
        do {
            _ = try ManPage.updating([first, Self.page()])
            Issue.record("accepted the synopsis in both pages")
        } catch let e as DocsError {
            #expect(e.description == "the man page has the generated region 'synopsis' twice")
        } catch { Issue.record("\(error)") }
    }

    @Test func anUnterminatedRegionIsRefused() {
        do {
            _ = try ManPage.updating(".\\\" BEGIN GENERATED synopsis\n.Nm x\n")
            Issue.record("accepted an unterminated region")
        } catch let e as DocsError {
            #expect(e.description == "the man page's region 'synopsis' has no '.\\\" END GENERATED synopsis'")
        } catch { Issue.record("\(error)") }
    }
}
