import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tests/EndToEndTests/Fixtures/git_http_server.py as a Swift object: a loopback smart-HTTP git
/// server over TLS (a throwaway self-signed certificate for `chatgpt.com`, made with openssl),
/// serving one bare repository `repo.git` with one commit, and admitting only HTTP Basic auth
/// whose password is `expectedToken` (written to a file the server re-reads on every request).
///
/// Why TLS, the real host name and the default port: our helper answers only for https and
/// chatgpt.com on port 443, and git asks its helpers about the host of the URL it fetches.
/// Fetching `https://chatgpt.com/repo.git` through `http.proxy=http://127.0.0.1:PORT` (the
/// fixture's CONNECT proxy, which tunnels only `chatgpt.com:443`, and only to the server) with
/// `http.sslCAInfo=<our cert>` makes git send exactly the request a real user's git sends
/// (`protocol=https`, `host=chatgpt.com`) while every byte goes to 127.0.0.1 — no wrapper
/// rewrites the helper's input, and no name lookup happens for chatgpt.com at all.
final class GitHTTPServer {
    struct Failure: Error, CustomStringConvertible { let description: String }
    struct LogEntry { var method: String; var path: String; var user: String?; var auth: String; var status: Int }

    let directory: String
    let port: Int
    let commit: String
    var certPath: String { directory + "/cert.pem" }
    var url: String { "https://chatgpt.com/repo.git" }
    /// The `-c` options that route git to this server (through the proxy) and trust its certificate.
    var gitOptions: [String] {
        ["-c", "http.proxy=http://127.0.0.1:\(port)", "-c", "http.sslCAInfo=\(certPath)",
         "-c", "http.sslVerify=true"]
    }

    private let process: Process
    private let stdinPipe = Pipe()
    private let stdoutPipe = Pipe()
    private var tokenFile: String { directory + "/expected-token" }
    private var logFile: String { directory + "/requests.log" }

    static var scriptPath: String { Harness.repoRoot + "/Tests/EndToEndTests/Fixtures/git_http_server.py" }

    /// `directory` must exist and be private to the test. `username`, when given, must match too.
    init(directory: String, expectedToken: String, username: String? = nil) throws {
        self.directory = directory
        let env = ["PATH": "/usr/bin:/bin", "HOME": directory, "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"]
        func must(_ r: ProcessResult, _ what: String) throws {
            guard r.status == 0, !r.signaled else { throw Failure(description: "\(what) failed: \(r.stderr)") }
        }
        // A self-signed certificate for chatgpt.com, valid for two days, EC P-256 (fast to make).
        try must(Proc.run(Tools.openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                          "-nodes", "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem",
                                          "-days", "2", "-subj", "/CN=chatgpt.com",
                                          "-addext", "subjectAltName=DNS:chatgpt.com",
                                          "-addext", "basicConstraints=critical,CA:TRUE"], env: env), "openssl req")
        // The served repository: one commit on main.
        let repo = directory + "/root/repo.git"
        let src = directory + "/src"
        mkdir(directory + "/root", 0o755)
        try must(Proc.run(Tools.git, ["init", "-q", "--bare", "-b", "main", repo], env: env), "git init --bare")
        try must(Proc.run(Tools.git, ["init", "-q", "-b", "main", src], env: env), "git init")
        try Data("served over loopback\n".utf8).write(to: URL(fileURLWithPath: src + "/README"), options: .atomic)
        try must(Proc.run(Tools.git, ["-C", src, "add", "README"], env: env), "git add")
        try must(Proc.run(Tools.git, ["-C", src, "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid",
                                      "commit", "-q", "-m", "first"], env: env), "git commit")
        try must(Proc.run(Tools.git, ["-C", src, "push", "-q", repo, "main"], env: env), "git push")
        let head = Proc.run(Tools.git, ["-C", src, "rev-parse", "HEAD"], env: env)
        try must(head, "git rev-parse")
        commit = head.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        try Data(expectedToken.utf8).write(to: URL(fileURLWithPath: directory + "/expected-token"), options: .atomic)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Tools.python3)
        var args = ["-u", Self.scriptPath, "--root", directory + "/root", "--token-file", directory + "/expected-token",
                    "--log", directory + "/requests.log", "--cert", directory + "/cert.pem", "--key", directory + "/key.pem",
                    "--connect-proxy", "chatgpt.com:443"]
        if let username { args += ["--username", username] }
        p.arguments = args
        p.environment = env.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 }
        p.standardInput = stdinPipe
        p.standardOutput = stdoutPipe
        p.standardError = FileHandle.standardError
        try p.run()
        process = p

        guard let n = Harness.announcedPort(stdoutPipe, timeout: 10) else {
            p.terminate()
            throw Failure(description: "the git HTTP server did not start (no PORT= line)")
        }
        port = n
    }

    deinit {
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Changes the one password the server admits from now on.
    func expect(token: String) throws {
        try Data(token.utf8).write(to: URL(fileURLWithPath: tokenFile), options: .atomic)
    }

    /// Every request so far, in order.
    func log() -> [LogEntry] {
        guard let data = FileManager.default.contents(atPath: logFile) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return LogEntry(method: o["method"] as? String ?? "", path: o["path"] as? String ?? "",
                            user: o["user"] as? String, auth: o["auth"] as? String ?? "", status: o["status"] as? Int ?? 0)
        }
    }
}
