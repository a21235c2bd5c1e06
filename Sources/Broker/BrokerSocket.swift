import CredentialCore
import SystemRuntime
#if canImport(Glibc)
import Glibc
#endif

/// The broker's listening socket (man page BROKER): a UNIX stream socket it binds itself, or
/// the one systemd passes (socket activation). Never TCP.
package struct BrokerListener: Sendable {
    package let fd: Int32
    /// The socket file this process created (removed again by `close`), nil when systemd owns it.
    package let path: String?
    /// What the startup line names: the path, or the path systemd bound.
    package let name: String
    package let activated: Bool

    /// `broker.sock` in the user's runtime directory.
    package static func defaultPath(uid: uid_t = geteuid()) -> String {
        Paths.userRuntimeDirectory(uid: uid) + "/broker.sock"
    }

    /// The socket systemd passed (`LISTEN_PID` is this process and `LISTEN_FDS` is 1: fd 3), or
    /// nil when this process was not socket-activated (either variable unset or not a number).
    /// A passed socket that is not a listening UNIX stream socket is refused (exit 2): the broker
    /// never answers on TCP.
    package static func activated(listenPID: Int32?, listenFDs: Int?) throws -> BrokerListener? {
        guard let pid = listenPID, pid == getpid(), let count = listenFDs else { return nil }
        guard count == 1 else {
            throw CredentialError.usage("systemd passed \(count) sockets (LISTEN_FDS); the broker takes exactly one")
        }
        let fd: Int32 = 3
        func option(_ name: Int32) -> Int32? {
            var v: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0 ? v : nil
        }
        guard option(SO_DOMAIN) == AF_UNIX, option(SO_TYPE) == Int32(SOCK_STREAM.rawValue), option(SO_ACCEPTCONN) == 1 else {
            throw CredentialError.usage("the socket systemd passed (fd 3) is not a listening UNIX stream socket; the broker never listens on TCP")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return BrokerListener(fd: fd, path: nil, name: boundPath(fd) ?? "the socket systemd passed", activated: true)
    }

    /// Binds `path` (nil: `defaultPath`, whose directory is created 0700) with mode 0600. An
    /// explicit path may sit in any directory of this user that group and others cannot write.
    /// A socket file left by a broker that is gone is replaced; a live one, a symlink or any
    /// other file is refused.
    package static func bind(path explicit: String?) throws -> BrokerListener {
        let uid = geteuid()
        let path = explicit ?? defaultPath(uid: uid)
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw CredentialError.usage("socket path too long (at most 107 bytes): \(Sanitize.line(path, limit: 120))")
        }
        let dir = parent(of: path)
        if explicit == nil {
            if mkdir(dir, 0o700) != 0 && errno != EEXIST {
                throw CredentialError.storeFailure("cannot create \(dir): \(String(cString: strerror(errno)))")
            }
        }
        var st = stat()
        guard lstat(dir, &st) == 0 else {
            throw CredentialError.usage("cannot use the socket directory \(Sanitize.line(dir)): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid else {
            throw CredentialError.storeFailure("\(Sanitize.line(dir)) is not a directory of this user; choose another place with --socket")
        }
        // The default directory is private; an explicit one only needs to be safe from being
        // replaced under us (the peer check keeps other users out).
        if explicit == nil, st.st_mode & 0o077 != 0 { throw CredentialError.permissionsTooOpen(path: dir + "/") }
        if st.st_mode & 0o022 != 0 {
            throw CredentialError.storeFailure("\(Sanitize.line(dir)) is writable by group or others; run: chmod go-w \(Sanitize.line(dir))")
        }

        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == uid else {
                throw CredentialError.failure("\(Sanitize.line(path)) exists and is not a socket of this user; not replacing it")
            }
            if isLive(path) { throw CredentialError.failure("a broker is already listening on \(Sanitize.line(path))") }
            // A socket nobody listens on: left by a broker that was killed.
            unlink(path)
        }

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw CredentialError.failure("cannot create a socket: \(String(cString: strerror(errno)))") }
        var addr = address(path)
        // The socket file is created 0600 (bind honours the umask; fchmod of a socket does not
        // reach its file). No thread runs yet, so changing the umask for this call is safe.
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindErrno = errno
        umask(old)
        guard rc == 0 else {
            Glibc.close(fd)
            throw CredentialError.failure("cannot bind \(Sanitize.line(path)): \(String(cString: strerror(bindErrno)))")
        }
        guard listen(fd, 128) == 0 else {
            let e = errno
            Glibc.close(fd); unlink(path)
            throw CredentialError.failure("cannot listen on \(Sanitize.line(path)): \(String(cString: strerror(e)))")
        }
        return BrokerListener(fd: fd, path: path, name: path, activated: false)
    }

    /// Closes the socket and removes the file this process created (if it is still that file).
    package func close() {
        if let path {
            var byPath = stat(), byFD = stat()
            if lstat(path, &byPath) == 0, fstat(fd, &byFD) == 0, byPath.st_mode & S_IFMT == S_IFSOCK, byPath.st_uid == geteuid() {
                unlink(path)
            }
        }
        Glibc.close(fd)
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func address(_ path: String) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        return addr
    }

    /// Whether something accepts connections on `path` (connect(2), 1 s at most).
    static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var addr = address(path)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc == 0 { return true }
        // A full backlog (EAGAIN) still means someone is listening.
        return errno == EAGAIN || errno == EINPROGRESS
    }

    /// The path a listening socket is bound to, when it has one.
    static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var len = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0 else { return nil }
        let bytes = withUnsafeBytes(of: addr.sun_path) { Array($0.prefix(while: { $0 != 0 })) }
        return bytes.isEmpty ? nil : Sanitize.line(String(decoding: bytes, as: UTF8.self))
    }
}
