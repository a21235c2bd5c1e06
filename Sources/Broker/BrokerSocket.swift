import CredentialCore
import SystemRuntime
import CSystemShims
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
    /// The socket file's device and inode as bound: `close` removes the path only while it still
    /// names this socket (a newer broker's socket at the same path is left alone).
    package var identity: (dev: UInt64, ino: UInt64)?

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
        guard path.hasPrefix("/") else {
            throw CredentialError.usage("--socket needs an absolute path: \(Sanitize.line(path, limit: 120))")
        }
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
        // A shared directory (not the user's, or sticky as /tmp is) is never to be chmod-ed:
        // the advice is a private one (man page BROKER).
        let privateOne = "--socket in $XDG_RUNTIME_DIR or in a 0700 directory of your own"
        guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == uid else {
            throw CredentialError.storeFailure("\(Sanitize.line(dir)) is not a directory of this user; put the socket in a private one: \(privateOne)")
        }
        // The default directory is private; an explicit one only needs to be safe from being
        // replaced under us (the peer check keeps other users out).
        if explicit == nil, st.st_mode & 0o077 != 0 { throw CredentialError.permissionsTooOpen(path: dir + "/") }
        if st.st_mode & 0o022 != 0, st.st_mode & 0o1000 != 0 { // S_ISVTX
            throw CredentialError.storeFailure("\(Sanitize.line(dir)) is a shared directory (writable by others); put the socket in a private one: \(privateOne)")
        }
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
        // The kernel's largest backlog (SOMAXCONN, capped by net.core.somaxconn): a burst of
        // connections, refused ones included, waits to be accepted rather than failing EAGAIN.
        guard listen(fd, SOMAXCONN) == 0 else {
            let e = errno
            Glibc.close(fd); unlink(path)
            throw CredentialError.failure("cannot listen on \(Sanitize.line(path)): \(String(cString: strerror(e)))")
        }
        // What the path names now is this socket (nothing else runs in between: bind created it).
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else {
            let e = errno
            Glibc.close(fd)
            throw CredentialError.failure("cannot find the socket just bound at \(Sanitize.line(path)): \(String(cString: strerror(e)))")
        }
        var listener = BrokerListener(fd: fd, path: path, name: path, activated: false)
        listener.identity = (UInt64(st.st_dev), UInt64(st.st_ino))
        return listener
    }

    /// Closes the socket and removes the file this process created, only if the path still names
    /// it (same device and inode): after `rm` and a newer broker at the same path, that one's
    /// socket stays.
    package func close() {
        if let path, let identity {
            var byPath = stat()
            if lstat(path, &byPath) == 0, byPath.st_mode & S_IFMT == S_IFSOCK,
               UInt64(byPath.st_dev) == identity.dev, UInt64(byPath.st_ino) == identity.ino {
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
    package static func isLive(_ path: String) -> Bool {
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

/// Making a bound socket connectable for the users named with `--allow-uid` (man page BROKER):
/// a POSIX access ACL granting them read and write, else (a filesystem without ACLs) mode 0666.
/// The peer check stays the gate either way. Never applied to a socket systemd passed (its file
/// is the .socket unit's) and never to a parent directory.
package enum BrokerSocketAccess: Equatable, Sendable {
    case acl
    case worldWritable

    /// The uids that cannot be allowed: the overflow uid (65534, and what
    /// /proc/sys/kernel/overflowuid says), which every unmapped user of a namespace appears as.
    package static func overflowUIDs() -> Set<UInt32> {
        var uids: Set<UInt32> = [65534]
        let fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return uids }
        defer { Glibc.close(fd) }
        var buf = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &buf, buf.count)
        if n > 0, let uid = UInt32(String(decoding: buf[0..<n].filter { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self)) {
            uids.insert(uid)
        }
        return uids
    }

    /// The `system.posix_acl_access` value: version 2, then USER_OBJ rw, USER rw for each uid,
    /// GROUP_OBJ none, MASK rw, OTHER none, sorted by tag then id (as the kernel requires).
    package static func aclValue(uids: [UInt32]) -> [UInt8] {
        var out: [UInt8] = []
        func u16(_ v: UInt16) { out += [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) { for i in 0..<4 { out.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) } }
        func entry(_ tag: UInt16, _ perm: UInt16, _ id: UInt32) { u16(tag); u16(perm); u32(id) }
        let undefined = UInt32.max, rw: UInt16 = 6
        u32(2)
        entry(0x01, rw, undefined) // ACL_USER_OBJ
        for uid in Set(uids).sorted() { entry(0x02, rw, uid) } // ACL_USER
        entry(0x04, 0, undefined) // ACL_GROUP_OBJ
        entry(0x10, rw, undefined) // ACL_MASK
        entry(0x20, 0, undefined) // ACL_OTHER
        return out
    }

    /// Grants `uids` access to the socket file at `path`: an ACL, or mode 0666 where the
    /// filesystem has no ACLs (EOPNOTSUPP).
    package static func grant(_ uids: [UInt32], path: String) throws -> BrokerSocketAccess {
        let value = aclValue(uids: uids)
        let rc = value.withUnsafeBytes { cs_lsetxattr(path, "system.posix_acl_access", $0.baseAddress, UInt($0.count)) }
        if rc == 0 { return .acl }
        let e = errno
        guard e == EOPNOTSUPP || e == ENOTSUP else {
            throw CredentialError.failure("cannot give --allow-uid users access to \(Sanitize.line(path)): \(String(cString: strerror(e)))")
        }
        guard chmod(path, 0o666) == 0 else {
            throw CredentialError.failure("cannot make \(Sanitize.line(path)) mode 0666 for --allow-uid: \(String(cString: strerror(errno)))")
        }
        return .worldWritable
    }

    /// The first directory on the way to `path` (its parent, then up to /) that `uid` cannot
    /// search, judged by its owner, group (the uid's groups) and other bits and any ACL entry
    /// for the uid; nil when all can be.
    package static func unreachableDirectory(for uid: UInt32, path: String) -> String? {
        if uid == 0 { return nil }
        let groups = groupsOf(uid)
        var dir = BrokerListener.parent(of: path)
        while true {
            var st = stat()
            if stat(dir, &st) == 0, !searchable(st, dir, uid, groups) { return dir }
            if dir == "/" || dir == "." { return nil }
            dir = BrokerListener.parent(of: dir)
        }
    }

    private static func searchable(_ st: stat, _ dir: String, _ uid: UInt32, _ groups: Set<UInt32>) -> Bool {
        let mode = UInt32(st.st_mode)
        if st.st_uid == uid { return mode & 0o100 != 0 }
        // An access ACL: a USER entry for the uid, masked.
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = cs_getxattr(dir, "system.posix_acl_access", &buf, UInt(buf.count))
        if n > 4 {
            var mask: UInt16 = 7, userPerm: UInt16?
            var i = 4
            while i + 8 <= Int(n) {
                let tag = UInt16(buf[i]) | UInt16(buf[i + 1]) << 8
                let perm = UInt16(buf[i + 2]) | UInt16(buf[i + 3]) << 8
                let id = UInt32(buf[i + 4]) | UInt32(buf[i + 5]) << 8 | UInt32(buf[i + 6]) << 16 | UInt32(buf[i + 7]) << 24
                if tag == 0x10 { mask = perm }
                if tag == 0x02 && id == uid { userPerm = perm }
                i += 8
            }
            if let userPerm { return userPerm & mask & 1 != 0 }
        }
        if groups.contains(UInt32(st.st_gid)) { return mode & 0o010 != 0 }
        return mode & 0o001 != 0
    }

    private static func groupsOf(_ uid: UInt32) -> Set<UInt32> {
        guard let pw = getpwuid(uid) else { return [] }
        var count: Int32 = 64
        var list = [gid_t](repeating: 0, count: 64)
        if getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &list, &count) < 0 {
            list = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &list, &count)
        }
        return Set(list.prefix(Int(max(count, 0))).map { UInt32($0) } + [UInt32(pw.pointee.pw_gid)])
    }
}
