// JWTClaims.decode: the input as a whole token, and the input as the payload of a token.
@testable import CredentialCore
import FuzzSupport
@testable import Secrets

private func check(_ c: JWTClaims?) {
    guard let c else { return }
    if let e = c.expiresAt { require(e > 0 && e < 1_000_000_000_000, "expiresAt out of range: \(e)") }
    for s in [c.accountId, c.plan, c.email, c.userId].compactMap({ $0 }) {
        require(!s.isEmpty, "empty claim kept")
        require(isCleanLine(s), "claim with control/bidi characters: \(s.debugDescription)")
        require(s.unicodeScalars.count <= 257, "claim longer than its limit: \(s.unicodeScalars.count)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytesOf(data, size)
    let whole = input.withUnsafeBytes { JWTClaims.decode(bytes: $0) }
    check(whole)
    require(whole == JWTClaims.decode(SecretToken(copying: input.withUnsafeBytes { $0 })), "bytes and token decode differ")
    let token = SecretToken(copying: "eyJhbGciOiJub25lIn0." + Base64.encode(input, alphabet: .urlSafe, padded: false) + ".c2ln")
    let claims = JWTClaims.decode(token)
    check(claims)
    // A payload that is a JSON object always yields claims.
    if let v = try? JSON.parse(input, maxBytes: 64 * 1024), v.isObject { require(claims != nil, "object payload refused") }
    // And TokenDocument.fromTokens keeps what the claims say.
    let doc = TokenDocument.fromTokens(accessToken: token, refreshToken: "r", idToken: nil, now: 1_800_000_000)
    require(doc.expiresAt == (claims?.expiresAt ?? 0), "fromTokens lost exp")
    require(isCleanLine(doc.accountId) && isCleanLine(doc.email) && isCleanLine(doc.plan), "document field with control bytes")
    return 0
}
