import Broker
import CredentialCore
import SystemRuntime
import Credentials
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `serve` on the command line (man page VERBS, BROKER).
struct ServeCommand: Verb {
    static let spec = VerbSpec(
        name: "serve",
        summary: "answer token requests over a UNIX socket (the broker)",
        details: """
        Answers HTTP/1.1 GET requests on a UNIX stream socket, for containers, sandboxes
        and services: /v1/token?profile=NAME&min_ttl=SECONDS (what get --json prints),
        /v1/usage?profile=NAME (what usage --json prints) and /v1/health. Every answer
        goes through the same lock, access cache and refresh as get; the refresh token
        never leaves. Only processes of this user (or of a uid given with --allow-uid,
        which also gets an ACL on the socket) are answered; others get 403 when they
        connect. One audit line per answer on stderr. Under systemd socket activation
        it serves the socket it is given.
        """,
        options: [
            OptionSpec("--socket", value: "PATH", completion: .files, "the socket to create, an absolute path (default: broker.sock in the runtime directory, see FILES)"),
            OptionSpec("--idle-exit", value: "SECONDS", "exit 0 after this long without a connection (default 0 = never; 60 under socket activation)"),
            OptionSpec("--allow-uid", value: "UID", repeatable: true, "also answer processes of this user id, and let them connect (an ACL on the socket, else mode 0666; repeatable)"),
            OptionSpec("--print-socket", "print the socket's path (the default unless --socket) and exit, serving nothing"),
        ],
        examples: ["systemctl --user enable --now chatgpt-credential.socket   # on demand",
                   "curl --unix-socket \"$(chatgpt-credential serve --print-socket)\" \\\n     http://localhost/v1/token"])

    var options = ServeOptions()
    /// `--print-socket`: say where the broker listens (for recipes: bind it into a sandbox) and exit.
    var printSocket = false

    init(_ a: VerbArguments) throws {
        var o = ServeOptions()
        if let path = a.value("--socket") {
            guard !path.isEmpty, !path.utf8.contains(0) else { throw CredentialError.usage("--socket needs a path") }
            // A relative path would name another file from another directory (a unit's, a
            // client's): refused rather than resolved (man page BROKER).
            guard path.hasPrefix("/") else {
                throw CredentialError.usage("--socket needs an absolute path, not '\(Sanitize.line(path, limit: 80))'")
            }
            o.socket = path
        }
        if let raw = a.value("--idle-exit") {
            guard raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(raw), n <= 86400 * 366 else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(raw, limit: 40))' for --idle-exit: a number of seconds from 0 to 31622400")
            }
            o.idleExit = n
        }
        for raw in a.all("--allow-uid") {
            guard raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let uid = UInt32(raw), uid != UInt32.max else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(raw, limit: 40))' for --allow-uid: a numeric user id")
            }
            // The overflow uid is what every unmapped user of a user namespace appears as: allowing
            // it would allow them all (man page BROKER).
            guard !BrokerSocketAccess.overflowUIDs().contains(uid) else {
                throw CredentialError.usage("--allow-uid \(uid) is the overflow uid (any unmapped user of a namespace); it cannot be allowed")
            }
            if !o.allowedUIDs.contains(uid) { o.allowedUIDs.append(uid) }
        }
        options = o
        printSocket = a.has("--print-socket")
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome {
        if printSocket {
            try runner.console.out((options.socket ?? BrokerListener.defaultPath()) + "\n")
            return .exit(0)
        }
        return try runner.serve(g, options)
    }
    /// Serving the credential is the broker's side's job.
    static var clientMode: ClientModePolicy<Self> { .refused }
    /// The broker stops after the answer during which a signal was deferred (`Runner.serve`).
    static var handlesDeferredSignals: Bool { true }
}

