// Other outside text the tool reads: age identity/recipient strings (Bech32, from the identity
// file and AGE_RECIPIENT-style settings), CHATGPT_CREDENTIAL_ISSUER (IssuerConfig), and
// form/query decoding (FormEncoding.decode).
@testable import Age
@testable import CredentialCore
import FuzzSupport
@testable import OAuth
@testable import Transport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let text = String(decoding: input, as: UTF8.self)

    if let (hrp, bytes) = Bech32.decode(text) {
        require(Bech32.encode(hrp: hrp, data: bytes) == text.lowercased(), "Bech32 round trip failed for \(text.debugDescription)")
    }
    if let id = X25519Identity(parsing: text) {
        require(id.encoded().unsafeString() == text.uppercased(), "identity does not round-trip")
        require(X25519Recipient(parsing: id.recipient.encoded) == id.recipient, "recipient does not round-trip")
    }
    if let r = X25519Recipient(parsing: text) { require(r.encoded == text.lowercased(), "recipient does not round-trip") }

    do {
        let c = try IssuerConfig(text)
        let u = c.baseURL
        require(u.hasPrefix("https://") || (u.hasPrefix("http://") && c.isLoopback), "issuer \(u) is neither https nor loopback http")
        require(u.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "issuer URL with unsafe bytes")
        let authority = u.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)[2]
        require(!authority.contains("@") && !u.contains("?") && !u.contains("#") && !u.hasSuffix("/"), "issuer URL with userinfo, query, fragment or trailing /")
        require((try? IssuerConfig(u)) == c, "issuer config is not idempotent")
    } catch { requireCleanError(error) }

    if let pairs = FormEncoding.decode(text) {
        let again = FormEncoding.decode(FormEncoding.encode(pairs))
        require(again.map { $0.map { [$0.0, $0.1] } } == pairs.map { [$0.0, $0.1] }, "form encoding does not round-trip")
    }
    // The guarded-memory decoder agrees with the text one, whichever names are secret.
    let guarded = Array(text.utf8).withUnsafeBytes { FormEncoding.decode(query: $0, secretNames: ["code", "state"]) }
    let plain = FormEncoding.decode(text)
    require((guarded == nil) == (plain == nil), "the two query decoders disagree on whether \(text.debugDescription) decodes")
    if let guarded, let plain {
        let shown = guarded.map { pair -> [String] in
            switch pair.1 {
            case .text(let t): return [pair.0, t]
            case .secret(let t): return [pair.0, t.unsafeString()]
            }
        }
        require(shown == plain.map { [$0.0, $0.1] }, "the two query decoders disagree on \(text.debugDescription)")
    }
    return 0
}
