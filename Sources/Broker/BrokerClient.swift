// Client mode's wire side (chatgpt-credential(1), BROKER, "Client mode"): one HTTP/1.1 GET over
// the broker's UNIX stream socket, with a deadline on connect, write and read. It opens nothing
// else: no store, keyring, lock, cache or data directory, so it works in a sandbox that sees only
// the socket. It never prints and decides no exit code (CredentialError.exitCode does).
import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `unix:/absolute/path`, the value of `--broker` and `CHATGPT_CREDENTIAL_BROKER`.
package struct BrokerAddress: Equatable, Sendable {
    package let path: String

    /// The longest path `sockaddr_un.sun_path` holds, with its terminating NUL.
    package static let maxPathBytes = 107

    package init(path: String) { self.path = path }

    /// `source` names where the text came from (`--broker`, `CHATGPT_CREDENTIAL_BROKER`) for the
    /// usage error: anything but `unix:` followed by an absolute path is exit 2.
    package static func parse(_ text: String, from source: String) throws -> BrokerAddress {
        let shown = Sanitize.line(text, limit: 60)
        guard text.hasPrefix("unix:") else {
            throw CredentialError.usage("invalid value '\(shown)' for \(source): use unix:/absolute/path/to/broker.sock")
        }
        let path = String(text.dropFirst(5))
        guard path.hasPrefix("/"), !path.utf8.contains(0), Sanitize.line(path) == path else {
            throw CredentialError.usage("invalid value '\(shown)' for \(source): the socket path must be absolute (unix:/…)")
        }
        guard path.utf8.count <= maxPathBytes else {
            throw CredentialError.usage("invalid value for \(source): a socket path is at most \(maxPathBytes) bytes")
        }
        return BrokerAddress(path: path)
    }

    package var description: String { "unix:" + path }
}

/// A client-mode `get` whose request the warm path (ARCHITECTURE.md, "The warm path") already
/// sent, before the Swift runtime started, and whose answer it left unread: `get` continues on
/// the socket within the deadline that began there, so the broker is asked once.
package struct BrokerHandoff: Sendable, Equatable {
    package let socket: Int32
    package let path: String
    package let target: String
    package let requestBytesSent: Int
    package let deadlineMillis: Int64

    package init(socket: Int32, path: String, target: String, requestBytesSent: Int, deadlineMillis: Int64) {
        self.socket = socket
        self.path = path
        self.target = target
        self.requestBytesSent = requestBytesSent
        self.deadlineMillis = deadlineMillis
    }
}

