// `store` input: TokenImport.parse; what it accepts must be storable and sendable.
@testable import CredentialCore
import FuzzSupport
import Secrets
@testable import HelperProtocols

let now: Int64 = 1_800_000_000

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let result: TokenImport.Result
    do { result = try TokenImport.parse(SecretBytes(copying: input), profile: .default, now: now) } catch {
        requireCleanError(error)
        require((error as? CredentialError)?.exitCode == 2, "store failure is not badInput: \(error)")
        return 0
    }
    let d = result.document
    require(Sanitize.isTokenSafe(d.accessToken), "imported access token is not token-safe")
    require(Sanitize.isTokenSafe(d.refreshToken), "imported refresh token is not token-safe")
    require(d.idToken.isEmpty || Sanitize.isTokenSafe(d.idToken), "imported id token is not token-safe")
    for s in [d.accountId, d.email, d.plan] { require(isCleanLine(s), "imported field with control bytes: \(s.debugDescription)") }
    require(d.lastRefresh >= 0 && d.lastRefresh <= now, "lastRefresh \(d.lastRefresh) outside [0, now] (0: unknown)")
    require(d.state.rejection == nil, "a fresh import is marked rejected")
    // What we store must read back as the same document.
    let back: TokenDocument
    do { back = try TokenDocument.parse(d.serialized(), origin: "fuzz") } catch { fuzzFail("stored document does not parse: \(error)") }
    require(back == d, "stored document does not round-trip:\n\(d)\n\(back)")
    // And the git answer for it is either clean or refused.
    let request = GitCredentialRequest(protocol: "https", host: "chatgpt.com")
    if let served = d.served, let answer = try? GitCredentialProtocol.answer(for: request, credential: served, profile: .default) {
        require(answer.unsafeString().split(separator: "\n").count <= 3, "git answer with injected lines")
    }
    return 0
}
