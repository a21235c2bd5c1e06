import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 29: the README's recipes in "Use it from scripts and tools" (git), "Keep an idle sign-in
/// alive", "Use it from other tools" (Codex) and "Containers and sandboxes" work when pasted.
/// The shell blocks that can run here run literally (no word changed: the README marks its
/// placeholders `<LIKE_THIS>`, and no runnable block has one) in a throwaway home, in a private
/// mount and pid namespace with fresh `/run` and `/tmp`, once with `/run/user/UID` and once
/// without. The blocks that cannot run here (docker, `systemctl --user`, ssh to another machine,
/// Codex's TOML, a devcontainer) are checked for the paths, names and options they use against
/// what the tool prints and accepts.
@Suite(.serialized) struct ReadmeRecipesTests {
    struct Block {
        var section: String
        var language: String
        var text: String
        /// A word of it that needs a machine or a program this suite does not have.
        var runsHere: Bool {
            language == "sh" && !text.split(separator: "\n").contains { line in
                let word = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? ""
                return ["docker", "systemctl", "loginctl", "ssh", "codex"].contains(word)
            }
        }
    }

    static let sections = ["Use it from scripts and tools", "Keep an idle sign-in alive", "Use it from other tools", "Containers and sandboxes"]

    /// The fenced blocks of those sections, in order.
    static func blocks() throws -> [Block] {
        let text = try String(contentsOfFile: Harness.repoRoot + "/README.md", encoding: .utf8)
        var section = "", blocks: [Block] = [], open: Block?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if var b = open {
                if line == "```" { blocks.append(b); open = nil } else { b.text += line + "\n"; open = b }
                continue
            }
            if line.hasPrefix("## ") { section = String(line.dropFirst(3)) }
            if line.hasPrefix("```"), sections.contains(section) { open = Block(section: section, language: String(line.dropFirst(3)), text: "") }
        }
        return blocks
    }

    static func placeholders(_ text: String) -> [String] {
        text.matches(of: /<[A-Z][A-Z_]*>/).map { String($0.output) }
    }

    /// What the recipes may name of the tool: its socket's path as `serve --print-socket` prints it.
    @Test func theRecipesNameNoUnmarkedPlaceholderAndTheSocketByCommand() throws {
        // chatgpt-credential(7) shows the same container, sandbox and SSH recipes (Client mode).
        let concepts = try String(contentsOfFile: Harness.repoRoot + "/man/chatgpt-credential.7", encoding: .utf8)
        for literal in ["/run/user/1000", "/home/me", "--bind \"$XDG_RUNTIME_DIR"] { #expect(!concepts.contains(literal), "chatgpt-credential(7) names \(literal)") }
        #expect(concepts.contains(#"sock="$(chatgpt-credential serve --print-socket)""#) && concepts.contains(#"--ro-bind "$bin" /run/chatgpt-credential"#))
        let blocks = try Self.blocks()
        #expect(blocks.filter(\.runsHere).count >= 5, "\(blocks.map(\.section))")
        for b in blocks {
            for literal in ["/run/user/1000", "/home/me", "$XDG_RUNTIME_DIR", "XDG_RUNTIME_DIR}"] {
                #expect(!b.text.contains(literal), "an unmarked machine-specific path in \(b.section):\n\(b.text)")
            }
            if b.runsHere { #expect(Self.placeholders(b.text).isEmpty, "a runnable block with a placeholder:\n\(b.text)") }
            if b.text.contains("broker.sock") || b.text.contains(".sock") {
                #expect(b.text.contains("serve --print-socket") || b.text.contains("<SOCKET>") || b.text.contains("/run/broker.sock"),
                        "a socket path not from the tool:\n\(b.text)")
            }
        }
    }

    // MARK: the blocks that run here

    /// Runs the runnable blocks, each by itself with `sh -e`, in a private mount and pid namespace
    /// (a fresh `/run` and `/tmp`; `/run/user/UID` made or not), with a signed-in default profile
    /// in a throwaway home, then asks git for both hosts. Returns each block's output and a
    /// `git credential fill` answer per host.
    static func runInNamespace(withRunUser: Bool, root: String, env: [String: String], blocks: [Block]) throws -> RunResult {
        var script = "set -u\n"
        script += "mount -t tmpfs -o mode=755 tmpfs /run && mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 90\n"
        if withRunUser { script += "mkdir -p -m 755 /run/user && mkdir -m 700 /run/user/$(id -u) || exit 91\n" }
        script += "test \"$(chatgpt-credential serve --print-socket)\" = \"\(withRunUser ? "/run/user/$(id -u)/chatgpt-credential" : "/tmp/chatgpt-credential-$(id -u)")/broker.sock\" || exit 92\n"
        // The debug build's Swift runtime (a packaged binary links it statically): where the
        // loader finds it inside the sandbox too, under /usr, through LD_LIBRARY_PATH.
        for dir in Harness.libraryDirectories.prefix(1) { script += "mount --bind \(dir) /usr/local/src && export LD_LIBRARY_PATH=/usr/local/src || exit 93\n" }
        script += "cd \"$HOME\"\n"
        for (i, b) in blocks.enumerated() {
            let file = root + "/block-\(i).sh"
            try b.text.write(toFile: file, atomically: true, encoding: .utf8)
            script += "sh -e \(file) > \(root)/out-\(i) 2> \(root)/err-\(i); echo \"block \(i): $?\"\n"
            // The broker started on demand answers before the next block asks it.
            if b.text.contains("systemd-socket-activate") {
                script += "for n in $(seq 50); do test -S \"$(chatgpt-credential serve --print-socket)\" && break; sleep 0.1; done\n"
            }
        }
        for host in ["chatgpt.com", "api.openai.com"] {
            script += "printf 'protocol=https\\nhost=\(host)\\n\\n' | git credential fill > \(root)/fill-\(host) 2>&1; echo \"fill \(host): $?\"\n"
        }
        return Harness.run("/usr/bin/unshare", ["--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "sh", "-c", script],
                           env: env, timeout: 120)
    }


    static var canUnshare: Bool {
        geteuid() == 0 && Harness.run("/usr/bin/unshare", ["--mount", "--pid", "--fork", "true"], env: ["PATH": "/usr/bin:/bin"]).status == 0
    }

    @Test(.enabled(if: Self.canUnshare, "needs root for a private mount namespace"), arguments: [true, false])
    func theRunnableBlocksWorkWithAndWithoutRunUser(_ withRunUser: Bool) throws {
        let blocks = try Self.blocks().filter(\.runsHere)
        var template = Array("/var/tmp/ccred-readme-XXXXXX".utf8CString)
        let root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = Harness.run("/bin/rm", ["-rf", root], env: ["PATH": "/usr/bin:/bin"]) }
        for d in ["home", "bin"] { mkdir(root + "/" + d, 0o700) }
        // Installed somewhere no recipe assumes: the binary and git's helper name on PATH.
        #expect(symlink(Harness.binary, root + "/bin/chatgpt-credential") == 0)
        #expect(symlink("chatgpt-credential", root + "/bin/git-credential-chatgpt") == 0)
        let issuer = try TestIssuer()
        let env: [String: String] = [
            "HOME": root + "/home", "PATH": root + "/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SWIFT_BACKTRACE": "enable=no",
            "CHATGPT_CREDENTIAL_ISSUER": issuer.url, "CHATGPT_CREDENTIAL_STORE": "file",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
        ]
        let t = try issuer.seed([:])
        let shape = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)","account_id":"\#(t.accountId)"}"#
        let stored = Harness.run(Harness.binary, ["store"], env: env, stdin: Array(shape.utf8))
        #expect(stored.status == 0, "\(stored.stderr)")

        let r = try Self.runInNamespace(withRunUser: withRunUser, root: root, env: env, blocks: blocks)
        #expect(r.status == 0, "namespace: exit \(r.status): \(r.stdout)\(r.stderr)")
        func read(_ name: String) -> String { (try? String(contentsOfFile: root + "/" + name, encoding: .utf8)) ?? "" }
        for (i, b) in blocks.enumerated() {
            #expect(r.stdout.contains("block \(i): 0\n"), "\(withRunUser ? "with" : "without") /run/user: block \(i) of \(b.section) failed:\n\(b.text)\n\(read("out-\(i)"))\(read("err-\(i)"))\n\(r.stdout)")
            // What its prose says it does.
            if b.text.contains("bwrap ") { #expect(read("out-\(i)") == t.accessToken + "\n", "the bwrap recipe prints the token: \(read("out-\(i)"))\(read("err-\(i)"))") }
            if b.text.contains("curl ") { #expect(read("out-\(i)") == t.accountId + "\n", "the curl recipe prints the account id: \(read("out-\(i)"))\(read("err-\(i)"))") }
        }
        // git fill answers both hosts, asking nothing.
        for host in ["chatgpt.com", "api.openai.com"] {
            #expect(r.stdout.contains("fill \(host): 0\n"), "\(read("fill-\(host)"))")
            #expect(read("fill-\(host)").contains("username=\(t.accountId)\n") && read("fill-\(host)").contains("password=\(t.accessToken)\n"),
                    "git credential fill for \(host): \(read("fill-\(host)"))")
        }
        // The passphrase drop-in: made for each unit it names.
        if blocks.contains(where: { $0.text.contains("LoadCredential=") }) {
            for unit in ["chatgpt-credential-refresh.service", "chatgpt-credential.service", "chatgpt-credential-sinks.service"] {
                let dropIn = root + "/home/.config/systemd/user/\(unit).d/passphrase.conf"
                #expect((try? String(contentsOfFile: dropIn, encoding: .utf8)) == "[Service]\nLoadCredential=chatgpt-credential.passphrase:%h/.config/chatgpt-credential/passphrase\n")
            }
            try Self.verifyDropIns(home: root + "/home")
        }
    }

    /// The `ssh -R` recipe against the suite's own sshd on loopback, in the private namespace:
    /// only its marked placeholders are substituted (`<HOST>`: a Host entry of the throwaway
    /// home's ~/.ssh/config naming that sshd; `<REMOTE_HOME>`: a directory only this user can
    /// write). It prints the host's token on the "other machine".
    @Test(.enabled(if: Self.canUnshare && BrokerClientEndToEndTests.sshAvailable, "needs root and OpenSSH"), arguments: [true, false])
    func theSSHRecipeForwardsTheSocketThroughTheSuitesSSHD(_ withRunUser: Bool) throws {
        let block = try #require(try Self.blocks().first { $0.text.contains("ssh ") && $0.text.contains("-R ") })
        var template = Array("/var/tmp/ccred-readme-XXXXXX".utf8CString)
        let root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = Harness.run("/bin/rm", ["-rf", root], env: ["PATH": "/usr/bin:/bin"]) }
        for d in ["home", "home/.ssh", "bin", "remote"] { mkdir(root + "/" + d, 0o700) }
        #expect(symlink(Harness.binary, root + "/bin/chatgpt-credential") == 0)
        let issuer = try TestIssuer()
        var env: [String: String] = ["HOME": root + "/home", "PATH": root + "/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                                     "SWIFT_BACKTRACE": "enable=no", "CHATGPT_CREDENTIAL_ISSUER": issuer.url, "CHATGPT_CREDENTIAL_STORE": "file"]
        let t = try issuer.seed([:])
        let shape = #"{"access_token":"\#(t.accessToken)","refresh_token":"\#(t.refreshToken)","id_token":"\#(t.idToken)","account_id":"\#(t.accountId)"}"#
        #expect(Harness.run(Harness.binary, ["store"], env: env, stdin: Array(shape.utf8)).status == 0)
        try SSHFixture.makeKeys(in: root, env: env)
        let port = SSHFixture.unusedPort()
        let user = String(cString: getpwuid(geteuid())!.pointee.pw_name)
        try SSHFixture.sshdConfig(port: port, keysIn: root, path: root + "/bin:/usr/bin:/bin")
            .write(toFile: root + "/sshd_config", atomically: true, encoding: .utf8)
        // <HOST>: how a person names the other machine, here in ~/.ssh/config.
        try """
        Host readme-host
          HostName 127.0.0.1
          Port \(port)
          User \(user)
          IdentityFile \(root)/userkey
          IdentitiesOnly yes
          BatchMode yes
          StrictHostKeyChecking no
          UserKnownHostsFile /dev/null
          LogLevel ERROR

        """.write(toFile: root + "/home/.ssh/config", atomically: true, encoding: .utf8)
        let text = block.text.replacingOccurrences(of: "<HOST>", with: "readme-host").replacingOccurrences(of: "<REMOTE_HOME>", with: root + "/remote")
        #expect(Self.placeholders(text).isEmpty, "\(text)")
        try text.write(toFile: root + "/ssh.sh", atomically: true, encoding: .utf8)
        env["LD_LIBRARY_PATH"] = Harness.libraryDirectories.joined(separator: ":")
        var script = "set -u\nmount -t tmpfs -o mode=755 tmpfs /run && mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 90\n"
        if withRunUser { script += "mkdir -p -m 755 /run/user && mkdir -m 700 /run/user/$(id -u) || exit 91\n" }
        // ssh reads ~/.ssh/config from the home in the password database: there, the throwaway home.
        let passwdHome = String(cString: getpwuid(geteuid())!.pointee.pw_dir)
        script += "mount --bind \"$HOME\" \(passwdHome) || exit 95\n"
        // sshd returns from daemon(3) before it listens; it writes its pid file once it does (at
        // most 30 s: a loaded machine running the parallel suite).
        script += "mkdir -m 755 /run/sshd && /usr/sbin/sshd -f \(root)/sshd_config -o PidFile=\(root)/sshd.pid || exit 94\n"
        script += "for n in $(seq 600); do test -s \(root)/sshd.pid && break; sleep 0.05; done; test -s \(root)/sshd.pid || exit 96\n"
        script += "chatgpt-credential serve 2>\(root)/serve.err &\n"
        script += "for n in $(seq 50); do test -S \"$(chatgpt-credential serve --print-socket)\" && break; sleep 0.1; done\n"
        script += "cd \"$HOME\" && sh -e \(root)/ssh.sh\n"
        let r = Harness.run("/usr/bin/unshare", ["--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "sh", "-c", script],
                            env: env, timeout: 60)
        #expect(r.status == 0 && r.stdout == t.accessToken + "\n", "exit \(r.status): \(r.stdout)\(r.stderr)")
    }

    /// `systemd-analyze --user verify` of the units as `make install-units` stages them, with the
    /// README's drop-ins found in the user's unit directory: nothing said about them.
    static func verifyDropIns(home: String) throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else { Issue.record("systemd-analyze is not installed"); return }
        let dir = SystemdUnitsTests.tempDir()
        defer { _ = Harness.run("/bin/rm", ["-rf", dir], env: ["PATH": "/usr/bin:/bin"]) }
        let prefix = dir + "/prefix"
        #expect(SystemdUnitsTests.make(["PREFIX=\(prefix)"]).status == 0)
        mkdir(prefix + "/bin", 0o755)
        #expect(symlink(Harness.binary, prefix + "/bin/chatgpt-credential") == 0)
        let unitDir = prefix + "/lib/systemd/user", runtime = dir + "/run"
        mkdir(runtime, 0o700)
        let units = SystemdUnitsTests.units.map { unitDir + "/" + $0 }
        let env = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home, "XDG_RUNTIME_DIR": runtime,
                   "SYSTEMD_UNIT_PATH": home + "/.config/systemd/user:" + unitDir + ":"]
        let r = Harness.run(analyze, ["--user", "--man=no", "verify"] + units, env: env, timeout: 60)
        let said = (r.stdout + r.stderr).split(separator: "\n").filter { $0.contains("chatgpt-credential") }
        #expect(r.status == 0 && said.isEmpty, "systemd-analyze verify with the README's drop-ins: \(r.allOutput)")
        // The check is real: a drop-in with a mistake in it is named.
        let bad = home + "/.config/systemd/user/chatgpt-credential-refresh.service.d/zz-bad.conf"
        try "[Service]\nLoadCredential=chatgpt-credential.passphrase:relative/path\n".write(toFile: bad, atomically: true, encoding: .utf8)
        defer { unlink(bad) }
        let wrong = Harness.run(analyze, ["--user", "--man=no", "verify"] + units, env: env, timeout: 60)
        #expect(wrong.allOutput.contains("zz-bad.conf"), "\(wrong.allOutput)")
    }

    // MARK: the blocks that cannot run here

    @Test func theBlocksThatCannotRunHereNameWhatTheToolPrintsAndAccepts() throws {
        let blocks = try Self.blocks()
        let shipped = Set(try FileManager.default.contentsOfDirectory(atPath: Harness.repoRoot + "/systemd").map { $0.hasSuffix(".in") ? String($0.dropLast(3)) : $0 })
        for b in blocks where !b.runsHere {
            // Every unit a systemctl line names is one the package ships.
            for line in b.text.split(separator: "\n") where line.contains("systemctl ") {
                for unit in line.matches(of: /chatgpt-credential[a-z-]*\.(service|timer|socket)/).map({ String($0.output.0) }) {
                    #expect(shipped.contains(unit), "\(unit) is not a shipped unit: \(line)")
                }
            }
            // Docker: the socket bound is the one the tool prints, at the path the variable names.
            if b.text.contains("docker run") {
                #expect(b.text.contains(#"-v "$(chatgpt-credential serve --print-socket)":/run/chatgpt-credential.sock"#), "\(b.text)")
                #expect(b.text.contains("-e CHATGPT_CREDENTIAL_BROKER=unix:/run/chatgpt-credential.sock"), "\(b.text)")
                #expect(b.text.contains(#"--user "$(id -u):$(id -g)""#) && b.text.contains("<IMAGE> chatgpt-credential get"), "\(b.text)")
            }
            if b.language == "jsonc" {
                #expect(b.text.contains("source=<SOCKET>,target=/run/chatgpt-credential.sock,type=bind") &&
                        b.text.contains(#""CHATGPT_CREDENTIAL_BROKER": "unix:/run/chatgpt-credential.sock""#), "\(b.text)")
            }
            // ssh -R: the local end is the socket the tool prints; the remote end is what client mode is pointed at.
            if b.text.contains("ssh ") {
                #expect(b.text.contains(#"-R "<REMOTE_HOME>/.chatgpt-credential.sock:$(chatgpt-credential serve --print-socket)""#), "\(b.text)")
                #expect(b.text.contains("CHATGPT_CREDENTIAL_BROKER=unix:<REMOTE_HOME>/.chatgpt-credential.sock chatgpt-credential get"), "\(b.text)")
            }
            // Codex: the command's token outlives the interval at which Codex asks again, by 5 min or more.
            if b.language == "toml" {
                let ttl = b.text.firstMatch(of: /args = \["get", "--min-ttl", "(\d+)"\]/).flatMap { Int($0.output.1) }
                let interval = b.text.firstMatch(of: /refresh_interval_ms = (\d+)/).flatMap { Int($0.output.1) }
                #expect(ttl != nil && interval != nil, "\(b.text)")
                if let ttl, let interval { #expect(ttl * 1000 - interval >= 300_000, "--min-ttl \(ttl) vs refresh_interval_ms \(interval)") }
                #expect(b.text.contains(#"command = "chatgpt-credential""#))
                // And the tool accepts those arguments (exit 2 would mean it does not).
                let s = Sandbox(bus: .none, store: "file")
                let issuer = try TestIssuer()
                _ = try s.storeSeeded(issuer)
                let get = s.run(["get", "--min-ttl", "\(ttl ?? 0)"])
                #expect(get.status == 0, "\(get.stderr)")
            }
        }
        // The socket the recipes ask for is where the broker listens by default.
        let printed = Harness.run(Harness.binary, ["serve", "--print-socket"], env: ["PATH": "/usr/bin:/bin"])
        #expect(printed.status == 0 && printed.stdout.hasSuffix("/broker.sock\n") && printed.stdout.hasPrefix("/"), "\(printed.stdout)\(printed.stderr)")
    }
}
