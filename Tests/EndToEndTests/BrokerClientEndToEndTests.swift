import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Client mode (man page BROKER, "Client mode") through the built binary against the real
/// `serve`: inside a bubblewrap sandbox that holds nothing of the host but /usr and the socket,
/// under strace on the host (no store, keyring, lock, cache or D-Bus is touched), with a broker
/// that is stopped or never answers, and through a real sshd forwarding the socket.
@Suite(.serialized) struct BrokerClientEndToEndTests {
    /// A file-store sandbox signed in at the test issuer, and `serve` on a socket outside it.
    final class Host {
        let issuer: TestIssuer
        let sandbox: Sandbox
        let tokens: TestIssuer.SeededTokens
        let socketDirectory: String
        var socket: String { socketDirectory + "/broker.sock" }
        private var serve: Process?
        let serveLog: String

        init(expiresIn: Int64 = 3600) throws {
            issuer = try TestIssuer()
            sandbox = Sandbox(bus: .none, store: "file")
            // The sandbox signs in under a profile of its own; the client in bwrap asks for it.
            BrokerClientEndToEndTests.hostProfile = sandbox.profile
            sandbox.env["CHATGPT_CREDENTIAL_BACKEND"] = issuer.url + "/backend-api"
            tokens = try sandbox.storeSeeded(issuer, ["expires_in": expiresIn])
            var template = Array("/tmp/ccred-bsock-XXXXXX".utf8CString)
            socketDirectory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            serveLog = socketDirectory + "/serve.log"
        }