/// `serve` (man page BROKER): the broker. The `Broker` module listens, checks the peer and
/// frames HTTP; every answer is made here, by running the verb a client would have run (`get
/// --json`, `usage --json`) through a `Runner` whose console collects the answer and the
/// notices, so the broker is one more caller of the one owner and never a second refresher.
extension Runner {
    func serve(_ g: GlobalOptions, _ o: ServeOptions) throws -> Outcome {
        // Every connection is a descriptor: room for 1,000s of them (the soft limit up to the hard).
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let listener: BrokerListener
        if let activated = try BrokerListener.activated(listenPID: services.settings.listenPID, listenFDs: services.settings.listenFDs) {
            if o.socket != nil {
                throw CredentialError.usage("--socket cannot be used under systemd socket activation (the socket is the one systemd passes)")
            }
            listener = activated
        } else {
            listener = try BrokerListener.bind(path: o.socket)
        }
        if !o.allowedUIDs.isEmpty {
            let names = o.allowedUIDs.map(String.init).joined(separator: ", ")
            if listener.activated {
                // The socket file is the .socket unit's: its SocketMode= decides who may connect.
                console.err("chatgpt-credential: broker: --allow-uid \(names): the socket comes from systemd; who may connect to it is the .socket unit's SocketMode= (see the man page)")
            } else if let path = listener.path {
                do {
                    switch try BrokerSocketAccess.grant(o.allowedUIDs, path: path) {
                    case .acl: console.err("chatgpt-credential: broker: uid \(names) may connect: an ACL on \(Sanitize.line(path)) (user:UID:rw-)")
                    case .worldWritable: console.err("chatgpt-credential: broker: uid \(names) may connect: \(Sanitize.line(path)) is mode 0666 (no ACLs on this filesystem); the peer check refuses everyone else")
                    }
                } catch {
                    listener.close()
                    throw error
                }
                // Said, never fixed: a parent directory's mode is the person's choice.
                let blocked = o.allowedUIDs.compactMap { uid in BrokerSocketAccess.unreachableDirectory(for: uid, path: path).map { (uid: uid, dir: $0) } }
                if let first = blocked.first {
                    let uids = blocked.map { String($0.uid) }.joined(separator: ", ")
                    console.err("chatgpt-credential: broker: uid \(uids) cannot reach the socket: \(Sanitize.line(first.dir)) is not searchable for them (not changed)")
                }
            }
        }
        var settings = BrokerServer.Settings()
        settings.idleExit = Double(o.idleExit ?? (listener.activated ? 60 : 0))
        settings.allowedUIDs = Set(o.allowedUIDs)
        let shared = WorkerShared(console: console, services: services)
        let loopOwners = LoopOwners()
        // A SIGTERM/SIGINT/SIGHUP that arrived while a client's refresh was being saved was
        // deferred (man page REFRESH) and so missed the stop handler: the server stops after
        // that answer, as it would have on the signal.
        let stopper = ServerStopper()
        let server = BrokerServer(listenFD: listener.fd, settings: settings,
                                  handler: { request, _ in
                                      let answer = Runner.answer(request, g, services: shared.services, console: shared.console)
                                      if SignalDeferral.deferredSignal != nil { stopper.server?.stop() }
                                      return answer
                                  },
                                  quick: { request, _ in Runner.cachedAnswer(request, g, services: shared.services, owners: loopOwners) },
                                  audit: { shared.console.err($0.line) },
                                  notice: { shared.console.err($0) })
        stopper.server = server
        server.stopOnTerminationSignals()
        let idle = settings.idleExit > 0 ? "; exits after \(Int(settings.idleExit)) s without a connection" : ""
        console.err("chatgpt-credential: broker listening on \(listener.name)\(idle)")
        let ending: BrokerServer.Ending
        do {
            ending = try server.run()
        } catch {
            listener.close()
            throw error
        }
        listener.close()
        switch ending {
        case .idle: console.err("chatgpt-credential: broker: no connection for \(Int(settings.idleExit)) s; exiting")
        case .stopped: console.err("chatgpt-credential: broker: stopped by a signal; exiting")
        }
        return .exit(0)
    }

    /// One answer, made by the verb the request stands for, with the server's global options
    /// (store, cache) and the request's profile. Never interactive: nobody is at the server's
    /// terminal for a client's request.
    static func answer(_ request: BrokerRequest, _ server: GlobalOptions, services: Services, console: Console) -> BrokerAnswer {
        let g = options(of: request, server)
        let capture = AnswerConsole()
        let runner = Runner(console: capture, services: services)
        runner.stopsOnDeferredSignal = false
        do {
            let body: SecretBytes
            switch request.call {
            case .health:
                return healthAnswer()
            case .token(_, let minTTL):
                // Exactly `get --json` (Runner.dispatch's `.get`), the answer kept where it was
                // built instead of being written to a console.
                let options = tokenOptions(minTTL)
                let fresh = try runner.freshCredential(g, options)
                body = try GetFormatter.format(fresh.credential, options.format, profile: g.profile)
            case .usage:
                _ = try UsageCommand(json: true, all: false).run(runner, g)
                body = capture.takeAnswer()
            }
            // Notices (a token shorter-lived than min_ttl, diagnostics with --verbose) go to the
            // server's stderr after the answer's audit line (man page BROKER, "Audit").
            var answer = BrokerAnswer(status: 200, body: body, outcome: "ok", profile: g.profile.name)
            answer.notices = capture.lines
            return answer
        } catch let e as CredentialError {
            var answer = BrokerAnswer.failure(status: BrokerProtocol.status(for: e), message: e.message, profile: g.profile.name)
            answer.notices = capture.lines
            return answer
        } catch {
            return .failure(status: 500, message: "\(error)", profile: g.profile.name)
        }
    }

