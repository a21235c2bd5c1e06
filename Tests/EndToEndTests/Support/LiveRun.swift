import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The binary running in a sandbox while the test talks to it: stderr is collected as it
/// arrives, stdin stays open until `closeStdin`, and SIGINT can be sent (login tests).
final class LiveRun: @unchecked Sendable {
    let process = Process()
    private let stdinPipe = Pipe()
    private let errPipe = Pipe()
    private let outPipe = Pipe()
    private let lock = NSLock()
    private var errData = Data()
    private let readerDone = DispatchSemaphore(value: 0)

    init(_ sandbox: Sandbox, _ args: [String], env extra: [String: String] = [:]) throws {
        var e = sandbox.env
        for (k, v) in extra { e[k] = v }
        process.executableURL = URL(fileURLWithPath: Harness.binary)
        process.arguments = args
        process.environment = e
        process.standardInput = stdinPipe
        process.standardError = errPipe
        process.standardOutput = outPipe
        try Harness.runAsAShellWould(process)
        let handle = errPipe.fileHandleForReading
        DispatchQueue.global().async {
            while true {
                let d = handle.availableData
                if d.isEmpty { break }
                self.lock.lock(); self.errData.append(d); self.lock.unlock()
            }
            self.readerDone.signal()
        }
        DispatchQueue.global().async { _ = self.outPipe.fileHandleForReading.readDataToEndOfFile() }
    }

    var stderr: String {
        lock.lock(); defer { lock.unlock() }
        return String(decoding: errData, as: UTF8.self)
    }

    var stderrBytes: [UInt8] {
        lock.lock(); defer { lock.unlock() }
        return Array(errData)
    }

    /// Waits until stderr contains `text`; false on timeout or when the process ended first.
    func waitFor(_ text: String, timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if stderr.contains(text) { return true }
            if !process.isRunning { return stderr.contains(text) }
            usleep(10_000)
        }
        return false
    }

    /// Waits until `condition` holds of stderr (a count of lines reached, say); false on timeout.
    func waitUntil(timeout: Double = 10, _ condition: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(stderr) { return true }
            if !process.isRunning { return condition(stderr) }
            usleep(10_000)
        }
        return false
    }

    func send(_ text: String) {
        stdinPipe.fileHandleForWriting.write(Data(text.utf8))
    }

    func closeStdin() { try? stdinPipe.fileHandleForWriting.close() }

    func interrupt() { kill(process.processIdentifier, SIGINT) }

    func signal(_ n: Int32) { kill(process.processIdentifier, n) }

    /// The exit status, or nil after `timeout` (the process is then killed).
    func wait(timeout: Double = 30) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                closeStdin()
                return nil
            }
            usleep(5_000)
        }
        process.waitUntilExit()
        closeStdin()
        _ = readerDone.wait(timeout: .now() + 5)
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

/// A raw HTTP/1.1 exchange over loopback, independent of the code under test: sends `request`
/// as given and returns everything the server wrote until it closed (nil when it cannot connect).
func rawHTTP(port: Int, _ request: [UInt8], address: String = "127.0.0.1", timeout: Double = 5) -> String? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr(address)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else { return nil }
    var off = 0
    while off < request.count {
        let n = request[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n <= 0 { break }
        off += n
    }
    var response: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buf, buf.count, 0)
        if n <= 0 { break }
        response += buf[0..<n]
        if response.count > 1 << 20 { break }
    }
    return String(decoding: response, as: UTF8.self)
}

func rawGET(port: Int, path: String, host: String, address: String = "127.0.0.1") -> String? {
    rawHTTP(port: port, Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8), address: address)
}

/// The status code of a raw response ("HTTP/1.1 400 Bad Request…" → 400).
func statusOf(_ response: String?) -> Int? {
    guard let r = response, r.hasPrefix("HTTP/1.") else { return nil }
    let parts = r.split(separator: " ", maxSplits: 2)
    return parts.count > 1 ? Int(parts[1]) : nil
}

/// A listening TCP socket on 127.0.0.1:`port` that never accepts (a busy port). Nil if the port is taken.
final class PortBlocker {
    let fd: Int32
    init?(port: Int) {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Loopback.bind(s, port: port) == 0, listen(s, 8) == 0 else { close(s); return nil }
        fd = s
    }
    deinit { close(fd) }
}
