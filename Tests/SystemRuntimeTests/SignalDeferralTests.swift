import Testing
@testable import CredentialCore
@testable import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// The window's dispositions, without raising anything (a recorded signal would end every later
/// `Runner` in this test process with 128 + n): installed inside, the previous ones back outside,
/// an ignored signal left ignored, nested windows restoring only at the outermost end, and the
/// login flows' Ctrl-C watch back in place after an exchange. Signals themselves are sent to the
/// built binary in SignalDeferralTests (end-to-end).
@Suite(.serialized) struct SignalDispositionTests {
    func handler(_ sig: Int32) -> sighandler_t? {
        var old = sigaction()
        sigaction(sig, nil, &old)
        return old.__sigaction_handler.sa_handler
    }

    func same(_ a: sighandler_t?, _ b: sighandler_t?) -> Bool {
        unsafeBitCast(a, to: Int.self) == unsafeBitCast(b, to: Int.self)
    }

    @Test func installedInsideRestoredOutsideNestedAndIgnoredKept() {
        let before = handler(SIGTERM), quitBefore = handler(SIGQUIT)
        let previousHUP = signal(SIGHUP, SIG_IGN)
        defer { signal(SIGHUP, previousHUP) }
        #expect(!SignalDeferral.isOpen)
        SignalDeferral.during {
            #expect(SignalDeferral.isOpen)
            let inside = handler(SIGTERM)
            #expect(!same(inside, before), "SIGTERM is not deferred inside the window")
            #expect(same(handler(SIGHUP), SIG_IGN), "an ignored SIGHUP must stay ignored")
            SignalDeferral.during { #expect(same(handler(SIGTERM), inside)) }
            #expect(same(handler(SIGTERM), inside), "an inner window's end restored too early")
        }
        #expect(!SignalDeferral.isOpen)
        #expect(same(handler(SIGTERM), before))
        #expect(same(handler(SIGQUIT), quitBefore))
    }

    @Test func theLoginWatchGetsCtrlCBackAfterTheWindow() throws {
        let watch = try #require(InterruptWatch.install())
        defer { watch.restore() }
        let watching = handler(SIGINT)
        #expect(!same(watching, SIG_DFL))
        SignalDeferral.during { #expect(!same(handler(SIGINT), watching)) }
        #expect(same(handler(SIGINT), watching))
    }

    @Test func anErrorInsideStillCloses() {
        struct Boom: Error {}
        #expect(throws: Boom.self) { try SignalDeferral.during { throw Boom() } }
        #expect(!SignalDeferral.isOpen)
    }
}
