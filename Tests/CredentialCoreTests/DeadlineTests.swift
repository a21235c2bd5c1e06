import Testing
import CredentialCore
import Secrets
#if canImport(Glibc)
import Glibc
#endif

@Suite("Deadline")
struct DeadlineTests {
    @Test func returnsTheResultInTime() {
        var cancelled = false
        let value = Deadline.run(seconds: 2, onTimeout: { cancelled = true }) { 6 * 7 }
        #expect(value == 42)
        #expect(!cancelled)
    }

    @Test func givesUpAtTheDeadline() {
        var cancelled = false
        let start = Clock.monotonicMillis()
        let value: Int? = Deadline.run(seconds: 0.2, onTimeout: { cancelled = true }) { usleep(1_500_000); return 1 }
        let ms = Clock.monotonicMillis() - start
        #expect(value == nil)
        #expect(cancelled)
        #expect(ms >= 190 && ms < 700, "took \(ms) ms")
    }

    @Test func parsesTheOverride() {
        #expect(Deadline.parseSeconds("3") == 3)
        #expect(Deadline.parseSeconds("0.5") == 0.5)
        #expect(Deadline.parseSeconds("1.25") == 1.25)
        #expect(Deadline.parseSeconds("") == nil)
        #expect(Deadline.parseSeconds("0") == nil)
        #expect(Deadline.parseSeconds("-1") == nil)
        #expect(Deadline.parseSeconds("1.2.3") == nil)
        #expect(Deadline.parseSeconds("3s") == nil)
    }

    @Test func describesSeconds() {
        #expect(Deadline.describe(3) == "3 s")
        #expect(Deadline.describe(1.5) == "1.5 s")
        #expect(Deadline.describe(0.25) == "0.25 s")
        #expect(Deadline.describe(30) == "30 s")
    }
}
