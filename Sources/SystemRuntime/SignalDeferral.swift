import CredentialCore
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// The spend-to-save window (man page, REFRESH, "Signals during a refresh"): from the moment a single-use secret — a
/// refresh token, an authorization code — is sent to the issuer until the answer is saved,
/// SIGINT, SIGTERM, SIGHUP and SIGQUIT are recorded instead of acted on, so the rotation the
/// issuer has already made is not lost. The exchange and the save keep their own deadlines, so
/// the deferral cannot outlast them. A library never exits: the executable's edge asks
/// `deferredSignal` once the owner has returned and exits 128 + n before printing anything.
/// The handler lives in C (CSystemShims): it only stores a `sig_atomic_t` and, when stderr was a
/// terminal at the start of the window, says once that the save is being finished. A signal the
/// caller ignores stays ignored, and the previous dispositions (the login flows' Ctrl-C watch,
/// say) are put back when the outermost window closes.
public enum SignalDeferral {
    /// The signals deferred inside the window.
    public static let deferred: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Runs `body` inside the window (windows nest; the outermost one restores).
    public static func during<T>(_ body: () throws -> T) rethrows -> T {
        cs_defer_signals_begin(isatty(2) == 1 ? 1 : 0)
        defer { cs_defer_signals_end() }
        return try body()
    }

    /// The first signal that arrived inside any window of this process, nil when none did.
    public static var deferredSignal: Int32? {
        let n = cs_deferred_signal()
        return n == 0 ? nil : n
    }

    /// Whether a window is open now.
    public static var isOpen: Bool { cs_defer_signals_depth() > 0 }
}
