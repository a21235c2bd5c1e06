// Shared helpers for the fuzz targets (the FuzzSupport module every fuzz-<name> target imports).
#if canImport(Glibc)
import Glibc
#endif
import CredentialCore

/// An invariant broke: say which, then abort so libFuzzer records the input as a crash.
package func fuzzFail(_ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    let text = "FUZZ INVARIANT FAILED (\(file):\(line)): \(message())\n"
    let bytes = Array(text.utf8) // to fd 2 directly: glibc's `stderr` is a C global Swift 6 will not read unchecked
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}

@inline(__always)
package func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String = "",
             file: StaticString = #fileID, line: UInt = #line) {
    if !condition() { fuzzFail(message(), file: file, line: line) }
}

/// C0 controls, DEL and C1 controls: what `Sanitize.line` and `CredentialError.message` promise
/// never to let through.
package func hasControl(_ s: String) -> Bool {
    s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || ($0.value >= 0x80 && $0.value < 0xA0) }
}

/// Bidi overrides/isolates, which `Sanitize.line` also strips.
package func hasBidi(_ s: String) -> Bool {
    s.unicodeScalars.contains { (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value) }
}

/// The promise of `Sanitize.line`: no control bytes, no bidi controls.
package func isCleanLine(_ s: String) -> Bool { !hasControl(s) && !hasBidi(s) }

/// Every thrown `CredentialError` must render as one clean line.
package func requireCleanError(_ error: Error, file: StaticString = #fileID, line: UInt = #line) {
    guard let e = error as? CredentialError else { fuzzFail("unexpected error type \(type(of: error)): \(error)", file: file, line: line) }
    require(isCleanLine(e.message), "error message has control bytes: \(e.message.debugDescription)", file: file, line: line)
}

/// A fixed, well-formed credential for answers.
package let dummyDocument = TokenDocument(accessToken: "eyJhbGciOiJub25lIn0.eyJleHAiOjE5MDAwMDAwMDB9.sig",
                                  refreshToken: "refresh-1", accountId: "acct-123", expiresAt: 1_900_000_000)

/// A little cursor over the fuzz input, for targets that derive several values from it.
package struct FuzzInput {
    package var bytes: ArraySlice<UInt8>
    package init(_ data: UnsafePointer<UInt8>?, _ size: Int) {
        bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size))[...] : []
    }
    package mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }
    package mutating func rest() -> [UInt8] { defer { bytes = [] }; return Array(bytes) }
}

package func bytesOf(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
}
