import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The systemd user units (systemd/, man page KEEP AN IDLE SIGN-IN ALIVE) as `make install-units`
/// installs them — the step `make install`, the .deb and the tarball share — checked by the real
/// `systemd-analyze --user verify`: syntax, the man page named in Documentation=, and the binary
/// named in ExecStart=. No release build is needed: the debug binary stands in for it.
@Suite(.serialized) struct SystemdUnitsTests {
    static let units = ["chatgpt-credential.socket", "chatgpt-credential.service",
                        "chatgpt-credential-refresh.timer", "chatgpt-credential-refresh.service",
                        "chatgpt-credential-sinks.service"]
    static let analyze = "/usr/bin/systemd-analyze"

    static func tempDir() -> String {
        var template = Array("/tmp/ccred-units-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    static func make(_ vars: [String]) -> RunResult {
        Harness.run("/usr/bin/make", ["-C", Harness.repoRoot, "--no-print-directory", "install-units"] + vars,
                    env: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], timeout: 60)
    }

    static func execStart(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }.map(String.init)
    }

    /// `systemd-analyze --user verify` of the five units in `dir`; the result and whatever it
    /// said about them (an unknown key is only a warning, exit 0: it must fail the test too).
    static func verify(_ dir: String, env extra: [String: String], runtime: String, wrap: [String] = []) -> (RunResult, [String]) {
        var env = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": runtime, "HOME": runtime]
        for (k, v) in extra { env[k] = v }
        let args = ["--user"] + (wrap.isEmpty ? [] : ["--man=no"]) + ["verify"] + units.map { dir + "/" + $0 }
        let r = wrap.isEmpty ? Harness.run(analyze, args, env: env, timeout: 60)
                             : Harness.run("/usr/bin/bwrap", wrap + [analyze] + args, env: env, timeout: 60)
        let said = (r.stdout + r.stderr).split(separator: "\n").map(String.init).filter { $0.contains("chatgpt-credential") }
        return (r, said)
    }

    @Test func unitsInstalledUnderAPrefixPassVerifyWithTheirBinaryAndManPage() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.analyze) else { Issue.record("systemd-analyze is not installed (APT_PACKAGES: systemd)"); return }
        let dir = Self.tempDir()
        defer { _ = Harness.run("/bin/rm", ["-rf", dir], env: ["PATH": "/usr/bin:/bin"]) }
        let prefix = dir + "/prefix"
        let r = Self.make(["PREFIX=\(prefix)"])
        #expect(r.status == 0, "make install-units: \(r.stdout) \(r.stderr)")
        let unitDir = prefix + "/lib/systemd/user"
        for u in Self.units {
            var st = stat()
            #expect(lstat(unitDir + "/" + u, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && st.st_mode & 0o7777 == 0o644, "\(u) not installed 0644")
        }
        #expect(try Self.execStart(unitDir + "/chatgpt-credential-refresh.service") == ["ExecStart=\(prefix)/bin/chatgpt-credential refresh --all --if-idle 7"])
        #expect(try Self.execStart(unitDir + "/chatgpt-credential.service") == ["ExecStart=\(prefix)/bin/chatgpt-credential serve"])
        #expect(try Self.execStart(unitDir + "/chatgpt-credential-sinks.service") == ["ExecStart=\(prefix)/bin/chatgpt-credential sink run"])
        let socket = try String(contentsOfFile: unitDir + "/chatgpt-credential.socket", encoding: .utf8)
        for line in ["ListenStream=%t/chatgpt-credential/broker.sock", "SocketMode=0600", "DirectoryMode=0700"] {
            #expect(socket.contains("\n" + line + "\n"), "the socket unit lacks \(line)")
        }
        let timer = try String(contentsOfFile: unitDir + "/chatgpt-credential-refresh.timer", encoding: .utf8)
        for line in ["OnCalendar=daily", "Persistent=true", "RandomizedDelaySec=1h"] {
            #expect(timer.contains("\n" + line + "\n"), "the timer lacks \(line)")
        }
        let runtime = dir + "/run"
        mkdir(runtime, 0o700)
        // The man page where man(1) finds it, as an installed system has it.
        mkdir(dir + "/man", 0o755); mkdir(dir + "/man/man1", 0o755)
        #expect(symlink(Harness.repoRoot + "/man/chatgpt-credential.1", dir + "/man/man1/chatgpt-credential.1") == 0)

        // Without the binary, verify fails naming it: the check is real.
        let (missing, _) = Self.verify(unitDir, env: ["MANPATH": dir + "/man"], runtime: runtime)
        #expect(missing.status != 0, "verify passed without the binary")
        #expect(missing.allOutput.contains("\(prefix)/bin/chatgpt-credential is not executable"), "\(missing.allOutput)")

        mkdir(prefix + "/bin", 0o755)
        #expect(symlink(Harness.binary, prefix + "/bin/chatgpt-credential") == 0)
        let (ok, said) = Self.verify(unitDir, env: ["MANPATH": dir + "/man"], runtime: runtime)
        #expect(ok.status == 0, "systemd-analyze --user verify: exit \(ok.status): \(ok.allOutput)")
        #expect(said.isEmpty, "systemd-analyze said: \(said)")

        // Without the man page, verify fails on Documentation=: that check is real too.
        let (noMan, _) = Self.verify(unitDir, env: ["MANPATH": dir + "/nowhere"], runtime: runtime)
        #expect(noMan.status != 0 && noMan.allOutput.contains("man chatgpt-credential(1)"), "\(noMan.allOutput)")
    }

    /// The staging the .deb is built from (`PREFIX=/usr DESTDIR=…`): the units name
    /// /usr/bin/chatgpt-credential, which verify finds in a bubblewrap sandbox where the built
    /// binary is bound there (the host has none).
    @Test func theDebStagingsUnitsNameUsrBinAndPassVerify() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.analyze) else { Issue.record("systemd-analyze is not installed (APT_PACKAGES: systemd)"); return }
        let dir = Self.tempDir()
        defer { _ = Harness.run("/bin/rm", ["-rf", dir], env: ["PATH": "/usr/bin:/bin"]) }
        let stage = dir + "/stage"
        let r = Self.make(["PREFIX=/usr", "DESTDIR=\(stage)"])
        #expect(r.status == 0, "make install-units: \(r.stdout) \(r.stderr)")
        let unitDir = stage + "/usr/lib/systemd/user"
        #expect(try Self.execStart(unitDir + "/chatgpt-credential-refresh.service") == ["ExecStart=/usr/bin/chatgpt-credential refresh --all --if-idle 7"])
        #expect(try Self.execStart(unitDir + "/chatgpt-credential.service") == ["ExecStart=/usr/bin/chatgpt-credential serve"])
        #expect(try Self.execStart(unitDir + "/chatgpt-credential-sinks.service") == ["ExecStart=/usr/bin/chatgpt-credential sink run"])
        // The five units and nothing else of systemd's (no links that would enable one).
        let staged = try FileManager.default.subpathsOfDirectory(atPath: stage)
        #expect(Set(staged.filter { $0.hasSuffix(".socket") || $0.hasSuffix(".service") || $0.hasSuffix(".timer") })
                == Set(Self.units.map { "usr/lib/systemd/user/" + $0 }), "staged: \(staged)")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/bwrap") else { Issue.record("bwrap is not installed"); return }
        // An empty /usr/bin but for systemd-analyze (and, the second time, the binary).
        let base = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/tmp",
                    "--tmpfs", "/usr/bin", "--ro-bind", Self.analyze, Self.analyze,
                    "--ro-bind", unitDir, "/tmp/units", "--chdir", "/tmp"]
        let withBinary = base + ["--ro-bind", Harness.binary, "/usr/bin/chatgpt-credential"]
        let (ok, said) = Self.verify("/tmp/units", env: [:], runtime: "/run", wrap: withBinary)
        #expect(ok.status == 0, "systemd-analyze --user verify (in bwrap): exit \(ok.status): \(ok.allOutput)")
        #expect(said.isEmpty, "systemd-analyze said: \(said)")
        // And without the binary bound there, it fails: /usr/bin/chatgpt-credential is what it checked.
        let (missing, _) = Self.verify("/tmp/units", env: [:], runtime: "/run", wrap: base)
        #expect(missing.status != 0 && missing.allOutput.contains("/usr/bin/chatgpt-credential is not executable"), "\(missing.allOutput)")
    }
}
