import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A soak of the spend-to-save window: `get --force-refresh` interrupted by a random signal
/// (SIGINT, SIGTERM, SIGHUP, SIGQUIT) at a random moment — before the refresh is sent, while it
/// is at the issuer, while it is saved, after — with a random issuer delay. Every round must end
/// with one consistent stored document whose refresh token is the live one at the test issuer,
/// and the issuer must never see a reused refresh token. SOAK_ROUNDS (default 40 per store) makes
/// a longer run by hand. The seed is fixed (`defaultSeed`), so every run of the suite is the same
/// run; CCRED_SOAK_SEED (or the older SOAK_SEED) picks another, e.g. to replay or to explore. The
/// seed is printed before the first round and named in every failure; the figures are printed.
@Suite(.serialized) struct SignalSoakTests {
    static var rounds: Int { Int(ProcessInfo.processInfo.environment["SOAK_ROUNDS"] ?? "") ?? 40 }

    static let defaultSeed: UInt64 = 0x5EED_C0DE_2026_0030

    /// CCRED_SOAK_SEED, else SOAK_SEED, else `defaultSeed` (decimal, or hex with 0x).
    static var seed: UInt64 {
        let env = ProcessInfo.processInfo.environment
        for name in ["CCRED_SOAK_SEED", "SOAK_SEED"] {
            guard let text = env[name], !text.isEmpty else { continue }
            if text.hasPrefix("0x"), let v = UInt64(text.dropFirst(2), radix: 16) { return v }
            if let v = UInt64(text) { return v }
        }
        return defaultSeed
    }

    @Test(arguments: ["file", "secret-service"])
    func randomSignalsAtRandomMomentsLoseNoRotation(store: String) throws {
        if store == "secret-service" && !SignalDeferralTests.bus { Issue.record("no D-Bus session: run the suite through scripts/with-keyring"); return }
        let seed = Self.seed
        print("signal soak (\(store)): seed \(seed) (CCRED_SOAK_SEED=\(seed) replays it), \(Self.rounds) rounds")
        var rng = SeededRandom(seed: seed) // SplitMix64: a failing round replays
        let w = try SignalDeferralTests.World(store: store, expiresIn: 3600)
        let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
        var sent: [Int32: Int] = [:]
        var outcomes = ["finished (exit 0)": 0, "deferred (exit 128+n)": 0, "stopped outside the window": 0]
        var spent = 0
        let started = Date()
        for round in 1...Self.rounds {
            let delay = Double.random(in: 0...0.4, using: &rng)
            // From before the request leaves (start-up) to after the answer is saved and printed.
            let moment = Double.random(in: 0...(delay + 0.25), using: &rng)
            let sig = signals.randomElement(using: &rng)!
            let context = "store \(store), seed \(seed), round \(round): \(SignalDeferralTests.name(sig)) at \(Int(moment * 1000)) ms, issuer delay \(Int(delay * 1000)) ms"
            try w.issuer.configure(["refresh_delay": delay])
            let before = try w.issuer.counter("refresh_success")
            let p = try Background(Harness.binary, w.args + ["get", "--force-refresh"], env: w.sandbox.env)
            usleep(useconds_t(moment * 1_000_000))
            kill(p.pid, sig)
            sent[sig, default: 0] += 1
            let r = p.finish()
            #expect(!r.timedOut, "\(context): hung")
            let stored = try w.stored()
            let storedAccess = stored?["access_token"] as? String
            if r.signaled {
                // Before the request left, or after the window closed (even after the answer was printed).
                outcomes["stopped outside the window"]! += 1
                #expect(r.status == sig, "\(context): killed by \(r.status)")
                #expect(r.stdoutBytes.isEmpty || r.stdout == (storedAccess ?? "") + "\n", "\(context): printed something that is not the stored token")
            } else if r.status == 0 {
                outcomes["finished (exit 0)"]! += 1
                #expect(r.stdout == (storedAccess ?? "") + "\n", "\(context): printed a token that is not the stored one")
            } else {
                outcomes["deferred (exit 128+n)"]! += 1
                #expect(r.status == 128 + sig, "\(context): exit \(r.status): \(r.stderr)")
                #expect(r.stdoutBytes.isEmpty, "\(context): printed after the signal")
            }
            spent += try w.issuer.counter("refresh_success") - before
            #expect(stored != nil, "\(context): no stored document")
            #expect(try w.storedRefreshTokenIsLive(), "\(context): the stored refresh token is not the live one")
            let reused = try w.issuer.counter("refresh_reused")
            #expect(reused == 0, "\(context): \(reused) reused")
            if reused != 0 || stored == nil { break }
        }
        let seconds = Date().timeIntervalSince(started)
        let bySignal = signals.map { "\(SignalDeferralTests.name($0)) \(sent[$0, default: 0])" }.joined(separator: ", ")
        print("signal soak (\(store)): \(Self.rounds) rounds in \(String(format: "%.1f", seconds)) s, seed \(seed); signals: \(bySignal); "
              + "outcomes: \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); "
              + "rotations at the issuer \(spent); reused \(try w.issuer.counter("refresh_reused"))")
    }
}
