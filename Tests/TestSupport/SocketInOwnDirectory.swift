import CredentialCore
#if canImport(Glibc)
import Glibc
#endif

/// The address of the UNIX socket at `path` (at most 107 bytes: the tests' paths are short).
public func unixAddress(_ path: String) -> sockaddr_un {
    var sa = sockaddr_un()
    sa.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &sa.sun_path) { dst in for (i, b) in path.utf8.enumerated() { dst[i] = b } }
    return sa
}

/// A broker stand-in's socket: a new directory of its own (`mkdtemp`, 0700, `/tmp/PREFIX-XXXXXX`)
/// and a close-on-exec UNIX stream socket bound at `broker.sock` in it, listening with `backlog`
/// (nil: bound only). The caller closes the descriptor and removes the two.
public func brokerSocketInOwnDirectory(_ prefix: String, backlog: Int32?) throws -> (directory: String, fd: Int32) {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    let directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var sa = unixAddress(directory + "/broker.sock")
    let bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
    guard bound == 0, backlog.map({ listen(fd, $0) == 0 }) ?? true else {
        let code = errno
        close(fd)
        throw CredentialError.failure("bind/listen \(directory)/broker.sock: errno \(code)")
    }
    return (directory, fd)
}
