import CredentialCore
import Stores
import OAuth
import HelperProtocols
import Credentials
import Secrets

/// `status`: who is signed in, without secrets.
struct StatusReport {
    var profile: String
    var store: StoreKind
    var document: TokenDocument?
    var now: Int64 = 0
    var problem: String?

    init(profile: String, store: StoreKind, document: TokenDocument, now: Int64) {
        self.profile = profile; self.store = store; self.document = document; self.now = now
    }

    init(profile: String, store: StoreKind, problem: String) {
        self.profile = profile; self.store = store; self.problem = problem
    }

    var needsLogin: Bool {
        guard let d = document else { return true }
        return d.refreshRejected != nil && d.expiresAt <= now
    }

    func json() -> JSONValue {
        var m: [(String, JSONValue)] = [("profile", .string(profile)), ("store", .string(store.rawValue))]
        if let d = document {
            m += [("signed_in", .bool(true)),
                  ("email", .string(d.email)), ("plan", .string(d.plan)), ("account_id", .string(d.accountId)),
                  ("expires_at", .string(Clock.rfc3339(d.expiresAt))), ("expires_in", .number(Double(d.expiresAt - now))),
                  ("last_refresh", .string(Clock.rfc3339(d.lastRefresh))),
                  ("needs_login", .bool(needsLogin))]
            if let r = d.refreshRejected { m.append(("refresh_rejected", .string(r))) }
        } else {
            m += [("signed_in", .bool(false)), ("error", .string(problem ?? "unknown"))]
        }
        return .object(m)
    }

    func text() -> String {
        guard let d = document else { return "\(profile) (\(store.rawValue)): \(problem ?? "unreadable")\n" }
        let who = Sanitize.line(d.email.isEmpty ? "unknown email" : d.email)
        let plan = Sanitize.line(d.plan.isEmpty ? "unknown plan" : d.plan)
        var s = "Signed in as \(who) (\(plan)), account \(Sanitize.line(d.accountId))\n"
        s += "  profile:  \(profile)\n"
        s += "  store:    \(store.rawValue)\n"
        let left = d.expiresAt - now
        s += "  expires:  \(Clock.rfc3339(d.expiresAt)) (\(left >= 0 ? "in " : "")\(TimeSpan.describe(left)))\n"
        s += "  refreshed: \(Clock.rfc3339(d.lastRefresh))\n"
        if let r = d.refreshRejected {
            s += "  sign-in needed: the issuer rejected the refresh token (\(Sanitize.line(r, limit: 60))); run: chatgpt-credential\(profile == "default" ? "" : " --profile \(profile)") login\n"
        }
        return s
    }

    static func jsonList(_ entries: [StatusReport]) -> String {
        JSON.serialize(.array(entries.map { $0.json() })) + "\n"
    }

    static func textList(_ entries: [StatusReport]) -> String {
        if entries.isEmpty { return "No profiles signed in.\n" }
        return entries.map { e -> String in
            guard let d = e.document else { return "\(e.profile)\t\(e.store.rawValue)\t\(e.problem ?? "")" }
            return "\(e.profile)\t\(e.store.rawValue)\t\(Sanitize.line(d.email))\t\(Sanitize.line(d.plan))\t\(Sanitize.line(d.accountId))\texpires \(Clock.rfc3339(d.expiresAt))"
        }.joined(separator: "\n") + "\n"
    }

    static func notSignedInJSON(_ profile: String) -> String {
        JSON.serialize(.object([("profile", .string(profile)), ("signed_in", .bool(false))])) + "\n"
    }
}
