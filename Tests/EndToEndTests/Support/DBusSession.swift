import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A long-running child (a bus daemon, a fixture service) that is ready once it prints its
/// first stdout line. Killed (SIGKILL, by pid) when this object goes away.
final class BackgroundProcess {
    let process = Process()
    private let out = Pipe()
    private(set) var firstLine = ""

    init?(_ executable: String, _ args: [String], env: [String: String], readyWithin seconds: Double = 10) {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.environment = env
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        guard let line = readLine(within: seconds) else { stop(); return nil }
        firstLine = line
    }

    private func readLine(within seconds: Double) -> String? {
        let fd = out.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(seconds)
        var bytes: [UInt8] = []
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&pfd, 1, ms) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return nil }
            if byte == 10 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// A private D-Bus session bus (`dbus-daemon --session`) with its own environment, so a test can
/// run a second or third "login session" beside the one `make test` provides.
final class PrivateBus {
    let daemon: BackgroundProcess
    var address: String { daemon.firstLine }
    /// `env` plus DBUS_SESSION_BUS_ADDRESS for this bus.
    let env: [String: String]

    init?(env base: [String: String]) {
        var e = base
        e.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        guard let d = BackgroundProcess("/usr/bin/dbus-daemon", ["--session", "--nofork", "--print-address=1"], env: e),
              d.firstLine.hasPrefix("unix:") else { return nil }
        daemon = d
        e["DBUS_SESSION_BUS_ADDRESS"] = d.firstLine
        env = e
    }

    /// Runs a shell snippet with this bus as the session bus.
    func sh(_ script: String, stdin: String? = nil, timeout: Double = 20) -> RunResult {
        Harness.run("/bin/sh", ["-c", script], env: env, stdin: stdin.map { Array($0.utf8) }, timeout: timeout)
    }

    /// Runs a command that leaves a daemon behind (gnome-keyring-daemon --start/--unlock).
    /// Foundation.Process learns that a child ended when a descriptor it shares with the child
    /// closes; a daemon that inherits it keeps the child "running" forever. So every descriptor
    /// above 2 is closed first and the daemon's own output goes to a file.
    func startDaemon(_ command: String, stdin: String? = nil, log: String, timeout: Double = 20) -> RunResult {
        let script = #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done 2>/dev/null; "#
            + command + " >\"$CCRED_DAEMON_LOG\" 2>&1"
        var e = env
        e["CCRED_DAEMON_LOG"] = log
        return Harness.run("/bin/bash", ["-c", script], env: e, stdin: stdin.map { Array($0.utf8) }, timeout: timeout)
    }
}

/// Parsed `secret-tool search --all` output: one entry per item.
struct SecretToolItem {
    var path = ""
    var label = ""
    var secret = ""
}

func parseSecretToolSearch(_ text: String) -> [SecretToolItem] {
    var items: [SecretToolItem] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
        if line.hasPrefix("[") {
            var item = SecretToolItem()
            item.path = String(line.dropFirst().dropLast())
            items.append(item)
        } else if line.hasPrefix("label = "), !items.isEmpty {
            items[items.count - 1].label = String(line.dropFirst(8))
        } else if line.hasPrefix("secret = "), !items.isEmpty {
            items[items.count - 1].secret = String(line.dropFirst(9))
        }
    }
    return items
}

/// The Python with python3-dbus and gi (Debian's), not a pyenv shim.
let systemPython: String = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

/// Whether this test process has a session bus (`make test` / CI always provide one).
let hasSessionBus: Bool = {
    let env = ProcessInfo.processInfo.environment
    if let a = env["DBUS_SESSION_BUS_ADDRESS"], !a.isEmpty { return true }
    if let r = env["XDG_RUNTIME_DIR"], FileManager.default.fileExists(atPath: r + "/bus") { return true }
    return false
}()
