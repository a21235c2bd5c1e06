import Foundation
import Testing
@testable import CredentialCore
@testable import Secrets

@Suite struct FileLockTests {
    /// Found while auditing number conversions for the fuzz work (2026-11-29):
    /// CHATGPT_CREDENTIAL_LOCK_TIMEOUT=nan passed min/max clamping as NaN and `acquire` trapped in
    /// `Int64(timeout * 1000)`. Any timeout must give a lock (here: an uncontended one), never a crash.
    @Test(arguments: [Double.nan, -Double.nan, Double.infinity, -Double.infinity, 1e300, -5, 0])
    func anyTimeoutAcquiresAFreeLock(_ timeout: Double) throws {
        var template = Array("/tmp/ccred-lock-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lock = try FileLock.acquire(path: dir + "/default.lock", profile: .default, timeout: timeout)
        lock.release()
    }
}
