import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `make install PREFIX=/usr DESTDIR=…` puts every file where the Makefile says (the usual FHS
/// places: bin, share/man/man1, bash-completion, zsh site-functions, fish vendor completions,
/// lib/systemd/user) and
/// `make uninstall` with the same variables removes them. One release build per run: the test
/// builds into its own scratch directory, since the `swift test` running it holds the lock on
/// `.build`. That build takes minutes, so this is a LongLoad suite: `make test-load` (and CI) runs
/// it, `make test` skips it.
@Suite struct LongLoadInstallTests {
    static let installed: [(path: String, mode: mode_t)] = [
        ("/usr/bin/chatgpt-credential", 0o755),
        ("/usr/share/man/man1/chatgpt-credential.1", 0o644),
        ("/usr/share/man/man7/chatgpt-credential.7", 0o644),
        ("/usr/share/bash-completion/completions/chatgpt-credential", 0o644),
        ("/usr/share/zsh/site-functions/_chatgpt-credential", 0o644),
        ("/usr/share/fish/vendor_completions.d/chatgpt-credential.fish", 0o644),
        // The systemd user units (SystemdUnitsTests checks their contents with systemd-analyze).
        ("/usr/lib/systemd/user/chatgpt-credential.socket", 0o644),
        ("/usr/lib/systemd/user/chatgpt-credential.service", 0o644),
        ("/usr/lib/systemd/user/chatgpt-credential-refresh.timer", 0o644),
        ("/usr/lib/systemd/user/chatgpt-credential-refresh.service", 0o644),
        ("/usr/lib/systemd/user/chatgpt-credential-sinks.service", 0o644),
    ]
    static let links = ["/usr/bin/git-credential-chatgpt", "/usr/bin/docker-credential-chatgpt"]

    @Test(.timeLimit(.minutes(30)))
    func installAndUninstall() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/make") else {
            Issue.record("make is not installed"); return
        }
        var template = Array("/tmp/ccred-install-XXXXXX".utf8CString)
        let destdir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = Harness.run("/bin/rm", ["-rf", destdir], env: ["PATH": "/usr/bin:/bin"]) }

        let parent = ProcessInfo.processInfo.environment
        var env = ["PATH": parent["PATH"] ?? "/usr/bin:/bin", "HOME": parent["HOME"] ?? destdir, "LANG": "C.UTF-8"]
        if let swift = parent["SWIFT"] { env["SWIFT"] = swift }
        let scratch = Harness.repoRoot + "/.build/install-test"
        let vars = ["PREFIX=/usr", "DESTDIR=\(destdir)",
                    "RELEASE_FLAGS=-c release --static-swift-stdlib --scratch-path \(scratch)"]

        let install = Harness.run("/usr/bin/make", ["-C", Harness.repoRoot, "--no-print-directory", "install"] + vars,
                                  env: env, timeout: 1700)
        #expect(install.status == 0 && !install.timedOut, "make install failed:\n\(install.stdout)\n\(install.stderr)")
        guard install.status == 0 else { return }

        for (path, mode) in Self.installed {
            var st = stat()
            guard lstat(destdir + path, &st) == 0 else { Issue.record("not installed: \(path)"); continue }
            #expect(st.st_mode & S_IFMT == S_IFREG, "\(path) is not a regular file")
            #expect(st.st_mode & 0o7777 == mode, "\(path) has mode \(String(st.st_mode & 0o7777, radix: 8))")
        }
        for link in Self.links {
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: destdir + link)
            #expect(target == "chatgpt-credential", "\(link) -> \(target ?? "missing")")
        }
        // The installed files are the repository's, and the binary runs.
        for (installedPath, source) in [("/usr/share/man/man1/chatgpt-credential.1", "man/chatgpt-credential.1"),
                                        ("/usr/share/man/man7/chatgpt-credential.7", "man/chatgpt-credential.7"),
                                        ("/usr/share/bash-completion/completions/chatgpt-credential", "completions/chatgpt-credential.bash"),
                                        ("/usr/share/zsh/site-functions/_chatgpt-credential", "completions/_chatgpt-credential"),
                                        ("/usr/share/fish/vendor_completions.d/chatgpt-credential.fish", "completions/chatgpt-credential.fish")] {
            #expect(FileManager.default.contentsEqual(atPath: destdir + installedPath, andPath: Harness.repoRoot + "/" + source),
                    "\(installedPath) differs from \(source)")
        }
        let version = Harness.run(destdir + "/usr/bin/chatgpt-credential", ["--version"], env: ["PATH": "/usr/bin:/bin"])
        #expect(version.status == 0 && version.stdout.hasPrefix("chatgpt-credential "), "installed binary: \(version.stderr)")
        // Through the symlink it speaks the git protocol: unknown verbs are ignored, exit 0.
        let git = Harness.run(destdir + "/usr/bin/git-credential-chatgpt", ["frobnicate"], env: ["PATH": "/usr/bin:/bin"], stdin: [])
        #expect(git.stdout.isEmpty, "git-credential-chatgpt printed \(git.stdout)")

        let uninstall = Harness.run("/usr/bin/make", ["-C", Harness.repoRoot, "--no-print-directory", "uninstall"] + vars,
                                    env: env, timeout: 120)
        #expect(uninstall.status == 0, "make uninstall failed:\n\(uninstall.stdout)\n\(uninstall.stderr)")
        var st = stat()
        for path in Self.installed.map(\.path) + Self.links {
            #expect(lstat(destdir + path, &st) != 0, "still there after uninstall: \(path)")
        }
        // Nothing else was left behind (directories may stay, as with any `make uninstall`).
        let leftovers = FileManager.default.enumerator(atPath: destdir)?.compactMap { $0 as? String }.filter {
            var s = stat()
            return lstat(destdir + "/" + $0, &s) == 0 && (s.st_mode & S_IFMT) != S_IFDIR
        } ?? []
        #expect(leftovers.isEmpty, "left after uninstall: \(leftovers)")
    }
}
