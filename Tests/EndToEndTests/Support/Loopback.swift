import Foundation

/// 127.0.0.1:PORT for the tests' TCP sockets: every bind and connect to loopback in one place.
enum Loopback {
    /// `bind(2)` of `fd` to 127.0.0.1:`port`; its return value.
    static func bind(_ fd: Int32, port: Int) -> Int32 { withAddress(port) { Glibc.bind(fd, $0, $1) } }

    /// `connect(2)` of `fd` to 127.0.0.1:`port`; its return value.
    static func connect(_ fd: Int32, port: Int) -> Int32 { withAddress(port) { Glibc.connect(fd, $0, $1) } }

    private static func withAddress(_ port: Int, _ call: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
