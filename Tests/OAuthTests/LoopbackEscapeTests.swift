import Testing
@testable import OAuth
@testable import Transport
@testable import CredentialCore
@testable import Secrets

@Suite struct LoopbackEscapeTests {
    /// Found by fuzz/targets/loopback (2026-11-29): htmlEscape walked Characters, and "<"
    /// followed by a combining mark (U+302E, U+0301, U+20D2) is a single Character unequal to "<",
    /// so it reached the sign-in page unescaped.
    @Test(arguments: ["<\u{302E}script>", "<\u{0301}b>", "\"\u{20D2}", "'\u{0301}", ">\u{0301}", "&\u{0301}amp;"])
    func escapesMarkupFollowedByCombiningMarks(_ text: String) {
        let escaped = LoopbackListener.htmlEscape(text)
        for c in ["<", ">", "\"", "'"] { #expect(!escaped.contains(c)) }
        #expect(!escaped.unicodeScalars.contains("<"))
        #expect(!escaped.unicodeScalars.contains(">"))
        #expect(!escaped.unicodeScalars.contains("\""))
        #expect(!escaped.unicodeScalars.contains("'"))
    }

    @Test func pageGainsNoTags() {
        let plain = LoopbackListener.page("t", "m").unicodeScalars.filter { $0 == "<" }.count
        let hostile = LoopbackListener.page("<\u{302E}x>", "<\u{0301}img src=x onerror=alert(1)>")
        #expect(hostile.unicodeScalars.filter { $0 == "<" }.count == plain)
    }

    @Test func plainEscaping() {
        #expect(LoopbackListener.htmlEscape(#"a<b>&"c'"#) == "a&lt;b&gt;&amp;&quot;c&#39;")
        #expect(LoopbackListener.htmlEscape("caf\u{E9} \u{1B}[31m") == "caf\u{E9} [31m")
    }
}
