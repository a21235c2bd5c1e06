import Secrets

/// Claims read from the issuer's JWTs. The signature is NOT verified: the issuer and the backend
/// decide validity; we only need `exp`, the account, plan and email to schedule refreshes and to
/// label what is stored (see the man page's security notes).
public struct JWTClaims: Equatable, Sendable {
    public var expiresAt: Int64?
    public var accountId: String?
    public var plan: String?
    public var email: String?
    public var userId: String?

    static let authClaim = "https://api.openai.com/auth"
    static let profileClaim = "https://api.openai.com/profile"

    /// Reads the payload segment of a compact JWS. Returns nil when the token is not a JWT.
    public static func decode(_ token: SecretToken) -> JWTClaims? {
        token.withUnsafeBytes { decode(bytes: $0) }
    }

    /// The same, from the token's bytes where they lie: the payload is decoded into guarded
    /// memory and parsed there (only the claims kept become Strings).
    public static func decode(bytes token: UnsafeRawBufferPointer) -> JWTClaims? {
        let dot = UInt8(ascii: ".")
        guard let first = token.firstIndex(of: dot),
              let second = token[(first + 1)...].firstIndex(of: dot),
              !token[(second + 1)...].contains(dot) else { return nil }
        let segment = UnsafeRawBufferPointer(rebasing: token[(first + 1)..<second])
        guard segment.count <= 64 * 1024,
              let payload = Base64.decodeSecret(segment, alphabet: .urlSafe, padding: .optional),
              let json = try? JSON.parse(payload, maxBytes: 64 * 1024), json.isObject else { return nil }
        var c = JWTClaims()
        // At least 1: a fraction below one second truncates to 0, which means "unknown" (found by fuzz/jwt).
        if let exp = json["exp"]?.doubleValue, exp.isFinite, exp >= 1, exp < 1e12 { c.expiresAt = Int64(exp) }
        let auth = json[authClaim]
        c.accountId = clean(auth?["chatgpt_account_id"]?.stringValue)
        c.plan = clean(auth?["chatgpt_plan_type"]?.stringValue)
        c.userId = clean(auth?["chatgpt_user_id"]?.stringValue ?? auth?["user_id"]?.stringValue)
        c.email = clean(json["email"]?.stringValue ?? json[profileClaim]?["email"]?.stringValue)
        return c
    }

    private static func clean(_ s: String?) -> String? {
        guard let s else { return nil }
        let c = Sanitize.line(s, limit: 256)
        return c.isEmpty ? nil : c
    }
}
