import CredentialCore
import SystemRuntime
import Transport
import Secrets
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// The broker's server loop (man page BROKER, ARCHITECTURE.md "A broker request"). One thread
/// polls the listening socket and every open connection (all non-blocking): it checks the peer
/// (`SO_PEERCRED`) when a connection is accepted, before anything is read, answers a refused
/// peer 403 at once, reads request heads incrementally under a per-connection deadline and holds
/// idle kept-alive connections. A complete request head that `quick` can answer without waiting
/// (an access-cache hit) is answered there, one per connection per turn of the loop; any other
/// goes to a bounded pool of worker threads, which ask `handler` (it may block on the store or a
/// refresh), write the answer under a deadline and hand a kept-alive connection back to the loop.
/// So neither a refused user, nor idle or slow connections of an allowed one, nor a slow store
/// holds the loop or delays another client's cached answer. It holds no policy: what an answer
/// says is the handler's (the CLI's, through the one owner).
/// `@unchecked Sendable`: what the worker threads and the loop share is under `mutex` (a
/// `ConditionLock`), the loop's own state is touched only by the loop thread, and `audit` and
/// `notice` are called under `auditMutex`.
package final class BrokerServer: @unchecked Sendable {
    package struct Settings: Sendable {
        /// Seconds without a connection after which `run` returns; 0: never.
        package var idleExit: Double = 0
        /// Users besides this process's own whose processes may ask.
        package var allowedUIDs: Set<UInt32> = []
        /// Seconds a client has to send a complete request head (also the keep-alive idle time),
        /// and the broker has to write an answer.
        package var requestDeadline: Double = 5
        /// Open connections of one uid. A new one beyond it closes that uid's longest-idle
        /// connection (one waiting for a request, not one being answered), else the one that has
        /// been sending an incomplete head the longest; when every one is being answered the new
        /// one is answered 502 (temporary: retry) and closed.
        package var maxConnectionsPerUID = 256
        /// Worker threads answering requests at once (made as needed, kept for later requests).
        package var workers = 16
        /// Of those, how many may be answering `/v1/usage` at once (each may wait on the backend
        /// for long): the rest are kept for token requests, which go ahead of queued usage ones.
        package var usageWorkers = 8
        /// Seconds a complete request may wait for a worker; then the loop answers it 502 and
        /// closes it (client mode gives up at 10 s).
        package var queueDeadline: Double = 8
        /// Requests on one kept-alive connection before the broker closes it.
        package var maxRequestsPerConnection = 10_000
        /// Refused connections kept for a moment after their answer (to read and drop what the
        /// client still sends, so it sees the answer rather than a reset), and for how long.
        package var maxDraining = 64
        package var drainSeconds: Double = 0.5
        /// Audit lines for refused connections per second; the rest are counted in one line.
        package var refusedAuditPerSecond = 10
        package init() {}
    }

    package typealias Handler = @Sendable (BrokerRequest, BrokerPeer) -> BrokerAnswer
    /// The answer `Handler` would give when it can be made without waiting on anything (no lock,
    /// no store read, no network: memory and a few system calls); nil otherwise.
    package typealias QuickHandler = @Sendable (BrokerRequest, BrokerPeer) -> BrokerAnswer?

    let listenFD: Int32
    let settings: Settings
    let handler: Handler
    let quick: QuickHandler?
    let audit: @Sendable (BrokerAuditRecord) -> Void
    let notice: @Sendable (String) -> Void
    let ownUID = ProcessUser.effectiveID

    /// One open connection of an allowed peer.
    final class Connection {
        let fd: Int32
        let peer: BrokerPeer
        /// What has arrived of the next request head(s).
        var buffer: [UInt8] = []
        var served = 0
        /// Until when the next head must be complete (monotonic ms).
        var deadline: Int64 = 0
        /// When it was last accepted or answered, as a count of such events: who is longest idle.
        var idleSince: UInt64 = 0
        /// When the incomplete head in `buffer` began, as a count (`headsBegun`, the loop's):
        /// who has been dripping a head the longest.
        var headSince: UInt64 = 0
        /// Given to a worker; not polled by the loop.
        var busy = false
        /// Counted in `perUID` (until its last answer is written or it is closed).
        var counted = true
        /// A complete head waits until the client has read enough of the earlier answers for the
        /// next one to be written at once (so a client that does not read holds no worker).
        var waitingToWrite = false
        /// What becomes of it once its answer was written (`deliver` decides).
        var after: After = .keep
        enum After { case keep, close, drain }
        /// An answer the loop began and the socket did not take at once: a worker writes the rest.
        var unfinished: Unfinished?
        init(fd: Int32, peer: BrokerPeer) { self.fd = fd; self.peer = peer }
    }

    struct Unfinished: ~Copyable {
        var answer: BrokerAnswer
        var head: [UInt8]
        /// Bytes of `head` and then the body already written.
        var sent: Int
        var keepAlive: Bool
        var path: String
    }

    /// Guards the state below marked "under `mutex`" (and jobs, returned, the counts, stopping);
    /// its condition wakes idle workers when a job is queued or the server stops.
    private let mutex = ConditionLock()
    /// One `audit` or `notice` call at a time. A pthread mutex (`ConditionLock`), not a
    /// `Synchronization.Mutex`: every answer takes it to write its audit line, and with more
    /// workers than cores the latter's spinning before it sleeps took ~9 % of the broker's CPU
    /// under 50 clients (bench/results.md, issue 31); the pthread mutex sleeps at once.
    private let auditMutex = ConditionLock()
    /// A complete head (or an unfinished answer) waiting for a worker, until `deadline`
    /// (monotonic ms; then the loop answers it 502).
    struct Job { let c: Connection; let usage: Bool; let deadline: Int64 }
    /// Complete heads waiting for a worker (the loop appends, workers take, the loop expires).
    private var jobs: [Job] = []
    /// Workers answering a `/v1/usage` request (at most `usageWorkers`).
    private var usageBusy = 0
    /// Connections a worker has finished with (workers append, the loop takes).
    private var returned: [Connection] = []
    private var workerCount = 0
    /// Counts acceptances and answers (under `mutex`): the order of `Connection.idleSince`.
    private var events: UInt64 = 0
    private var idleWorkers = 0
    private var stopping = false
    private var stopPipe: [Int32] = [-1, -1]
    private var wakePipe: [Int32] = [-1, -1]

    // The loop's own state (only the loop thread touches it).
    private var connections: [Int32: Connection] = [:]
    /// Open connections per uid (under `mutex`: a worker writing a connection's last answer
    /// stops counting it before the client can see that answer and connect again).
    private var perUID: [UInt32: Int] = [:]
    /// Refused or finished connections read and dropped until their deadline (fd → deadline).
    private var draining: [Int32: Int64] = [:]
    private var lastActivity = Clock.monotonicMillis()
    private var auditSecond: Int64 = 0
    private var auditedThisSecond = 0
    private var unlogged = 0
    private var unloggedUIDs: Set<UInt32> = []
    private var refusals: [UInt32: [UInt8]] = [:]
    /// Connections answered on the loop whose buffer already holds the next head: taken up on
    /// the next turn, so one pipelining client cannot keep the loop to itself.
    private var pipelined: [Connection] = []
    /// Heads begun, counted by the loop: the order of `Connection.headSince`.
    private var headsBegun: UInt64 = 0
    /// What one read of a connection lands in before it joins that connection's buffer (made
    /// once: not a new zeroed page for every read of every request).
    private var readChunk = [UInt8](repeating: 0, count: 4096)

    /// `audit` is called once per answered request (and refused connection, within the rate),
    /// one call at a time; `notice` for each notice of an answer, right after its audit record,
    /// and for the summary of refused connections not audited.
    package init(listenFD: Int32, settings: Settings, handler: @escaping Handler,
                 quick: QuickHandler? = nil,
                 audit: @escaping @Sendable (BrokerAuditRecord) -> Void,
                 notice: @escaping @Sendable (String) -> Void = { _ in }) {
        self.listenFD = listenFD
        self.settings = settings
        self.handler = handler
        self.quick = quick
        self.audit = audit
        self.notice = notice
        stopPipe = Self.makePipe()
        wakePipe = Self.makePipe()
    }

    private static func makePipe() -> [Int32] {
        var p: [Int32] = [-1, -1]
        guard pipe(&p) == 0 else { return [-1, -1] }
        for fd in p { _ = fcntl(fd, F_SETFD, FD_CLOEXEC); _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        return p
    }

    deinit {
        for fd in stopPipe + wakePipe where fd >= 0 { close(fd) }
    }

    /// Complete requests waiting for a worker (tests wait on it).
    package var queuedRequests: Int { lock(); defer { unlock() }; return jobs.count }

    /// (Under `mutex`.) The job a free worker takes next: the first that is not a usage request
    /// (token requests go ahead of queued usage ones), else the first usage request while fewer
    /// than `usageWorkers` are being answered (man page BROKER).
    private func nextJob() -> Int? {
        if let i = jobs.firstIndex(where: { !$0.usage }) { return i }
        guard usageBusy < settings.usageWorkers else { return nil }
        return jobs.firstIndex(where: { $0.usage })
    }

    /// (Under `mutex`.) How many queued jobs free workers could take now.
    private var runnable: Int {
        let usage = jobs.count { $0.usage }
        return jobs.count - usage + min(usage, max(0, settings.usageWorkers - usageBusy))
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
    /// Answers being made then are finished and written first; other connections are closed.
    package func run() throws -> Ending {
        guard stopPipe[0] >= 0, wakePipe[0] >= 0 else {
            throw CredentialError.failure("broker: cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL) | O_NONBLOCK)
        // Every cached answer makes and drops one guarded value on this thread (its cache
        // entry's read buffer): without the two `mprotect`s per answer (SECURITY.md).
        SecretBytes.keepReleasedRegionsOpen(onThisThread: true)
        defer { SecretBytes.keepReleasedRegionsOpen(onThisThread: false) }
        var acceptPausedUntil: Int64 = 0
        while true {
            takeReturned()
            let next = pipelined
            pipelined = []
            for c in next where connections[c.fd] === c && !c.busy { dispatchIfComplete(c) }
            let now = Clock.monotonicMillis()
            let nextExpiry = expireQueued(now: now)
            if settings.idleExit > 0, connections.isEmpty,
               now - lastActivity >= Int64(settings.idleExit * 1000) {
                finish()
                return .idle
            }
            flushRefusedSummary(force: false)

            var fds = [pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakePipe[0], events: Int16(POLLIN), revents: 0),
                       pollfd(fd: now >= acceptPausedUntil ? listenFD : -1, events: Int16(POLLIN), revents: 0)]
            var timeout = Int64.max
            if settings.idleExit > 0 && connections.isEmpty {
                timeout = Int64(settings.idleExit * 1000) - (now - lastActivity)
            }
            if acceptPausedUntil > now { timeout = min(timeout, acceptPausedUntil - now) }
            if unlogged > 0 { timeout = min(timeout, 1000) }
            if !pipelined.isEmpty { timeout = 0 }
            // Every wait for a worker has a deadline: the loop wakes for the earliest.
            if nextExpiry != .max { timeout = min(timeout, nextExpiry - now) }
            for c in connections.values where !c.busy {
                fds.append(pollfd(fd: c.fd, events: Int16(c.waitingToWrite ? POLLOUT : POLLIN), revents: 0))
                timeout = min(timeout, c.deadline - now)
            }
            for (fd, until) in draining {
                fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
                timeout = min(timeout, until - now)
            }
            let n = poll(&fds, nfds_t(fds.count), timeout == .max ? -1 : Int32(clamping: max(0, timeout)))
            if n < 0 {
                if errno == EINTR { continue }
                throw CredentialError.failure("broker: poll failed: \(String(cString: strerror(errno)))")
            }
            if fds[0].revents != 0 { finish(); return .stopped }
            if fds[1].revents != 0 { drainPipe(wakePipe[0]) }
            let after = Clock.monotonicMillis()
            for p in fds.dropFirst(3) {
                if let until = draining[p.fd] {
                    if p.revents != 0 ? !discard(p.fd) : after >= until {
                        draining[p.fd] = nil
                        close(p.fd)
                    }
                } else if let c = connections[p.fd], !c.busy {
                    if c.waitingToWrite {
                        if p.revents != 0 { c.waitingToWrite = false; dispatchIfComplete(c) } else if after >= c.deadline { drop(c) }
                    } else if p.revents != 0 { readSome(c) } else if after >= c.deadline { timedOut(c) }
                }
            }
            // New connections last: those that just closed no longer count against their uid.
            if fds[2].revents != 0 {
                takeReturned()
                if !acceptAll() { acceptPausedUntil = Clock.monotonicMillis() + 50 }
            }
        }
    }

    // MARK: the loop

    /// Accepts every waiting connection; false when out of descriptors (accepting pauses).
    private func acceptAll() -> Bool {
        while true {
            let fd = cs_accept_nonblocking(listenFD)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: return false
                default: return true // EAGAIN: none left
                }
            }
            lastActivity = Clock.monotonicMillis()
            admit(fd)
        }
    }

    /// The peer check, before anything is read: a refused peer is answered 403 and closed here.
    private func admit(_ fd: Int32) {
        guard let cred = BrokerPeer.credentials(fd) else { close(fd); return }
        guard cred.uid == ownUID || settings.allowedUIDs.contains(cred.uid) else {
            // One non-blocking write of an answer made once per uid (it holds no secret, so no
            // guarded buffer is made per refused connection: refusing must stay cheap).
            let bytes = refusal(for: cred.uid)
            _ = bytes.withUnsafeBytes { send(fd, $0, deadline: 0) }
            auditRefused(cred)
            release(fd)
            return
        }
        let peer = BrokerPeer(pid: cred.pid, uid: cred.uid, gid: cred.gid, executable: BrokerPeer.executable(of: cred.pid))
        lock()
        let open = perUID[cred.uid, default: 0]
        unlock()
        if open >= settings.maxConnectionsPerUID {
            // At the cap: the uid's longest-idle connection makes room, else the one dripping an
            // incomplete head the longest (a slow client cannot lock its user out); when every
            // one is being answered, 502: retry (man page BROKER).
            let mine = connections.values.filter { $0.peer.uid == cred.uid && !$0.busy }
            let victim = mine.filter { $0.buffer.isEmpty }.min { $0.idleSince < $1.idleSince }
                ?? mine.filter { !$0.waitingToWrite && HTTPHead.end($0.buffer) == nil }.min { $0.headSince < $1.headSince }
            if let victim {
                drop(victim)
            } else {
                let answer = BrokerAnswer.failure(status: 502, message: "uid \(cred.uid) has \(settings.maxConnectionsPerUID) connections open, all being answered; retry")
                _ = send(fd, answer, keepAlive: false, deadline: 0)
                record(peer, path: nil, answer)
                release(fd)
                return
            }
        }
        let c = Connection(fd: fd, peer: peer)
        let now = Clock.monotonicMillis()
        c.idleSince = nextEvent()
        c.deadline = now + Int64(settings.requestDeadline * 1000)
        connections[fd] = c
        lock()
        perUID[cred.uid, default: 0] += 1
        unlock()
    }

    /// Reads what a connection sent; a complete head goes to a worker.
    private func readSome(_ c: Connection) {
        // Never more than one byte past the limit is kept.
        let want = min(readChunk.count, BrokerProtocol.maxHeadBytes + 1 - c.buffer.count)
        let n = want > 0 ? readChunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, want, 0) } : 0
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if n <= 0 { drop(c); return }
        if c.buffer.isEmpty { c.headSince = beginHead() }
        c.buffer += readChunk[0..<n]
        dispatchIfComplete(c)
    }

    /// Answers (`answeredHere`) or hands to a worker a complete head in `c`'s buffer; refuses an
    /// oversized one.
    private func dispatchIfComplete(_ c: Connection) {
        if let end = HTTPHead.end(c.buffer), end <= BrokerProtocol.maxHeadBytes {
            // (A connection not answered yet has nothing of ours unread: no need to ask.)
            var p = pollfd(fd: c.fd, events: Int16(POLLOUT), revents: 0)
            if c.served > 0 && poll(&p, 1, 0) == 0 {
                // Earlier answers still fill the socket: wait (until the deadline) for the client
                // to read them before a worker is given this request.
                c.waitingToWrite = true
                c.deadline = Clock.monotonicMillis() + Int64(settings.requestDeadline * 1000)
                return
            }
            if answeredHere(c, end) { return }
            queue(c)
            return
        }
        if c.buffer.count > BrokerProtocol.maxHeadBytes || HTTPHead.end(c.buffer) != nil {
            refuseFromLoop(c, "the request head is larger than \(BrokerProtocol.maxHeadBytes / 1024) KiB")
        }
    }

    /// Answers the head ending at `end` on the loop when `quick` can: a worker hand-off costs a
    /// client two thread wake-ups, more than such an answer does (bench/results.md). The socket
    /// has room (checked above), so the answer is written at once; what the kernel does not take
    /// at once a worker writes under the deadline.
    private func answeredHere(_ c: Connection, _ end: Int) -> Bool {
        guard let quick, case .success(let request) = BrokerRequest.parse(c.buffer[0..<end]),
              let answer = quick(request, c.peer) else { return false }
        c.buffer.removeFirst(end)
        c.served += 1
        if !c.buffer.isEmpty { c.headSince = beginHead() }
        guard deliver(answer, to: request, on: c, deadline: 0) else { queue(c); return true }
        guard c.after == .keep else { drop(c); return true }
        let now = Clock.monotonicMillis()
        c.idleSince = nextEvent()
        c.deadline = now + Int64(settings.requestDeadline * 1000)
        lastActivity = now
        if HTTPHead.end(c.buffer) != nil { pipelined.append(c) }
        return true
    }

    /// Writes `answer` to `request` (just taken from `c`'s buffer), audits it and sets `c.after`;
    /// the connection's last allowed request is answered with `Connection: close`. On the loop
    /// (`deadline` 0) what the socket does not take at once is left in `c.unfinished` for a
    /// worker, unaudited: false then.
    private func deliver(_ answer: consuming BrokerAnswer, to request: BrokerRequest, on c: Connection, deadline: Int64) -> Bool {
        if answer.profile == nil { answer.profile = request.profile?.name }
        let keepAlive = request.keepAlive && c.served < settings.maxRequestsPerConnection
        if !keepAlive { lock(); uncount(c); unlock() }
        let head = answer.head(keepAlive: keepAlive)
        let total = head.count + answer.bodyCount
        let sent = writeAnswer(c.fd, head, answer, from: 0, deadline: deadline)
        if deadline == 0, let sent, sent < total {
            c.unfinished = Unfinished(answer: answer, head: head, sent: sent, keepAlive: keepAlive, path: request.path)
            return false
        }
        record(c.peer, path: request.path, answer)
        c.after = sent == total && keepAlive ? .keep : .close
        return true
    }

    /// Gives `c` (a complete head, or an unfinished answer) to a worker.
    private func queue(_ c: Connection) {
        c.busy = true
        var usage = false
        if c.unfinished == nil, let end = HTTPHead.end(c.buffer),
           case .success(let request) = BrokerRequest.parse(c.buffer[0..<end]), case .usage = request.call {
            usage = true
        }
        let job = Job(c: c, usage: usage, deadline: Clock.monotonicMillis() + Int64(settings.queueDeadline * 1000))
        lock()
        jobs.append(job)
        let spawnOne = idleWorkers < runnable && workerCount < settings.workers
        if spawnOne { workerCount += 1 } else { mutex.signal() }
        unlock()
        if spawnOne && !spawn({ [self] in worker() }) {
            lock()
            workerCount -= 1
            // No thread to be had and none running: answer it here rather than drop it.
            let inline = workerCount == 0 ? jobs.firstIndex(where: { $0.c === c }).map { jobs.remove(at: $0).c } : nil
            unlock()
            if let inline {
                answer(inline)
                inline.idleSince = nextEvent()
                lock(); returned.append(inline); unlock()
                var b: UInt8 = 1
                _ = write(wakePipe[1], &b, 1)
            }
        }
    }

    /// Answers 502 every queued request that has waited for a worker past its deadline (man page
    /// BROKER); the earliest deadline of those left (`.max`: none).
    private func expireQueued(now: Int64) -> Int64 {
        var expired: [Connection] = []
        lock()
        if jobs.contains(where: { $0.deadline <= now }) {
            jobs.removeAll { job in
                guard job.deadline <= now else { return false }
                expired.append(job.c)
                return true
            }
        }
        let next = jobs.lazy.map(\.deadline).min() ?? .max
        unlock()
        for c in expired { answerBusy(c) }
        return next
    }

    /// A request no worker took in time: 502 `temporary` from the loop, audited, closed. An
    /// answer the loop began cannot be finished: the connection is closed.
    private func answerBusy(_ c: Connection) {
        c.busy = false
        if let rest = c.unfinished.take() {
            record(c.peer, path: rest.path, rest.answer)
            drop(c)
            return
        }
        var path: String?, profile: String?
        if let end = HTTPHead.end(c.buffer) {
            switch BrokerRequest.parse(c.buffer[0..<end]) {
            case .success(let request): path = request.path; profile = request.profile?.name
            case .failure(let e): path = e.path
            }
        }
        let answer = BrokerAnswer.failure(status: 502, message: "the broker is busy: no worker was free within \(Int(settings.queueDeadline)) s; retry", profile: profile)
        _ = send(c.fd, answer, keepAlive: false, deadline: 0)
        record(c.peer, path: path, answer)
        forget(c)
        release(c.fd)
    }

    /// The head did not arrive in time: an idle kept-alive connection just closes.
    private func timedOut(_ c: Connection) {
        if c.buffer.isEmpty { drop(c); return }
        refuseFromLoop(c, "the request head did not arrive within \(Int(settings.requestDeadline)) s")
    }

    /// 400 written without waiting (an error answer fits in the socket's buffer), audited, closed.
    private func refuseFromLoop(_ c: Connection, _ message: String) {
        let answer = BrokerAnswer.failure(status: 400, message: message)
        _ = send(c.fd, answer, keepAlive: false, deadline: 0)
        record(c.peer, path: nil, answer)
        forget(c)
        release(c.fd)
    }

    /// Closes a connection of an allowed peer.
    private func drop(_ c: Connection) {
        forget(c)
        close(c.fd)
    }

    private func forget(_ c: Connection) {
        connections[c.fd] = nil
        lock()
        uncount(c)
        unlock()
        lastActivity = Clock.monotonicMillis()
    }

    /// A connection that was answered and is to end: its write side shut, what the client still
    /// sends read and dropped for a moment (so it sees the answer, not a reset) when a draining
    /// slot is free; else closed at once.
    private func release(_ fd: Int32) {
        shutdown(fd, Int32(SHUT_WR))
        if draining.count < settings.maxDraining && discard(fd) {
            draining[fd] = Clock.monotonicMillis() + Int64(settings.drainSeconds * 1000)
        } else {
            close(fd)
        }
    }

    /// Reads and drops what is there; false once the peer has closed (or sent too much).
    private func discard(_ fd: Int32) -> Bool {
        var sink = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            let n = recv(fd, &sink, sink.count, Int32(MSG_DONTWAIT))
            if n < 0 { return errno == EAGAIN || errno == EINTR }
            if n == 0 { return false }
        }
        return false
    }

    /// Takes back the connections workers finished with.
    private func takeReturned() {
        lock()
        let back = returned
        returned = []
        unlock()
        for c in back {
            c.busy = false
            switch c.after {
            case .close: drop(c)
            case .drain: forget(c); release(c.fd)
            case .keep:
                // What is left in the buffer is the start of the next head.
                if !c.buffer.isEmpty { c.headSince = beginHead() }
                let now = Clock.monotonicMillis()
                c.deadline = now + Int64(settings.requestDeadline * 1000)
                lastActivity = now
                // A pipelined request may already be here.
                dispatchIfComplete(c)
            }
        }
    }

    /// Stopping (a signal, `stop()`, idle exit): answers in the workers' hands are finished and
    /// written; every other connection is closed; the workers end.
    private func finish() {
        for c in connections.values where !c.busy { drop(c) }
        lock()
        while connections.values.contains(where: { $0.busy }) {
            unlock()
            _ = expireQueued(now: Clock.monotonicMillis())
            var p = pollfd(fd: wakePipe[0], events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 1000)
            drainPipe(wakePipe[0])
            lock()
            let back = returned
            returned = []
            unlock()
            for c in back { c.busy = false; drop(c) }
            lock()
        }
        stopping = true
        mutex.broadcast()
        unlock()
        for (fd, _) in draining { close(fd) }
        draining = [:]
        flushRefusedSummary(force: true)
    }

    private func drainPipe(_ fd: Int32) {
        var b = [UInt8](repeating: 0, count: 256)
        while read(fd, &b, b.count) > 0 {}
    }

    // MARK: refused connections, audited at a bounded rate

    /// The whole 403 response for a refused uid (a few uids kept).
    private func refusal(for uid: UInt32) -> [UInt8] {
        if let made = refusals[uid] { return made }
        let answer = BrokerAnswer.failure(status: 403, message: "uid \(uid) may not use this broker")
        let bytes = answer.head(keepAlive: false) + answer.body.withUnsafeBytes { Array($0) }
        if refusals.count >= 64 { refusals.removeAll() }
        refusals[uid] = bytes
        return bytes
    }

    private func auditRefused(_ cred: BrokerPeer.Credentials) {
        let second = Clock.now()
        if second != auditSecond {
            flushRefusedSummary(force: true)
            auditSecond = second
            auditedThisSecond = 0
        }
        if auditedThisSecond < settings.refusedAuditPerSecond {
            auditedThisSecond += 1
            let peer = BrokerPeer(pid: cred.pid, uid: cred.uid, gid: cred.gid, executable: BrokerPeer.executable(of: cred.pid))
            let answer = BrokerAnswer.failure(status: 403, message: "uid \(cred.uid) may not use this broker")
            // Stamped with the second it was counted in.
            record(peer, path: nil, answer, time: second)
        } else {
            unlogged += 1
            if unloggedUIDs.count < 8 { unloggedUIDs.insert(cred.uid) }
        }
    }

    /// The one line for the refused connections of the past second not audited one by one.
    private func flushRefusedSummary(force: Bool) {
        guard unlogged > 0, force || Clock.now() != auditSecond else { return }
        let uids = unloggedUIDs.sorted().map(String.init).joined(separator: ",")
        let line = "chatgpt-credential: broker: \(unlogged) more refused connections not logged (uid \(uids))"
        auditMutex.lock(); notice(line); auditMutex.unlock()
        unlogged = 0
        unloggedUIDs = []
    }

    // MARK: workers

    /// A worker: answers queued requests, waits for more while the server runs.
    private func worker() {
        lock()
        while true {
            var next = nextJob()
            while next == nil && !stopping {
                idleWorkers += 1
                mutex.wait()
                idleWorkers -= 1
                next = nextJob()
            }
            guard let i = next else { workerCount -= 1; unlock(); return } // stopping
            let job = jobs.remove(at: i)
            let c = job.c
            if job.usage { usageBusy += 1 }
            unlock()
            answer(c)
            lock()
            if job.usage { usageBusy -= 1 }
            events += 1
            c.idleSince = events
            returned.append(c)
            unlock()
            var b: UInt8 = 1
            _ = write(wakePipe[1], &b, 1)
            lock()
        }
    }

    /// Answers the head at the start of `c.buffer`; sets what becomes of the connection.
    private func answer(_ c: Connection) {
        let deadline = Clock.monotonicMillis() + Int64(max(settings.requestDeadline, 1) * 1000)
        if let rest = c.unfinished.take() {
            let total = rest.head.count + rest.answer.bodyCount
            let sent = writeAnswer(c.fd, rest.head, rest.answer, from: rest.sent, deadline: deadline)
            record(c.peer, path: rest.path, rest.answer)
            c.after = sent == total && rest.keepAlive ? .keep : .close
            return
        }
        guard let end = HTTPHead.end(c.buffer) else { c.after = .close; return }
        let parsed = BrokerRequest.parse(c.buffer[0..<end])
        c.buffer.removeFirst(end)
        c.served += 1
        switch parsed {
        case .failure(let e):
            let answer = BrokerAnswer.failure(status: e.status, message: e.message)
            lock(); uncount(c); unlock()
            _ = send(c.fd, answer, keepAlive: false, deadline: deadline)
            record(c.peer, path: e.path, answer)
            c.after = .drain
        case .success(let request):
            _ = deliver(handler(request, c.peer), to: request, on: c, deadline: deadline)
        }
    }

    /// (Under `mutex`.)
    private func uncount(_ c: Connection) {
        guard c.counted else { return }
        c.counted = false
        perUID[c.peer.uid, default: 1] -= 1
        if perUID[c.peer.uid] == 0 { perUID[c.peer.uid] = nil }
    }

    /// (The loop's.) The next `headSince`.
    private func beginHead() -> UInt64 {
        headsBegun += 1
        return headsBegun
    }

    private func nextEvent() -> UInt64 {
        lock(); defer { unlock() }
        events += 1
        return events
    }

    private func lock() { mutex.lock() }
    private func unlock() { mutex.unlock() }

    private func record(_ peer: BrokerPeer, path: String?, _ answer: borrowing BrokerAnswer, time: Int64 = Clock.now()) {
        let r = BrokerAuditRecord(time: time, peer: peer, path: path, profile: answer.profile,
                                  status: answer.status, outcome: answer.outcome)
        auditMutex.lock()
        audit(r)
        // Then the answer's notices, on their own lines (man page BROKER, "Audit").
        for line in answer.notices { notice(line) }
        auditMutex.unlock()
    }

    // MARK: writing

    /// Writes the answer's head, then its body from its guarded buffer (no copy of it), before
    /// `deadline` (0: only what fits now); false when the peer went away or was too slow.
    func send(_ fd: Int32, _ answer: borrowing BrokerAnswer, keepAlive: Bool, deadline: Int64) -> Bool {
        let head = answer.head(keepAlive: keepAlive)
        return writeAnswer(fd, head, answer, from: 0, deadline: deadline) == head.count + answer.bodyCount
    }

    /// Writes `head` and then the body, from byte `from` of the two, before `deadline` (0: only
    /// what the socket takes now). How many bytes of the two are written in all; nil when the
    /// peer went away.
    func writeAnswer(_ fd: Int32, _ head: [UInt8], _ answer: borrowing BrokerAnswer, from: Int, deadline: Int64) -> Int? {
        head.withUnsafeBytes { h in
            answer.withBodyPieces { Self.writePieces(fd, [h] + $0, from: from, deadline: deadline) }
        }
    }

    /// Writes `pieces` as one stream, from its byte `from`, before `deadline` (0: only what the
    /// socket takes now): what is left of all of them in one sendmsg(2), so the client wakes
    /// once, then what did not fit piece by piece. How many bytes of the stream are written in
    /// all; nil when the peer went away.
    static func writePieces(_ fd: Int32, _ pieces: [UnsafeRawBufferPointer], from: Int, deadline: Int64) -> Int? {
        var iov: [iovec] = []
        var skip = from
        for piece in pieces where !piece.isEmpty {
            if skip >= piece.count { skip -= piece.count; continue }
            iov.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: piece.baseAddress! + skip), iov_len: piece.count - skip))
            skip = 0
        }
        var done = from
        if !iov.isEmpty {
            let n = iov.withUnsafeMutableBufferPointer { p -> Int in
                var msg = msghdr()
                msg.msg_iov = p.baseAddress
                msg.msg_iovlen = p.count
                return sendmsg(fd, &msg, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n < 0 && errno != EAGAIN && errno != EINTR { return nil }
            done += max(n, 0)
        }
        var start = 0
        for piece in pieces {
            let end = start + piece.count
            if done < end {
                guard let more = sendSome(fd, UnsafeRawBufferPointer(rebasing: piece[(done - start)...]), deadline: deadline) else { return nil }
                done += more
                if done < end { return done }
            }
            start = end
        }
        return done
    }

    func send(_ fd: Int32, _ raw: UnsafeRawBufferPointer, deadline: Int64) -> Bool {
        Self.sendSome(fd, raw, deadline: deadline) == raw.count
    }

    /// How many bytes of `raw` were written before `deadline`; nil when the peer went away.
    static func sendSome(_ fd: Int32, _ raw: UnsafeRawBufferPointer, deadline: Int64) -> Int? {
        var off = 0
        while off < raw.count {
            // Try first; wait (until the deadline) only when the socket's buffer is full.
            let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if n >= 0 { off += n; continue }
            guard errno == EINTR || errno == EAGAIN else { return nil }
            let left = deadline - Clock.monotonicMillis()
            if left <= 0 { return off }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&p, 1, Int32(clamping: left)) == 0 { return off }
        }
        return off
    }
}

/// The write end of the stop pipe of the server that handles termination signals.
/// `nonisolated(unsafe)`: `stopOnTerminationSignals` sets it before it installs the handlers,
/// which only read it.
nonisolated(unsafe) private var brokerStopFD: Int32 = -1

private func brokerStopHandler(_ signal: Int32) {
    var b: UInt8 = 1
    _ = write(brokerStopFD, &b, 1) // async-signal-safe
}

/// Runs `body` on a new detached thread (a worker's; GCD would cap them at the core count and a
/// slow store would then hold up everyone). False when no thread could be made.
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
