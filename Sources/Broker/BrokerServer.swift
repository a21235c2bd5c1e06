import CredentialCore
import SystemRuntime
import Transport
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The broker's server loop (man page BROKER): accepts connections on a listening UNIX socket,
/// each served by a thread of its own (kept for later connections), checks the peer (`SO_PEERCRED`), reads bounded request heads under
/// a deadline, asks `handler` for each answer and reports one audit record per answer. It holds
/// no policy: what an answer says is the handler's (the CLI's, through the one owner).
package final class BrokerServer: @unchecked Sendable {
    package struct Settings: Sendable {
        /// Seconds without a connection after which `run` returns; 0: never.
        package var idleExit: Double = 0
        /// Users besides this process's own whose processes may ask.
        package var allowedUIDs: Set<UInt32> = []
        /// Seconds a client has to send a complete request head (also the keep-alive idle time).
        package var requestDeadline: Double = 5
        /// Connections served at once (one thread each); further ones wait in the listen backlog.
        package var maxConnections = 128
        /// Requests on one kept-alive connection before the broker closes it.
        package var maxRequestsPerConnection = 10_000
        package init() {}
    }

    package typealias Handler = @Sendable (BrokerRequest, BrokerPeer) -> BrokerAnswer

    let listenFD: Int32
    let settings: Settings
    let handler: Handler
    let audit: @Sendable (BrokerAuditRecord) -> Void
    let ownUID = geteuid()

    private var mutex = pthread_mutex_t()
    private var slotFree = pthread_cond_t()
    private var auditMutex = pthread_mutex_t()
    /// Connections accepted and not yet finished (queued or being served).
    private var active = 0
    /// Accepted connections no thread has taken yet.
    private var pending: [Int32] = []
    private var idleWorkers = 0
    private var stopping = false
    private var work = pthread_cond_t()
    private var lastActivity = Clock.monotonicMillis()
    private var stopPipe: [Int32] = [-1, -1]

    /// `audit` is called once per answered request, one call at a time.
    package init(listenFD: Int32, settings: Settings, handler: @escaping Handler, audit: @escaping @Sendable (BrokerAuditRecord) -> Void) {
        self.listenFD = listenFD
        self.settings = settings
        self.handler = handler
        self.audit = audit
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&slotFree, nil)
        pthread_cond_init(&work, nil)
        pthread_mutex_init(&auditMutex, nil)
        if pipe(&stopPipe) == 0 {
            for fd in stopPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC); _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        } else {
            stopPipe = [-1, -1]
        }
    }

    deinit {
        for fd in stopPipe where fd >= 0 { close(fd) }
    }

    /// Makes `run` return (tests; a signal handler may write to the pipe too).
    package func stop() {
        var b: UInt8 = 1
        if stopPipe[1] >= 0 { _ = write(stopPipe[1], &b, 1) }
    }

    /// Makes SIGTERM, SIGINT and SIGHUP end `run` as `stop()` does, so that `systemctl stop` or
    /// Ctrl-C removes the socket file and exits 0. They are unblocked too: a launcher may have
    /// started the broker with them blocked or ignored.
    package func stopOnTerminationSignals() {
        guard stopPipe[1] >= 0 else { return }
        brokerStopFD = stopPipe[1]
        var set = sigset_t()
        sigemptyset(&set)
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            signal(sig, brokerStopHandler)
            sigaddset(&set, sig)
        }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Why `run` returned.
    package enum Ending: Equatable, Sendable { case idle, stopped }

    /// Serves until `idleExit` seconds pass with no connection open or accepted, or `stop()`.
    /// Connections still open then are finished first.
    package func run() throws -> Ending {
        while true {
            lock()
            while active >= settings.maxConnections { pthread_cond_wait(&slotFree, &mutex) }
            var timeout: Int32 = -1
            if settings.idleExit > 0 {
                let left = Int64(settings.idleExit * 1000) - (Clock.monotonicMillis() - lastActivity)
                if active == 0 && left <= 0 { unlock(); waitForConnections(); return .idle }
                timeout = Int32(clamping: max(10, min(left, 1000)))
            }
            unlock()
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, stopPipe[0] >= 0 ? 2 : 1, timeout)
            if n < 0 {
                if errno == EINTR { continue }
                throw CredentialError.failure("broker: poll failed: \(String(cString: strerror(errno)))")
            }
            if fds[1].revents != 0 { waitForConnections(); return .stopped }
            if n == 0 || fds[0].revents == 0 { continue }
            // (Glibc does not export accept4 to Swift; this process runs no other program.)
            let conn = accept(listenFD, nil, nil)
            if conn < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(50_000) // out of descriptors: let running connections finish
                    continue
                default: throw CredentialError.failure("broker: accept failed: \(String(cString: strerror(errno)))")
                }
            }
            _ = fcntl(conn, F_SETFD, FD_CLOEXEC)
            lock()
            active += 1
            lastActivity = Clock.monotonicMillis()
            pending.append(conn)
            // A new thread only when no idle one is left for this connection (threads are kept
            // for the next connections: a clone(2) and a stack per connection cost more than
            // answering a warm request).
            let needWorker = pending.count > idleWorkers
            if !needWorker { pthread_cond_signal(&work) }
            unlock()
            if needWorker && !spawn({ [self] in worker() }) {
                // No thread to be had: serve it here rather than drop it.
                lock()
                let taken = pending.firstIndex(of: conn).map { pending.remove(at: $0) }
                unlock()
                if let taken {
                    serve(connection: taken)
                    close(taken)
                    lock(); active -= 1; lastActivity = Clock.monotonicMillis(); unlock()
                }
            }
        }
    }

    /// A connection thread: serves queued connections, waits for more while the server runs.
    private func worker() {
        lock()
        while true {
            while pending.isEmpty && !stopping {
                idleWorkers += 1
                pthread_cond_wait(&work, &mutex)
                idleWorkers -= 1
            }
            if pending.isEmpty { unlock(); return } // stopping
            let conn = pending.removeFirst()
            unlock()
            serve(connection: conn)
            close(conn)
            lock()
            active -= 1
            lastActivity = Clock.monotonicMillis()
            pthread_cond_signal(&slotFree)
        }
    }

    private func lock() { pthread_mutex_lock(&mutex) }
    private func unlock() { pthread_mutex_unlock(&mutex) }

    /// Waits until every accepted connection is finished, then lets the idle threads end.
    private func waitForConnections() {
        lock()
        while active > 0 { pthread_cond_wait(&slotFree, &mutex) }
        stopping = true
        pthread_cond_broadcast(&work)
        unlock()
    }

    // MARK: one connection

    func serve(connection fd: Int32) {
        guard let peer = BrokerPeer.of(fd) else { return }
        let allowed = peer.uid == ownUID || settings.allowedUIDs.contains(peer.uid)
        var buffer: [UInt8] = []
        for served in 0..<settings.maxRequestsPerConnection {
            // The last request this connection may carry is answered with Connection: close.
            let last = served == settings.maxRequestsPerConnection - 1
            let deadline = Clock.monotonicMillis() + Int64(settings.requestDeadline * 1000)
            switch readHead(fd, &buffer, deadline: deadline) {
            case .closed:
                return
            case .timedOut:
                // Nothing of a next request: an idle kept-alive connection just closes.
                if buffer.isEmpty { return }
                refuse(fd, peer, allowed ? .failure(status: 400, message: "the request head did not arrive within \(Int(settings.requestDeadline)) s")
                                         : notAllowed(peer), path: nil, deadline: writeDeadline())
                return
            case .tooLarge:
                refuse(fd, peer, allowed ? .failure(status: 400, message: "the request head is larger than \(BrokerProtocol.maxHeadBytes / 1024) KiB")
                                         : notAllowed(peer), path: nil, deadline: writeDeadline())
                return
            case .head(let end):
                let parsed = BrokerRequest.parse(buffer[0..<end])
                buffer.removeFirst(end)
                let writeDeadline = writeDeadline()
                guard allowed else {
                    let path: String?, profile: String?
                    switch parsed {
                    case .success(let r): path = r.path; profile = r.profile?.name
                    case .failure(let e): path = e.path; profile = nil
                    }
                    var answer = notAllowed(peer)
                    answer.profile = profile
                    refuse(fd, peer, answer, path: path, deadline: writeDeadline)
                    return
                }
                switch parsed {
                case .failure(let e):
                    refuse(fd, peer, .failure(status: e.status, message: e.message), path: e.path, deadline: writeDeadline)
                    return
                case .success(let request):
                    var answer = handler(request, peer)
                    if answer.profile == nil { answer.profile = request.profile?.name }
                    let keepAlive = request.keepAlive && !last
                    let sent = send(fd, answer, keepAlive: keepAlive, deadline: writeDeadline)
                    record(peer, path: request.path, answer)
                    if !sent || !keepAlive { return }
                }
            }
        }
    }

    /// 403: whatever the peer asked (or failed to ask), a user the broker does not serve.
    private func notAllowed(_ peer: BrokerPeer) -> BrokerAnswer {
        .failure(status: 403, message: "uid \(peer.uid) may not use this broker")
    }

    /// Until when an answer may take to be written.
    private func writeDeadline() -> Int64 { Clock.monotonicMillis() + Int64(max(settings.requestDeadline, 1) * 1000) }

    /// Answers a refused request, then closes the connection without resetting it: what the
    /// client still sends is read and dropped for a moment, so it sees the answer.
    private func refuse(_ fd: Int32, _ peer: BrokerPeer, _ answer: consuming BrokerAnswer, path: String?, deadline: Int64) {
        _ = send(fd, answer, keepAlive: false, deadline: deadline)
        record(peer, path: path, answer)
        shutdown(fd, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 4096)
        let until = min(deadline, Clock.monotonicMillis() + 1000)
        var drained = 0
        while drained < 1 << 20 {
            let left = until - Clock.monotonicMillis()
            guard left > 0 else { break }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left)) > 0 else { break }
            let n = recv(fd, &sink, sink.count, 0)
            if n <= 0 { break }
            drained += n
        }
    }

    private func record(_ peer: BrokerPeer, path: String?, _ answer: borrowing BrokerAnswer) {
        let r = BrokerAuditRecord(time: Clock.now(), peer: peer, path: path, profile: answer.profile,
                                  status: answer.status, outcome: answer.outcome)
        pthread_mutex_lock(&auditMutex)
        audit(r)
        pthread_mutex_unlock(&auditMutex)
    }

    enum HeadRead: Equatable { case head(Int), closed, timedOut, tooLarge }

    /// Reads until `buffer` holds a complete head (its end returned), the peer closes, the
    /// deadline passes, or more than `maxHeadBytes` arrive without a blank line.
    func readHead(_ fd: Int32, _ buffer: inout [UInt8], deadline: Int64) -> HeadRead {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = HTTPHead.end(buffer) {
                return end <= BrokerProtocol.maxHeadBytes ? .head(end) : .tooLarge
            }
            if buffer.count > BrokerProtocol.maxHeadBytes { return .tooLarge }
            let left = deadline - Clock.monotonicMillis()
            if left <= 0 { return .timedOut }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(clamping: left))
            if ready < 0 { if errno == EINTR { continue }; return .closed }
            if ready == 0 { return .timedOut }
            // Never more than one byte past the limit is kept.
            let want = min(chunk.count, BrokerProtocol.maxHeadBytes + 1 - buffer.count)
            let n = recv(fd, &chunk, want, 0)
            if n < 0 { if errno == EINTR || errno == EAGAIN { continue }; return .closed }
            if n == 0 { return .closed }
            buffer += chunk[0..<n]
        }
    }

    /// Writes the answer's head, then its body from its guarded buffer (no copy of it), before
    /// `deadline`; false when the peer went away or was too slow.
    func send(_ fd: Int32, _ answer: borrowing BrokerAnswer, keepAlive: Bool, deadline: Int64) -> Bool {
        let head = answer.head(keepAlive: keepAlive)
        return head.withUnsafeBytes { h in
            answer.body.withUnsafeBytes { b in
                // Both in one sendmsg(2), so the client wakes once; what did not fit, piece by piece.
                var iov = [iovec(iov_base: UnsafeMutableRawPointer(mutating: h.baseAddress), iov_len: h.count),
                           iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)]
                let n = iov.withUnsafeMutableBufferPointer { p -> Int in
                    var msg = msghdr()
                    msg.msg_iov = p.baseAddress
                    msg.msg_iovlen = 2
                    return sendmsg(fd, &msg, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if n < 0 && errno != EAGAIN && errno != EINTR { return false }
                let sent = max(n, 0)
                if sent < h.count, !send(fd, UnsafeRawBufferPointer(rebasing: h[sent...]), deadline: deadline) { return false }
                return send(fd, UnsafeRawBufferPointer(rebasing: b[max(0, sent - h.count)...]), deadline: deadline)
            }
        }
    }

    func send(_ fd: Int32, _ raw: UnsafeRawBufferPointer, deadline: Int64) -> Bool {
        var off = 0
        while off < raw.count {
            // Try first; wait (until the deadline) only when the socket's buffer is full.
            let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if n >= 0 { off += n; continue }
            guard errno == EINTR || errno == EAGAIN else { return false }
            let left = deadline - Clock.monotonicMillis()
            if left <= 0 { return false }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&p, 1, Int32(clamping: left)) == 0 { return false }
        }
        return true
    }
}

/// The write end of the stop pipe of the server that handles termination signals.
nonisolated(unsafe) private var brokerStopFD: Int32 = -1

private func brokerStopHandler(_ signal: Int32) {
    var b: UInt8 = 1
    _ = write(brokerStopFD, &b, 1) // async-signal-safe
}

/// Runs `body` on a new detached thread (a connection's; GCD would cap them at the core count
/// and a slow store would then hold up everyone). False when no thread could be made.
private func spawn(_ body: @escaping () -> Void) -> Bool {
    final class Box { let body: () -> Void; init(_ b: @escaping () -> Void) { body = b } }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var attr = pthread_attr_t()
    pthread_attr_init(&attr)
    pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attr, { p in
        Unmanaged<Box>.fromOpaque(p!).takeRetainedValue().body()
        return nil
    }, box)
    pthread_attr_destroy(&attr)
    if rc != 0 { Unmanaged<Box>.fromOpaque(box).release() }
    return rc == 0
}
