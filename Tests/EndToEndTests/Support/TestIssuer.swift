import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The loopback test issuer (Tests/TestIssuer/test_issuer.py) as a Swift object: starts the
/// script, reads `PORT=<n>`, talks to its admin API, and stops it on deinit (its stdin closes).
///
///     let issuer = try TestIssuer()
///     try issuer.configure(["faults": [["status": 500]]])
///     let tokens = try issuer.seed(["expires_in": 60])
///     env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url
///     let stats = try issuer.stats()      // ["refresh_requests": 1, ...]
final class TestIssuer {
    struct Failure: Error, CustomStringConvertible { let description: String }

    let process: Process
    let port: Int
    /// `http://127.0.0.1:PORT` — what CHATGPT_CREDENTIAL_ISSUER should be set to.
    var url: String { "http://127.0.0.1:\(port)" }

    private let stdinPipe = Pipe()
    private let stdoutPipe = Pipe()

    static var scriptPath: String { Harness.repoRoot + "/Tests/TestIssuer/test_issuer.py" }

    init(startupTimeout: Double = 10) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-u", Self.scriptPath]
        var env = ProcessInfo.processInfo.environment
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        p.environment = env
        p.standardInput = stdinPipe
        p.standardOutput = stdoutPipe
        p.standardError = FileHandle.standardError
        try p.run()
        process = p

        guard let n = Harness.announcedPort(stdoutPipe, timeout: startupTimeout) else {
            p.terminate()
            throw Failure(description: "the test issuer did not start (no PORT= line)")
        }
        port = n
    }

    deinit { stop() }

    /// Stops the issuer: closes its stdin, then SIGTERM, then waits (bounded) for it to exit.
    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    // MARK: admin API

    /// GET /__admin/stats: counters (`refresh_requests`, `refresh_success`, `refresh_reused`,
    /// `requests` per path, `last_refresh_token_seen`, ...).
    func stats() throws -> [String: Any] { try object(request("GET", "/__admin/stats")) }

    /// An integer counter from `stats()`.
    func counter(_ name: String) throws -> Int { (try stats()[name] as? Int) ?? 0 }

    /// How many requests reached `path` (e.g. "/oauth/token").
    func requests(to path: String) throws -> Int {
        ((try stats()["requests"] as? [String: Any])?[path] as? Int) ?? 0
    }

    /// POST /__admin/config: merges settings (unknown keys are an error).
    @discardableResult
    func configure(_ settings: [String: Any]) throws -> [String: Any] {
        try object(request("POST", "/__admin/config", json: settings))
    }

    /// POST /__admin/seed: a new refresh-token family. Options: `expires_in` (access token lifetime in
    /// seconds, may be negative), `email`, `account_id`, `plan`, `refresh_expired`.
    func seed(_ options: [String: Any] = [:]) throws -> SeededTokens {
        let o = try object(request("POST", "/__admin/seed", json: options))
        guard let a = o["access_token"] as? String, let r = o["refresh_token"] as? String,
              let i = o["id_token"] as? String else { throw Failure(description: "bad seed answer: \(o)") }
        return SeededTokens(accessToken: a, refreshToken: r, idToken: i,
                            accountId: o["account_id"] as? String ?? "", email: o["email"] as? String ?? "",
                            plan: o["plan"] as? String ?? "", expiresAt: Int64(o["expires_at"] as? Int ?? 0))
    }

    /// POST /__admin/reset: forgets every token, session, counter and setting.
    func reset() throws { _ = try request("POST", "/__admin/reset", json: [:]) }

    struct SeededTokens {
        var accessToken, refreshToken, idToken, accountId, email, plan: String
        var expiresAt: Int64
        /// Codex's auth.json shape, for `chatgpt-credential store`. Its last refresh is an hour
        /// ago: a fixed date would in time turn idle (8 days) and be refreshed at the first `get`.
        var codexAuthJSON: String {
            let f = ISO8601DateFormatter()
            f.formatOptions = [.withInternetDateTime]
            let lastRefresh = f.string(from: Date().addingTimeInterval(-3600))
            return #"{"tokens":{"id_token":"\#(idToken)","access_token":"\#(accessToken)","refresh_token":"\#(refreshToken)","account_id":"\#(accountId)"},"last_refresh":"\#(lastRefresh)"}"#
        }
    }

    // MARK: a minimal blocking HTTP/1.0 client over a loopback socket (independent of the code under test)

    func request(_ method: String, _ path: String, json: [String: Any]? = nil) throws -> (Int, Data) {
        let body = try json.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        var head = "\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if json != nil { head += "Content-Type: application/json\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        defer { close(fd) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard Loopback.connect(fd, port: port) == 0 else { throw Failure(description: "cannot connect to the test issuer") }
        let out = Data(head.utf8) + body
        try out.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw Failure(description: "send to the test issuer failed") }
                off += n
            }
        }
        var response = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            response.append(contentsOf: buf[0..<n])
            if response.count > 16 << 20 { throw Failure(description: "admin answer too large") }
        }
        guard let split = response.range(of: Data("\r\n\r\n".utf8)) else {
            throw Failure(description: "malformed answer from the test issuer")
        }
        let statusLine = String(decoding: response[..<split.lowerBound], as: UTF8.self).split(separator: " ")
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        return (status, response[split.upperBound...])
    }

    private func object(_ answer: (Int, Data)) throws -> [String: Any] {
        guard answer.0 == 200,
              let o = try JSONSerialization.jsonObject(with: answer.1) as? [String: Any] else {
            throw Failure(description: "admin call failed: HTTP \(answer.0) \(String(decoding: answer.1, as: UTF8.self))")
        }
        return o
    }
}

