#if canImport(Glibc)
import Glibc
#endif

/// Why the backlog could not be filled (a test's set-up failed).
public struct BacklogError: Error, CustomStringConvertible {
    public let description: String
}

/// Fills the listen backlog of the UNIX socket listening at `path` (with a backlog of 0): non-blocking
/// connects until the kernel answers EAGAIN. Returns the connections that got in, for the caller to
/// close; throws when a connect fails otherwise or the backlog never fills (64 connections).
public func fillBacklog(at path: String) throws -> [Int32] {
    var sa = unixAddress(path)
    var fillers: [Int32] = []
    while fillers.count < 64 {
        let f = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        let r = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(f, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        if r == 0 { fillers.append(f); continue }
        let code = errno
        close(f)
        guard code == EAGAIN else {
            fillers.forEach { close($0) }
            throw BacklogError(description: "filling the backlog: errno \(code)")
        }
        break
    }
    guard !fillers.isEmpty, fillers.count < 64 else {
        fillers.forEach { close($0) }
        throw BacklogError(description: "the backlog did not fill (\(fillers.count) connections)")
    }
    return fillers
}
