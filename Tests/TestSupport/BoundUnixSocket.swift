#if canImport(Glibc)
import Glibc
#endif

/// A UNIX stream socket bound at a path, as a session bus's socket is (nothing is accepted on
/// it): what the bus-finding tests put where a bus would be. Closed when it goes away; the file
/// stays until its directory is removed.
public final class BoundUnixSocket {
    public let fd: Int32

    /// nil when the socket cannot be made or bound (`errno` says why).
    public init?(at path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8CString)
        guard bytes.count <= MemoryLayout.size(ofValue: address.sun_path) else { close(fd); return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, c) in bytes.enumerated() { raw[i] = UInt8(bitPattern: c) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { close(fd); return nil }
    }

    deinit { close(fd) }
}
