// The stored document (keyring item or decrypted file): TokenDocument.parse and its round trip.
@testable import CredentialCore
import FuzzSupport
import Secrets
@testable import HelperProtocols

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let d: TokenDocument
    do { d = try TokenDocument.parse(SecretBytes(copying: input), origin: "fuzz") } catch {
        requireCleanError(error)
        return 0
    }
    let back: TokenDocument
    do { back = try TokenDocument.parse(d.serialized(), origin: "fuzz") } catch { fuzzFail("re-serialized document does not parse: \(error)") }
    // Times are stored as RFC 3339 text; those the writer can express must survive.
    require(back.accessToken == d.accessToken && back.refreshToken == d.refreshToken && back.idToken == d.idToken
            && back.accountId == d.accountId && back.email == d.email && back.plan == d.plan
            && back.state.rejection == d.state.rejection && back.origin == d.origin, "document strings do not round-trip")
    for (a, b) in [(d.expiresAt, back.expiresAt), (d.lastRefresh, back.lastRefresh)] where a >= 0 && a <= 253_402_300_799 {
        require(a == b, "time \(a) does not round-trip (got \(b))")
    }
    // Whatever was stored, answers never carry injected lines.
    let request = GitCredentialRequest(protocol: "https", host: "chatgpt.com", capabilities: ["authtype"])
    if let served = d.served, let answer = try? GitCredentialProtocol.answer(for: request, credential: served, profile: .default) {
        require(answer.unsafeString().split(separator: "\n").count <= 5, "git answer with injected lines")
    }
    if let served = d.served, let answer = try? DockerCredentialProtocol.getAnswer(serverURL: "https://chatgpt.com", credential: served, profile: .default) {
        require(!answer.unsafeString().dropLast().contains("\n"), "docker answer with injected lines")
    }
    return 0
}
