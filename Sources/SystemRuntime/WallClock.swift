import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// Sleeping until a moment of the wall clock (man page, SINKS: `sink run`): clock_nanosleep on
/// CLOCK_REALTIME with TIMER_ABSTIME, so a machine that was suspended wakes it at the moment
/// itself, not after the sleep's length counted from the suspend.
public enum WallClock {
    /// Sleeps until `moment` (Unix seconds); at once when it has passed.
    public static func sleep(until moment: Int64) {
        var target = timespec(tv_sec: Int(moment), tv_nsec: 0)
        while true {
            let rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &target, nil)
            if rc == EINTR { continue }
            return
        }
    }
}
