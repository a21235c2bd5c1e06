import Testing
import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

@Suite("Deadline")
struct DeadlineTests {
    /// Set from the watchdog thread, polled by the work.
    final class Flag: @unchecked Sendable { var raised = false }

    @Test func returnsTheResultInTime() {
        let cancelled = Flag()
        weak var held: Flag?
        do {
            let token = Flag() // held only by onTimeout, so by the watchdog thread until it ends
            held = token
            let value = Deadline.watch(seconds: 2, onTimeout: { [token] in _ = token; cancelled.raised = true }) { 6 * 7 }
            #expect(value == 42)
        }
        // The fact waited for: the watchdog thread has ended (it let go of onTimeout), so it can
        // no longer call it; had it waited for the deadline instead, it would have called it first.
        let start = Clock.monotonicMillis()
        while held != nil && Clock.monotonicMillis() - start < 5_000 { usleep(1_000) }
        #expect(held == nil, "the watchdog thread never ended")
        #expect(!cancelled.raised)
        #expect(Clock.monotonicMillis() - start < 1_000, "the watchdog waited for the deadline, not for the finish")
    }

    @Test func cancelsAtTheDeadlineSoTheWorkReturns() {
        let cancelled = Flag()
        let start = Clock.monotonicMillis()
        // The work stands for a D-Bus call that returns only once its GCancellable is cancelled.
        let value = Deadline.watch(seconds: 0.2, onTimeout: { cancelled.raised = true }) { () -> String in
            while !cancelled.raised && Clock.monotonicMillis() - start < 5_000 { usleep(1_000) }
            return cancelled.raised ? "cancelled" : "never cancelled"
        }
        let ms = Clock.monotonicMillis() - start
        #expect(value == "cancelled")
        #expect(ms >= 190 && ms < 700, "took \(ms) ms")
    }

    /// `CHATGPT_CREDENTIAL_DBUS_TIMEOUT` is read by the CLI's `Settings` (SettingsTests).
    @Test func secretServiceDeadlineDependsOnATerminal() {
        let interactive = isatty(0) == 1 || isatty(2) == 1
        #expect(Deadline.secretServiceSeconds() == (interactive ? 30 : 3))
    }

    @Test func describesSeconds() {
        #expect(Deadline.describe(3) == "3 s")
        #expect(Deadline.describe(1.5) == "1.5 s")
        #expect(Deadline.describe(0.25) == "0.25 s")
        #expect(Deadline.describe(30) == "30 s")
    }
}
