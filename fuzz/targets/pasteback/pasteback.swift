// The paste-back sign-in: the address (or query) a person pastes from the browser.
@testable import CredentialCore
import FuzzSupport
@testable import OAuth
@testable import SignIn
import Secrets

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    do {
        let cb = try PasteBackFlow.parse(SecretBytes(copying: bytesOf(data, size)))
        require(cb.state != nil, "accepted without state")
        require(cb.code != nil || cb.error != nil, "accepted without code or error")
        if let code = cb.code { require(Sanitize.isTokenSafe(code) && code.count <= 2048, "unsafe code accepted") }
        if let refusal = cb.refusal { requireCleanError(refusal) }
    } catch {
        // A bad paste is a typed cause (PasteBackFlow.BadPaste); what it reports must be one clean line.
        requireCleanError(error.error(.default))
        require(!error.retryReason.isEmpty, "a bad paste with no reason to ask again")
    }
    return 0
}
