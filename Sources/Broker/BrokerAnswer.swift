import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// What the broker sends back for one request: a status and a JSON body. The body may hold an
/// access token, so it lives in guarded memory until it is written to the socket: either all of
/// it in `body`, or (`aroundToken`) plain text before and after a token that stays in its own
/// guarded buffer, from where it is sent.
package struct BrokerAnswer: ~Copyable {
    package var status: Int
    /// The body, when it is not `aroundToken` (then it is empty).
    package var body: SecretBytes
    /// A body that is `before`, the token's bytes and `after`.
    package var aroundToken: TextAroundToken?
    /// For the audit line: `ok`, or the `error` member of a failure. Never a token.
    package var outcome: String
    /// The profile the answer is about (for the audit line), when the handler knows it.
    package var profile: String?
    /// Lines the verb printed on stderr while making it: handed to `notice` after the answer's
    /// audit line (man page BROKER, "Audit").
    package var notices: [String] = []

    package init(status: Int, body: consuming SecretBytes, outcome: String, profile: String? = nil) {
        self.status = status
        self.body = body
        self.outcome = outcome
        self.profile = profile
    }

    /// 200 (or `status`) with a body of `before`, the token and `after`, sent without a copy of
    /// the token.
    package init(status: Int, around: TextAroundToken, outcome: String, profile: String? = nil) {
        self.init(status: status, body: SecretBytes(), outcome: outcome, profile: profile)
        aroundToken = around
    }

    /// How many bytes the body has.
    package var bodyCount: Int {
        guard let a = aroundToken else { return body.count }
        return a.before.count + a.token.count + a.after.count
    }

    /// Calls `write` with the body's pieces, in order, where they lie.
    package func withBodyPieces<R>(_ write: ([UnsafeRawBufferPointer]) throws -> R) rethrows -> R {
        guard let a = aroundToken else { return try body.withUnsafeBytes { try write([$0]) } }
        return try a.before.withUnsafeBytes { before in
            try a.token.withUnsafeBytes { token in
                try a.after.withUnsafeBytes { after in try write([before, token, after]) }
            }
        }
    }

    /// 200 with `json` (plain data, no secret) and a line feed.
    package static func ok(_ json: String, profile: String? = nil) -> BrokerAnswer {
        BrokerAnswer(status: 200, body: SecretBytes(copying: (json.hasSuffix("\n") ? json : json + "\n").utf8), outcome: "ok", profile: profile)
    }

    /// `{"error":CODE,"message":TEXT}` with `status`; the code follows from the status.
    package static func failure(status: Int, message: String, profile: String? = nil) -> BrokerAnswer {
        let code = BrokerProtocol.errorCode(forStatus: status)
        let json = JSON.serialize(.object([("error", .string(code)), ("message", .string(Sanitize.line(message)))]))
        return BrokerAnswer(status: status, body: SecretBytes(copying: (json + "\n").utf8), outcome: code, profile: profile)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        default: return "Internal Server Error"
        }
    }

    /// The response head (status line and headers, ending in the blank line): no secret in it.
    package func head(keepAlive: Bool) -> [UInt8] {
        // Appended as bytes into one array sized up front: the broker makes one per answer.
        var head: [UInt8] = []
        head.reserveCapacity(192)
        head += "HTTP/1.1 ".utf8; head += String(status).utf8; head += " ".utf8; head += Self.reason(status).utf8
        head += "\r\nContent-Type: application/json\r\nContent-Length: ".utf8; head += String(bodyCount).utf8
        head += "\r\nCache-Control: no-store\r\n".utf8
        if status == 405 { head += "Allow: GET\r\n".utf8 }
        head += (keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n").utf8
        return head
    }

    /// The whole HTTP/1.1 response, head and body, in one guarded buffer (tests, fuzzing; the
    /// server sends the head and the body from where they are).
    package func serialized(keepAlive: Bool) -> SecretBytes {
        let head = head(keepAlive: keepAlive)
        var out = SecretBytes(capacity: head.count + bodyCount)
        head.withUnsafeBytes { out.append($0) }
        withBodyPieces { for piece in $0 { out.append(piece) } }
        return out
    }
}