    /// What `answer` would answer, when that needs nothing but memory and the kernel: the health
    /// check, or a token from a fresh access-cache entry (`CredentialOwner.fromCache`: no store
    /// read, no lock, no network). Nil for everything else, and under `--verbose`, whose lines
    /// `answer` writes. The broker's loop answers these itself (ARCHITECTURE.md, "A broker request").
    static func cachedAnswer(_ request: BrokerRequest, _ server: GlobalOptions, services: Services, owners: LoopOwners) -> BrokerAnswer? {
        guard !server.verbose else { return nil }
        switch request.call {
        case .health:
            return healthAnswer()
        case .token(_, let minTTL):
            let g = options(of: request, server)
            let options = tokenOptions(minTTL)
            guard let hit = owners.owner(g, services: services).fromCache(options.freshness) else {
                // A miss goes to a worker, with an owner of its own; what this one learnt (a
                // keyring that refused) is not kept.
                owners.forget(g.profile)
                return nil
            }
            // `get --json`, sent from the entry's own guarded buffer where the token needs no
            // escape: no second guarded buffer per answer.
            if let around = try? GetFormatter.jsonAroundToken(hit.credential, profile: g.profile) {
                return BrokerAnswer(status: 200, around: around, outcome: "ok", profile: g.profile.name)
            }
            guard let body = try? GetFormatter.format(hit.credential, options.format, profile: g.profile) else { return nil }
            return BrokerAnswer(status: 200, body: body, outcome: "ok", profile: g.profile.name)
        case .usage:
            return nil
        }
    }

    /// The server's global options with the request's profile, never interactive.
    private static func options(of request: BrokerRequest, _ server: GlobalOptions) -> GlobalOptions {
        var g = server
        g.profile = request.profile ?? server.profile
        g.wire = .plain
        g.nonInteractive = true
        return g
    }

    /// `get --json [--min-ttl N]`'s options for `/v1/token?min_ttl=N`.
    private static func tokenOptions(_ minTTL: Int64?) -> GetOptions {
        var options = GetOptions(format: .json)
        if let minTTL { options.require(ttl: minTTL) }
        return options
    }

    private static func healthAnswer() -> BrokerAnswer { .ok(#"{"ok":true}"#) }
}

/// The owners the broker's loop answers cached token requests with (`Runner.cachedAnswer`), one
/// per profile asked for, made when first asked and kept until a miss: an owner keeps nothing of
/// one answer (its cache lookup and the store's checks ask the kernel and the file system every
/// time), and making one per answer cost more than those checks (bench/results.md, issue 31).
/// `@unchecked Sendable`: only the loop thread calls `quick`, so only it touches `owners`.
final class LoopOwners: @unchecked Sendable {
    private var owners: [String: CredentialOwner] = [:]

    func owner(_ g: GlobalOptions, services: Services) -> CredentialOwner {
        if let kept = owners[g.profile.name] { return kept }
        // A client naming many profiles keeps a bounded set.
        if owners.count >= 64 { owners.removeAll() }
        let made = Runner(console: AnswerConsole(), services: services).owner(g)
        owners[g.profile.name] = made
        return made
    }

    func forget(_ profile: Profile) { owners[profile.name] = nil }
}

/// The server an answer may stop (set once, before the first connection is accepted).
final class ServerStopper: @unchecked Sendable {
    var server: BrokerServer?
}

/// What the broker's worker threads share (`BrokerServer`'s handler, audit and notice run on
/// them, several at once). `@unchecked Sendable`, because neither type says so: the console is the
/// process's own (`StandardConsole`: no mutable state; each stderr line is one write(2)), and the
/// services' closures (`Services.live`) make a new store selector, refresher or cache on every
/// call and capture only settings fixed before the server starts; a change to a credential is
/// serialized by `ProfileLock` (ARCHITECTURE.md, "A broker request").
private struct WorkerShared: @unchecked Sendable {
    let console: Console
    let services: Services
}

/// The console of one broker answer: stdout is the answer's body (in guarded memory), stderr
/// lines are kept for the server's stderr; there is no stdin.
final class AnswerConsole: Console {
    /// The answer as written; nil until the verb writes it. `get --json` writes its answer in
    /// one piece, which is kept as is: every guarded buffer costs a few system calls.
    private var answer: SecretBytes?
    private(set) var lines: [String] = []

    func out(_ text: String) throws { append { $0.append(utf8: text) } }
    func out(_ secret: borrowing SecretBytes) throws {
        if answer == nil { answer = secret.duplicate() } else { append { $0.append(secret) } }
    }
    func err(_ line: String) { lines.append(line) }
    func readInput(limit: Int) throws -> SecretBytes { throw CredentialError.badInput("the broker reads no input") }
    func readSome(_ max: Int) throws -> [UInt8] { [] }
    var stdinIsTerminal: Bool { false }
    var stderrIsTerminal: Bool { false }

    private func append(_ body: (inout SecretBytes) -> Void) {
        var a = answer.take() ?? SecretBytes()
        body(&a)
        answer = consume a
    }

    /// The answer, moved out (no copy).
    func takeAnswer() -> SecretBytes { answer.take() ?? SecretBytes() }
}

/// `serve [--socket PATH] [--idle-exit SECONDS] [--allow-uid UID]…`.
public struct ServeOptions: Sendable, Equatable {
    /// nil: `broker.sock` in the user's runtime directory (or the socket systemd passes).
    public var socket: String?
    /// nil: 0 (never) when started by hand, 60 under socket activation.
    public var idleExit: Int?
    public var allowedUIDs: [UInt32] = []
    public init(socket: String? = nil, idleExit: Int? = nil, allowedUIDs: [UInt32] = []) {
        self.socket = socket; self.idleExit = idleExit; self.allowedUIDs = allowedUIDs
    }
}