/// Asks the broker at `address`. Every call has one deadline (`timeout`, 10 s by default) that
/// covers connecting, writing the request and reading the whole answer.
package struct BrokerClient: Sendable {
    package let address: BrokerAddress
    package let timeout: Double

    /// How long a broker may take to answer before it counts as not answering (the man page).
    package static let defaultTimeout: Double = 10
    /// The largest answer read (a token answer is a few KiB, a usage answer well under that).
    package static let maxAnswerBytes = 256 * 1024
    /// The largest usage answer taken: what the host prints for `usage --json` (at most
    /// `UsageReport.maxAdditional` + 1 limits of two windows each) is a few KiB.
    package static let maxUsageAnswerBytes = 64 * 1024

    /// A broker's answer: the status code and the body, in guarded memory (a token answer
    /// carries the access token).
    package struct Reply: ~Copyable {
        package let status: Int
        package let body: SecretBytes
    }

    /// The request already sent for this process's `get`, if any (used by the one `get` whose
    /// socket path and target are the ones it names).
    package let handoff: BrokerHandoff?

    package init(address: BrokerAddress, timeout: Double = BrokerClient.defaultTimeout, handoff: BrokerHandoff? = nil) {
        self.address = address
        self.timeout = timeout
        self.handoff = handoff
    }

    /// `GET /v1/token?profile=NAME[&min_ttl=N]`: the object `get --json` prints.
    package func token(profile: Profile, minTTL: Int64?) throws -> JSONValue {
        var target = BrokerProtocol.tokenPath + "?profile=" + profile.name
        if let minTTL { target += "&min_ttl=\(minTTL)" }
        return try json(target)
    }

    /// `GET /v1/usage?profile=NAME`: the object `usage --json` prints (no token in it, so no
    /// member is parsed into guarded memory and it can be printed again as text).
    package func usage(profile: Profile) throws -> JSONValue {
        try json(BrokerProtocol.usagePath + "?profile=" + profile.name, maxBytes: Self.maxUsageAnswerBytes)
    }

    /// The answer's JSON object when the status is 200; otherwise the broker's error as a
    /// `CredentialError` (its exit code from the status, in the one table).
    /// A 200 answer's body longer than `maxBytes` is refused (exit 1), never half read.
    package func json(_ target: String, maxBytes: Int = BrokerClient.maxAnswerBytes) throws -> JSONValue {
        let answer = try get(target)
        if answer.status == 200, answer.body.count > maxBytes {
            throw CredentialError.failure("the broker at \(address.description) sent an answer of more than \(maxBytes / 1024) KiB, more than the host ever answers")
        }
        // The token members go into guarded memory: every parse treats them as secret.
        let value = try? JSON.parse(answer.body, maxBytes: Self.maxAnswerBytes)
        guard answer.status == 200 else {
            let message = value?["message"]?.stringValue ?? value?["error"]?.stringValue ?? ""
            throw CredentialError.brokerAnswered(status: answer.status, message: Sanitize.line(message, limit: 1000), broker: address.description)
        }
        guard let value, value.isObject else {
            throw CredentialError.failure("the broker at \(address.description) sent an answer that is not a JSON object")
        }
        return value
    }

    /// One request, one answer (`Connection: close`), within the deadline.
    package func get(_ target: String) throws -> Reply {
        let request = Array("GET \(target) HTTP/1.1\r\nHost: localhost\r\nUser-Agent: chatgpt-credential\r\nAccept: application/json\r\nConnection: close\r\n\r\n".utf8)
        let stop: Int64, fd: Int32, sent: Int
        if let h = handoff, h.path == address.path, h.target == target, (0...request.count).contains(h.requestBytesSent) {
            (stop, fd, sent) = (h.deadlineMillis, h.socket, h.requestBytesSent)
        } else {
            stop = Clock.monotonicMillis() + Int64(timeout * 1000)
            try checkDirectory()
            (fd, sent) = (try connect(until: stop), 0)
        }
        defer { close(fd) }
        try send(Array(request[sent...]), fd, until: stop)
        var raw = SecretBytes(capacity: 8192)
        try receive(fd, into: &raw, until: stop)
        return try Self.parseAnswer(raw, from: address.description)
    }

    // MARK: the socket

    /// A socket in a directory another user can write (a squatted path in `/tmp`) may be anyone's:
    /// refused before connecting, exit 5 (man page BROKER, Client mode). The directory judged is
    /// the real one the socket is in (symbolic links resolved): it must be owned by this user or
    /// root and not writable by group or others; a sticky world-writable `/tmp` is refused too. A
    /// directory that is not there is left to `connect` ("no broker socket", exit 5).
    func checkDirectory() throws {
        let path = address.path
        let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))!
        let parent = slash == path.utf8.startIndex ? "/" : String(path[..<slash])
        guard let resolved = realpath(parent, nil) else { return }
        let real = String(cString: resolved)
        free(resolved)
        var st = stat()
        guard lstat(real, &st) == 0 else { return }
        let mode = st.st_mode & 0o7777
        let why: String
        if st.st_mode & S_IFMT != S_IFDIR {
            why = "is not a directory"
        } else if st.st_uid != ProcessUser.effectiveID && st.st_uid != 0 {
            why = "belongs to uid \(st.st_uid), not to this user (uid \(ProcessUser.effectiveID)) or root"
        } else if mode & 0o022 != 0 {
            why = "is writable by \(mode & 0o002 != 0 ? "others" : "its group") (mode \(String(mode, radix: 8)))"
        } else {
            return
        }
        let shown = real == parent ? Sanitize.line(real) : "\(Sanitize.line(parent)) (\(Sanitize.line(real)))"
        throw CredentialError.storeUnavailable("refusing the broker socket \(Sanitize.line(path)): its directory \(shown) \(why), so another user could have put the socket there; keep the broker's socket in a directory of your own that others cannot write")
    }

    private func notAnswering(_ why: String) -> CredentialError {
        .temporary("broker not answering at \(address.description) (\(why))")
    }

    private func connect(until stop: Int64) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw CredentialError.failure("cannot make a socket: \(FileSystem.errorText(errno))") }
        var sa = sockaddr_un()
        sa.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &sa.sun_path) { dst in
            for (i, b) in address.path.utf8.enumerated() where i < dst.count - 1 { dst[i] = b }
        }
        var pause: Int64 = 2
        while true {
            let rc = withUnsafePointer(to: &sa) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc == 0 { return fd }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN:
                // The listener's backlog is full (a UNIX socket's non-blocking connect says EAGAIN
                // and leaves the socket unconnected; poll would not wait for a slot): try again
                // with a short back-off, within the same deadline (man page BROKER, Client mode).
                let left = stop - Clock.monotonicMillis()
                guard left > 0 else {
                    close(fd)
                    throw notAnswering("its backlog stayed full; no answer within \(Deadline.describe(timeout))")
                }
                _ = poll(nil, 0, Int32(min(pause, left)))
                pause = min(pause * 2, 50)
            case EINPROGRESS:
                do { try wait(fd, Int16(POLLOUT), until: stop) } catch { close(fd); throw error }
                var err: Int32 = 0
                var len = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
                if err == 0 { return fd }
                close(fd)
                throw connectError(err)
            default:
                close(fd)
                throw connectError(code)
            }
        }
    }

    private func connectError(_ code: Int32) -> CredentialError {
        switch code {
        case ENOENT, ENOTDIR:
            return .storeUnavailable("no broker socket at \(address.path); start the broker on the broker's side, where the credential is: chatgpt-credential serve, or systemctl --user start chatgpt-credential.socket")
        case ECONNREFUSED:
            return notAnswering("nothing listens on the socket; is chatgpt-credential serve running on the broker's side?")
        case EACCES, EPERM:
            return .storeUnavailable("cannot reach the broker socket \(address.path): \(FileSystem.errorText(code))")
        case ENOTSOCK:
            return .storeUnavailable("\(address.path) is not a socket")
        default:
            return notAnswering(FileSystem.errorText(code))
        }
    }

    private func wait(_ fd: Int32, _ events: Int16, until stop: Int64) throws {
        while true {
            let left = stop - Clock.monotonicMillis()
            guard left > 0 else { throw notAnswering("no answer within \(Deadline.describe(timeout))") }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&p, 1, Int32(min(left, Int64(Int32.max))))
            if n < 0 {
                if errno == EINTR { continue }
                throw notAnswering(FileSystem.errorText(errno))
            }
            if n > 0 { return }
        }
    }

    private func send(_ bytes: [UInt8], _ fd: Int32, until stop: Int64) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { off += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { try wait(fd, Int16(POLLOUT), until: stop); continue }
            if n < 0 && errno == EINTR { continue }
            throw notAnswering("the connection closed while sending: \(FileSystem.errorText(errno))")
        }
    }

    /// Reads until the peer closes, or until the head and `Content-Length` bytes of body are in.
    private func receive(_ fd: Int32, into raw: inout SecretBytes, until stop: Int64) throws {
        while true {
            if let complete = Self.completeLength(raw), raw.count >= complete { raw.truncate(to: complete); return }
            guard raw.count <= Self.maxAnswerBytes else {
                throw CredentialError.failure("the broker at \(address.description) sent more than \(Self.maxAnswerBytes / 1024) KiB")
            }
            try wait(fd, Int16(POLLIN), until: stop)
            var n = 0, code: Int32 = 0
            raw.append(upTo: 16384) { space in
                n = recv(fd, space.baseAddress, space.count, 0)
                if n < 0 { code = errno }
                return max(n, 0)
            }
            if n == 0 { return } // the peer closed: the answer is what came
            if n < 0 {
                if code == EINTR || code == EAGAIN || code == EWOULDBLOCK { continue }
                throw notAnswering("reading the answer: \(FileSystem.errorText(code))")
            }
        }
    }

    // MARK: HTTP/1.1 framing

    /// The offset just past the blank line that ends the head, if it has arrived.
    static func headEnd(_ raw: borrowing SecretBytes) -> Int? {
        raw.withUnsafeBytes { b in
            guard b.count >= 4 else { return nil }
            for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i + 4 }
            return nil
        }
    }

    /// The head's lines (status line first), as text: they carry no secret.
    static func headLines(_ raw: borrowing SecretBytes, end: Int) -> [String] {
        raw.withUnsafeBytes { b in
            String(decoding: b[0..<(end - 4)], as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// What the head says of the body's length: `Content-Length` is one or more decimal digits
    /// (RFC 9110 §8.6); a sign, a space inside, or a number too large for `Int` is malformed, never
    /// a length.
    enum DeclaredLength: Equatable { case none, length(Int), malformed }

    static func contentLength(_ lines: [String]) -> DeclaredLength {
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == "content-length" {
                let value = String(line[line.index(after: colon)...]).trimmingSpaces()
                guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(value) else { return .malformed }
                return .length(n)
            }
        }
        return .none
    }

    /// The whole answer's length once its head is in and names a valid `Content-Length`.
    static func completeLength(_ raw: borrowing SecretBytes) -> Int? {
        guard let end = headEnd(raw), case .length(let length) = contentLength(headLines(raw, end: end)) else { return nil }
        return end + length
    }

    /// Status and body of a complete answer. Chunked bodies are not spoken (the broker sends a
    /// length, or closes the connection after the body).
    package static func parseAnswer(_ raw: borrowing SecretBytes, from broker: String) throws -> Reply {
        func malformed(_ why: String) -> CredentialError {
            .failure("the broker at \(broker) sent a malformed answer (\(why))")
        }
        guard !raw.isEmpty else { throw CredentialError.temporary("broker not answering at \(broker) (it closed the connection without an answer)") }
        guard let end = headEnd(raw) else { throw malformed("no end of headers") }
        let lines = headLines(raw, end: end)
        let status = lines[0].split(separator: " ", maxSplits: 2)
        // Three digits, 100-599 (RFC 9110 §15): "020" or "+42" is no status.
        guard status.count >= 2, status[0].hasPrefix("HTTP/1."), status[1].utf8.count == 3,
              status[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let code = Int(status[1]), (100...599).contains(code) else {
            throw malformed("bad status line")
        }
        if lines.dropFirst().contains(where: { $0.lowercased().hasPrefix("transfer-encoding:") }) { throw malformed("chunked body") }
        var length = raw.count - end
        switch contentLength(lines) {
        case .none: break
        case .malformed: throw malformed("bad Content-Length")
        case .length(let declared):
            guard declared <= length else { throw malformed("the body is shorter than its Content-Length") }
            length = declared
        }
        let body = raw.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[end..<(end + length)])) }
        return Reply(status: code, body: body)
    }
}