/// The process at the other end of a connection, from `SO_PEERCRED` (as it was at connect(2)).
package struct BrokerPeer: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
    /// `/proc/PID/exe`, made printable (bytes outside visible ASCII %-escaped, at most 256
    /// bytes); `?` when it cannot be read (another user's process, a non-dumpable one, no /proc).
    package var executable: String

    package init(pid: Int32, uid: UInt32, gid: UInt32, executable: String) {
        self.pid = pid; self.uid = uid; self.gid = gid; self.executable = executable
    }

    /// What `SO_PEERCRED` says of a connected UNIX socket's peer (as it was at connect(2)).
    package struct Credentials: Sendable, Equatable {
        package var pid: Int32
        package var uid: UInt32
        package var gid: UInt32
    }

    /// The peer's pid, uid and gid alone (one system call: the check made at accept, before
    /// anything is read); nil when the kernel does not say.
    package static func credentials(_ fd: Int32) -> Credentials? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; } (Glibc does not export it to Swift).
        var cred: (Int32, UInt32, UInt32) = (0, 0, 0)
        var len = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0, len == 12 else { return nil }
        return Credentials(pid: cred.0, uid: cred.1, gid: cred.2)
    }

    /// The peer of a connected UNIX socket; nil when the kernel does not say.
    package static func of(_ fd: Int32) -> BrokerPeer? {
        guard let c = credentials(fd) else { return nil }
        return BrokerPeer(pid: c.pid, uid: c.uid, gid: c.gid, executable: executable(of: c.pid))
    }

    static func executable(of pid: Int32) -> String {
        guard pid > 0 else { return "?" }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { buf in
            let n = readlink("/proc/\(pid)/exe", UnsafeMutableRawPointer(buf.baseAddress!).assumingMemoryBound(to: CChar.self), buf.count)
            guard n > 0 else { return "?" }
            return printable(UnsafeBufferPointer(rebasing: buf[0..<n]), limit: 256)
        }
    }

    /// Visible ASCII kept, everything else (spaces, controls, non-ASCII, `%`) as `%XX`, so the
    /// value is one word of the audit line whatever the file is called.
    package static func printable<Bytes: Collection>(_ bytes: Bytes, limit: Int) -> String where Bytes.Element == UInt8 {
        func isPlain(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F && b != 0x25 && b != 0x22 }
        // What is printable already (every path the broker answers, most executables) as it is.
        if bytes.count <= limit && bytes.allSatisfy(isPlain) { return String(decoding: bytes, as: UTF8.self) }
        func hexDigit(_ n: UInt8) -> UInt8 { n < 10 ? 0x30 + n : 0x41 + n - 10 }
        var out: [UInt8] = []
        out.reserveCapacity(min(limit, 3 * bytes.count))
        for b in bytes {
            let plain = isPlain(b)
            // At most `limit` bytes, then an ellipsis.
            if out.count + (plain ? 1 : 3) > limit { return String(decoding: out, as: UTF8.self) + "…" }
            if plain {
                out.append(b)
            } else {
                out.append(0x25); out.append(hexDigit(b >> 4)); out.append(hexDigit(b & 15))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// One line per answered request (man page BROKER): when, who asked (pid, uid, executable),
/// what (path, profile) and the outcome. Never a token.
package struct BrokerAuditRecord: Sendable, Equatable {
    package var time: Int64
    package var peer: BrokerPeer
    package var path: String?
    package var profile: String?
    package var status: Int
    package var outcome: String

    package var line: String {
        // Appended into one string sized up front: the broker writes one per answer.
        var line = "chatgpt-credential: broker: "
        line.reserveCapacity(160 + peer.executable.utf8.count)
        line += Clock.rfc3339(time)
        line += " pid="; line += String(peer.pid)
        line += " uid="; line += String(peer.uid)
        line += " exe="; line += peer.executable
        line += " path="; line += path.map { BrokerPeer.printable($0.utf8, limit: 64) } ?? "-"
        line += " profile="; line += profile ?? "-"
        line += " status="; line += String(status)
        line += " "; line += outcome
        return line
    }
}