        /// Starts `serve --socket` with the sandbox's environment; returns once the socket is there.
        func startBroker() throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Harness.binary)
            p.arguments = ["serve", "--socket", socket]
            p.environment = sandbox.env
            p.standardInput = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            _ = FileManager.default.createFile(atPath: serveLog, contents: nil)
            p.standardError = FileHandle(forWritingAtPath: serveLog)
            try p.run()
            serve = p
            let stop = Date().addingTimeInterval(10)
            var st = stat()
            while stat(socket, &st) != 0 {
                guard Date() < stop, p.isRunning else { throw HardeningFailure("serve did not create \(socket): \(log)") }
                usleep(10_000)
            }
        }

        func stopBroker() {
            guard let p = serve else { return }
            serve = nil
            if p.isRunning { p.terminate() }
            // A child of this test process may start with SIGTERM blocked (the mask of the thread
            // that spawned it): a second, then SIGKILL.
            let stop = Date().addingTimeInterval(1)
            while p.isRunning && Date() < stop { usleep(10_000) }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }

        var log: String { (try? String(contentsOfFile: serveLog, encoding: .utf8)) ?? "" }

        deinit {
            stopBroker()
            issuer.stop()
            _ = Harness.run("/bin/rm", ["-rf", socketDirectory], env: ["PATH": "/usr/bin:/bin"])
        }
    }

    // MARK: bubblewrap


    /// Runs `command` in a sandbox that holds /usr (read-only), the binary under its three names
    /// in /app, and the broker's socket at /run/broker.sock: no home, no XDG directories, no
    /// D-Bus, no runtime directory, no network (`--unshare-all`), an empty environment but PATH
    /// and `CHATGPT_CREDENTIAL_BROKER`.
    /// The profile of the current `Host` (the suite is serialized).
    nonisolated(unsafe) static var hostProfile: String?

    static func sandboxed(_ socket: String, _ command: [String], stdin: String? = nil, timeout: Double = 30) -> RunResult {
        var args = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                    "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                    "--unshare-all", "--die-with-parent"]
        for dir in Harness.libraryDirectories { args += ["--ro-bind", dir, dir] }
        args += ["--ro-bind", Harness.binary, "/app/chatgpt-credential",
                 "--symlink", "chatgpt-credential", "/app/git-credential-chatgpt",
                 "--symlink", "chatgpt-credential", "/app/docker-credential-chatgpt",
                 "--bind", socket, "/run/broker.sock",
                 "--clearenv", "--setenv", "PATH", "/app:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
                 "--setenv", "SWIFT_BACKTRACE", "enable=no",
                 "--setenv", "CHATGPT_CREDENTIAL_BROKER", "unix:/run/broker.sock"]
        if let profile = hostProfile { args += ["--setenv", "CHATGPT_CREDENTIAL_PROFILE", profile] }
        args.append("--")
        return Harness.run("/usr/bin/bwrap", args + command, env: ["PATH": "/usr/bin:/bin"],
                           stdin: stdin.map { Array($0.utf8) }, timeout: timeout)
    }

    @Test func insideASandboxThatSeesOnlyTheSocketEveryReadingVerbWorks() throws {
        let host = try Host()
        try host.startBroker()
        defer { host.stopBroker() }
        let s = host.sandbox, t = host.tokens
        let hostGet = s.run(["get"])
        #expect(hostGet.status == 0 && hostGet.stdout == t.accessToken + "\n", "\(hostGet.stderr)")

        // The sandbox really has nothing else: no home, no runtime directory, one socket in /run.
        let look = Self.sandboxed(host.socket, ["/bin/sh", "-c", "ls -A /run; env | sort; test -e /root || test -e \"$HOME\" || echo no-home"])
        #expect(look.stdout.contains("broker.sock\n") && look.stdout.contains("no-home"), "\(look.stdout) \(look.stderr)")
        #expect(!look.stdout.contains("XDG_") && !look.stdout.contains("DBUS") && !look.stdout.contains("HOME="))

        let get = Self.sandboxed(host.socket, ["chatgpt-credential", "get"])
        #expect(get.status == 0 && get.stdout == hostGet.stdout, "get in the sandbox: \(get.status) \(get.stderr)")

        let json = Self.sandboxed(host.socket, ["chatgpt-credential", "get", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [String: Any]
        #expect(object?["access_token"] as? String == t.accessToken)
        #expect(object?["account_id"] as? String == t.accountId && object?["email"] as? String == t.email)
        #expect(json.stdout == s.run(["get", "--json"]).stdout, "the sandbox's --json differs from the host's")
        #expect(!json.allOutput.contains(t.refreshToken) && !json.stdout.contains("refresh"))

        for (format, expected) in [("--account-id", t.accountId + "\n"),
                                   ("--header", "Authorization: Bearer \(t.accessToken)\nChatGPT-Account-ID: \(t.accountId)\n"),
                                   ("--env", "export CHATGPT_ACCESS_TOKEN='\(t.accessToken)'\nexport CHATGPT_ACCOUNT_ID='\(t.accountId)'\n")] {
            let r = Self.sandboxed(host.socket, ["chatgpt-credential", "get", format])
            #expect(r.status == 0 && r.stdout == expected, "get \(format): \(r.status) \(r.stdout) \(r.stderr)")
        }

        let fill = Self.sandboxed(host.socket, ["git", "-c", "credential.helper=chatgpt", "credential", "fill"],
                                  stdin: "protocol=https\nhost=chatgpt.com\n\n")
        #expect(fill.status == 0 && fill.stdout.contains("password=\(t.accessToken)\n") && fill.stdout.contains("username=\(t.accountId)\n"),
                "git credential fill: \(fill.status) \(fill.stdout) \(fill.stderr)")

        let docker = Self.sandboxed(host.socket, ["docker-credential-chatgpt", "get"], stdin: "https://chatgpt.com")
        #expect(docker.status == 0 && docker.stdout.contains("\"Secret\":\"\(t.accessToken)\""), "\(docker.stdout) \(docker.stderr)")
        let list = Self.sandboxed(host.socket, ["docker-credential-chatgpt", "list"])
        #expect(list.stdout == "{\"https://chatgpt.com\":\"\(t.accountId)\"}\n", "\(list.stdout) \(list.stderr)")

        let exec = Self.sandboxed(host.socket, ["chatgpt-credential", "exec", "--", "/bin/sh", "-c", "echo \"$CHATGPT_ACCESS_TOKEN $CHATGPT_ACCOUNT_ID\""])
        #expect(exec.status == 0 && exec.stdout == "\(t.accessToken) \(t.accountId)\n", "exec: \(exec.status) \(exec.stderr)")

        let status = Self.sandboxed(host.socket, ["chatgpt-credential", "status"])
        #expect(status.status == 0 && status.stdout.contains("Signed in as \(t.email)") && status.stdout.contains("  broker:        unix:/run/broker.sock"),
                "\(status.stdout) \(status.stderr)")

        // What the host prints just before and just after: the reset times are counted from the
        // clock, so the sandbox's answer equals one of the two (it cannot straddle two seconds).
        let hostBefore = s.run(["usage", "--json"])
        let usage = Self.sandboxed(host.socket, ["chatgpt-credential", "usage", "--json"])
        let hostAfter = s.run(["usage", "--json"])
        #expect(usage.status == 0 && hostBefore.status == 0 && hostAfter.status == 0, "usage: \(usage.stderr) / \(hostBefore.stderr)")
        #expect([hostBefore.stdout, hostAfter.stdout].contains(usage.stdout), "\(usage.stdout) / \(hostBefore.stdout)")
        let textBefore = s.run(["usage"]).stdout
        let usageText = Self.sandboxed(host.socket, ["chatgpt-credential", "usage"])
        let textAfter = s.run(["usage"]).stdout
        #expect(usageText.status == 0 && [textBefore, textAfter].contains(usageText.stdout), "\(usageText.stdout) \(usageText.stderr)")

        // Nothing was refreshed, and the broker answered every request (its audit lines).
        #expect(try host.issuer.counter("refresh_success") == 0)
        #expect(!host.log.contains(t.accessToken) && !host.log.contains(t.refreshToken))
    }

    @Test func theVerbsThatChangeTheCredentialAreRefusedWithExit2() throws {
        let host = try Host()
        try host.startBroker()
        defer { host.stopBroker() }
        for args in [["erase"], ["erase", "--no-revoke"], ["login", "--device"], ["store"], ["serve"], ["get", "--force-refresh"]] {
            let r = Self.sandboxed(host.socket, ["chatgpt-credential"] + args)
            #expect(r.status == 2 && r.stderr.contains("refused in client mode") && r.stdout.isEmpty, "\(args): \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(args): more than one line: \(r.stderr)")
        }
        let gitErase = Self.sandboxed(host.socket, ["git-credential-chatgpt", "erase"],
                                      stdin: "protocol=https\nhost=chatgpt.com\npassword=\(host.tokens.accessToken)\n\n")
        #expect(gitErase.status == 2 && gitErase.stderr.contains("refused in client mode"), "\(gitErase.stderr)")
        let gitStore = Self.sandboxed(host.socket, ["git-credential-chatgpt", "store"], stdin: "protocol=https\nhost=chatgpt.com\n\n")
        #expect(gitStore.status == 0 && gitStore.allOutput.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        let dockerErase = Self.sandboxed(host.socket, ["docker-credential-chatgpt", "erase"], stdin: "https://chatgpt.com")
        #expect(dockerErase.status == 2 && dockerErase.stdout.contains("refused in client mode"), "\(dockerErase.stdout)")
        // The credential is untouched: the host still prints the same token without a refresh.
        #expect(host.sandbox.run(["get"]).stdout == host.tokens.accessToken + "\n")
        #expect(try host.issuer.counter("refresh_success") == 0)
        #expect(try host.issuer.counter("revocations") == 0)
    }

    @Test func minTTLIsPassedOnAndTheBrokerRefreshesThroughTheOneOwner() throws {
        let host = try Host(expiresIn: 3600)
        try host.startBroker()
        defer { host.stopBroker() }
        let r = Self.sandboxed(host.socket, ["chatgpt-credential", "get", "--min-ttl", "7200"])
        #expect(r.status == 0 && r.stdout != host.tokens.accessToken + "\n", "\(r.status) \(r.stderr)")
        #expect(try host.issuer.counter("refresh_success") == 1)
        // The host's own get now prints what the broker stored: one refresh for both.
        #expect(host.sandbox.run(["get"]).stdout == r.stdout)
        #expect(try host.issuer.counter("refresh_success") == 1)
    }

    @Test func onTheHostClientModeOpensNoStoreKeyringLockOrBus() throws {
        let host = try Host()
        try host.startBroker()
        defer { host.stopBroker() }
        // The host has everything: the file store, its key, a runtime directory, a D-Bus address.
        var env = host.sandbox.env
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=" + host.socketDirectory + "/no-bus"
        env["CHATGPT_CREDENTIAL_BROKER"] = "unix:" + host.socket
        let trace = host.socketDirectory + "/strace.out"
        for args in [["get"], ["get", "--json"], ["status"], ["--protocol", "git", "get"]] {
            let r = Harness.run("/usr/bin/strace", ["-f", "-qq", "-o", trace, "-e", "trace=open,openat,openat2,connect,keyctl,add_key,request_key,flock",
                                                    Harness.binary] + args,
                                env: env, stdin: args.contains("git") ? Array("protocol=https\nhost=chatgpt.com\n\n".utf8) : nil)
            #expect(r.status == 0 && r.stdout.contains(args == ["status"] ? host.tokens.email : host.tokens.accessToken), "\(args): \(r.stderr)")
            let calls = (try? String(contentsOfFile: trace, encoding: .utf8)) ?? ""
            #expect(!calls.isEmpty, "strace wrote nothing")
            #expect(!calls.contains(host.sandbox.root), "\(args) opened something of the data, config or runtime directory:\n\(calls)")
            for call in ["keyctl(", "add_key(", "request_key(", "flock("] {
                #expect(!calls.contains(call), "\(args) called \(call)")
            }
            for library in ["libsecret", "libcurl", "libglib", "libgio"] {
                #expect(!calls.contains(library), "\(args) loaded \(library)")
            }
            let connects = calls.split(separator: "\n").filter { $0.contains("connect(") }
            #expect(connects.count == 1 && connects[0].contains(host.socket), "\(args) connected to: \(connects)")
        }
    }

    @Test func aStoppedOrSilentBrokerIsExit4WithinTheDeadlineAndAMissingSocketExit5() throws {
        let host = try Host()
        let dir = host.socketDirectory
        let s = host.sandbox

        // A socket that exists with nobody listening (a broker that was killed): refused at once.
        let dead = dir + "/dead.sock"
        let fd = try Self.bindUnixSocket(dead)
        defer { close(fd) }
        var start = Date()
        let refused = s.run(["--broker", "unix:" + dead, "get"])
        #expect(refused.status == 4 && refused.stderr.contains("broker not answering"), "\(refused.status) \(refused.stderr)")
        #expect(Date().timeIntervalSince(start) < 2)
        let refusedInSandbox = Self.sandboxed(dead, ["chatgpt-credential", "get"])
        #expect(refusedInSandbox.status == 4, "\(refusedInSandbox.stderr)")

        // A listener that never answers: exit 4 at the 10 s deadline, well under 15 s.
        let silent = dir + "/silent.sock"
        let lfd = try Self.bindUnixSocket(silent)
        defer { close(lfd) }
        #expect(listen(lfd, 8) == 0)
        start = Date()
        let hung = s.run(["--broker", "unix:" + silent, "get"], timeout: 30)
        let took = Date().timeIntervalSince(start)
        #expect(hung.status == 4 && hung.stderr.contains("broker not answering") && hung.stderr.contains("10 s"), "\(hung.status) \(hung.stderr)")
        #expect(took >= 9.5 && took < 12, "took \(took) s")
        print("client mode: a silent broker gave exit \(hung.status) after \(String(format: "%.2f", took)) s")

        // No socket at all: exit 5. A malformed address: exit 2, before any connection.
        let missing = s.run(["get"], env: ["CHATGPT_CREDENTIAL_BROKER": "unix:" + dir + "/none.sock"])
        #expect(missing.status == 5 && missing.stderr.contains("no broker socket"), "\(missing.stderr)")
        for bad in ["unix:relative.sock", dir + "/dead.sock", "tcp:127.0.0.1:9"] {
            let r = s.run(["--broker", bad, "get"])
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1, "\(bad): \(r.status) \(r.stderr)")
        }
        // An empty variable is unset: the host's own store answers.
        #expect(s.run(["get"], env: ["CHATGPT_CREDENTIAL_BROKER": ""]).stdout == host.tokens.accessToken + "\n")
    }

    /// A broker whose listen backlog is full (man page BROKER, Client mode): the client process
    /// waits within its 10 s deadline, and prints the token once the broker accepts. It used to
    /// fail at once: exit 4, "Transport endpoint is not connected", in 0.03 s.
    @Test func aFullBacklogIsWaitedOnByTheClientProcess() throws {
        var template = Array("/tmp/ccred-bbacklog-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        let path = dir + "/broker.sock"
        defer { unlink(path); rmdir(dir) }
        let listener = try Self.bindUnixSocket(path)
        defer { close(listener) }
        #expect(listen(listener, 0) == 0)
        // Fill the backlog: non-blocking connects until one says EAGAIN.
        let fillers = try fillBacklog(at: path)
        defer { fillers.forEach { close($0) } }

        let client = try Background(Harness.binary, ["--broker", "unix:" + path, "get"], env: ["PATH": "/usr/bin:/bin", "SWIFT_BACKTRACE": "enable=no"])
        // Half a second with the backlog full: still waiting, not failed.
        let watch = Date().addingTimeInterval(0.5)
        while client.process.isRunning && Date() < watch { usleep(5_000) }
        #expect(client.process.isRunning, "the client did not wait for a full backlog (expected it still running, then exit 0)")

        // Now the broker accepts: the fillers, then the client, which it answers.
        for _ in fillers {
            let c = accept(listener, nil, nil)
            if c >= 0 { close(c) }
        }
        var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        if client.process.isRunning, poll(&p, 1, 10_000) == 1 {
            let c = accept(listener, nil, nil)
            _ = readRequestHead(c) // the request, then the answer
            let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
            let body = #"{"access_token":"eyJ.backlog-token","account_id":"acct-1","expires_at":"\#(expires)","email":"a@example.com","plan":"plus"}"#
            let reply = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
            _ = reply.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
            close(c)
        }
        let r = client.finish(timeout: 15)
        #expect(r.status == 0 && r.stdout == "eyJ.backlog-token\n", "expected exit 0 with the token once the broker accepted: \(r.status) \(r.stderr)")
    }

    @Test func theBrokersErrorsKeepTheirExitCodes() throws {
        let host = try Host()
        try host.startBroker()
        defer { host.stopBroker() }
        let notSignedIn = Self.sandboxed(host.socket, ["chatgpt-credential", "--profile", "other", "get"])
        // The broker's advice is for its side: client mode refuses login (man page BROKER, Client mode).
        #expect(notSignedIn.status == 3 && notSignedIn.stderr.contains("run on the broker's side: chatgpt-credential --profile other login")
                && !notSignedIn.stderr.contains("run: chatgpt-credential"), "\(notSignedIn.stderr)")
        let status = Self.sandboxed(host.socket, ["chatgpt-credential", "--profile", "other", "status", "--json"])
        #expect(status.status == 3 && status.stdout.contains("\"signed_in\":false"), "\(status.stdout) \(status.stderr)")
        let dockerList = Self.sandboxed(host.socket, ["docker-credential-chatgpt", "--profile", "other", "list"])
        #expect(dockerList.status == 0 && dockerList.stdout == "{}\n", "\(dockerList.stdout)")
        let idToken = Self.sandboxed(host.socket, ["chatgpt-credential", "get", "--id-token"])
        #expect(idToken.status == 1 && idToken.stdout.isEmpty && idToken.stderr.contains("id token"), "\(idToken.stderr)")
    }

    // MARK: OpenSSH

    static let sshAvailable = FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh") && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-keygen")

    /// Another machine, played by a real sshd on loopback: `ssh -R REMOTE:LOCAL` forwards the
    /// broker's socket, and client mode on the far side gets the host's token through it (twice:
    /// the second session replaces the first one's leftover socket, `StreamLocalBindUnlink yes`).
    @Test(.enabled(if: sshAvailable)) func overAnSSHForwardedSocketAnotherMachineGetsTheToken() throws {
        let host = try Host()
        try host.startBroker()
        defer { host.stopBroker() }
        let dir = host.socketDirectory
        let env = ["PATH": "/usr/bin:/bin", "HOME": dir]
        try SSHFixture.makeKeys(in: dir, env: env)
        // sshd refuses to start without its privilege separation directory (Debian: /run/sshd).
        if geteuid() == 0 { mkdir("/run/sshd", 0o755) }
        let user = String(cString: getpwuid(geteuid())!.pointee.pw_name)
        // sshd closes every inherited descriptor at start, which Foundation's Process takes for
        // the child's exit (it then blocks in waitpid, and no other child is reaped): spawn it
        // directly and reap it here.
        var sshd: pid_t = 0
        var port = 0
        for _ in 0..<5 where sshd == 0 {
            port = SSHFixture.unusedPort()
            try SSHFixture.sshdConfig(port: port, keysIn: dir).write(toFile: dir + "/sshd_config", atomically: true, encoding: .utf8)
            let pid = try Self.spawn("/usr/sbin/sshd", ["-D", "-e", "-f", dir + "/sshd_config"], env: env)
            // Listening once a connection to the port is accepted.
            let stop = Date().addingTimeInterval(3)
            var status: Int32 = 0
            while Date() < stop && waitpid(pid, &status, WNOHANG) == 0 {
                if Self.tcpConnects(port) { sshd = pid; break }
                usleep(20_000)
            }
            if sshd == 0 { Self.stop(pid) }
        }
        try #require(sshd != 0, "sshd did not start on 127.0.0.1")
        defer { Self.stop(sshd) }

        let remote = dir + "/remote/chatgpt-credential.sock"
        mkdir(dir + "/remote", 0o700)
        let hostToken = host.sandbox.run(["get"]).stdout
        for session in 1...2 {
            let start = Date()
            let r = Harness.run("/usr/bin/ssh", [
                "-F", "/dev/null", "-i", dir + "/userkey", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                "-o", "ExitOnForwardFailure=yes", "-p", String(port),
                "-R", remote + ":" + host.socket, user + "@127.0.0.1",
                "env -i PATH=/usr/bin:/bin CHATGPT_CREDENTIAL_BROKER=unix:\(remote) CHATGPT_CREDENTIAL_PROFILE=\(host.sandbox.profile) \(Harness.binary) get && stat -c %a \(remote)",
            ], env: env, timeout: 30)
            let took = Date().timeIntervalSince(start)
            print("client mode over ssh -R, session \(session): exit \(r.status) in \(String(format: "%.2f", took)) s")
            #expect(r.status == 0 && r.stdout == hostToken + "600\n", "session \(session): \(r.status) \(r.stdout) \(r.stderr)")
            #expect(!r.allOutput.contains(host.tokens.refreshToken))
        }
        #expect(try host.issuer.counter("refresh_success") == 0)
        #expect(host.log.contains("/v1/token"), "the broker logged no request: \(host.log)")
    }

    /// posix_spawn with an empty signal mask; the caller reaps the child (`stop`).
    static func spawn(_ path: String, _ args: [String], env: [String: String]) throws -> pid_t {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        var files = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&files)
        defer { posix_spawn_file_actions_destroy(&files) }
        for fd: Int32 in 0...2 { posix_spawn_file_actions_addopen(&files, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
        let argv = ([path] + args).map { strdup($0) } + [nil]
        let envp = env.map { strdup($0.key + "=" + $0.value) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &files, &attr, argv, envp)
        guard rc == 0 else { throw HardeningFailure("posix_spawn \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// SIGTERM, then SIGKILL after a second; reaped either way.
    static func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) != 0 { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    static func tcpConnects(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        return Loopback.connect(fd, port: port) == 0
    }

    static func bindUnixSocket(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var sa = sockaddr_un()
        sa.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &sa.sun_path) { dst in for (i, b) in path.utf8.enumerated() { dst[i] = b } }
        let rc = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else { throw HardeningFailure("bind \(path): \(String(cString: strerror(errno)))") }
        return fd
    }
}
