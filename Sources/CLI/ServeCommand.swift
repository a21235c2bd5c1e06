import Broker
import CredentialCore
import SystemRuntime
import Credentials
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `serve` (man page BROKER): the broker. The `Broker` module listens, checks the peer and
/// frames HTTP; every answer is made here, by running the verb a client would have run (`get
/// --json`, `usage --json`) through a `Runner` whose console collects the answer and the
/// notices, so the broker is one more caller of the one owner and never a second refresher.
extension Runner {
    func serve(_ g: GlobalOptions, _ o: ServeOptions) throws -> Outcome {
        let listener: BrokerListener
        if let activated = try BrokerListener.activated(environment: services.environment) {
            if o.socket != nil {
                throw CredentialError.usage("--socket cannot be used under systemd socket activation (the socket is the one systemd passes)")
            }
            listener = activated
        } else {
            listener = try BrokerListener.bind(path: o.socket)
        }
        var settings = BrokerServer.Settings()
        settings.idleExit = Double(o.idleExit ?? (listener.activated ? 60 : 0))
        settings.allowedUIDs = Set(o.allowedUIDs)
        let console = self.console
        let services = self.services
        // A SIGTERM/SIGINT/SIGHUP that arrived while a client's refresh was being saved was
        // deferred (man page REFRESH) and so missed the stop handler: the server stops after
        // that answer, as it would have on the signal.
        let stopper = ServerStopper()
        let server = BrokerServer(listenFD: listener.fd, settings: settings,
                                  handler: { request, _ in
                                      let answer = Runner.answer(request, g, services: services, console: console)
                                      if SignalDeferral.deferredSignal != nil { stopper.server?.stop() }
                                      return answer
                                  },
                                  audit: { console.err($0.line) })
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
        var g = server
        g.profile = request.profile ?? server.profile
        g.wire = .plain
        g.nonInteractive = true
        let capture = AnswerConsole()
        let runner = Runner(console: capture, services: services)
        runner.stopsOnDeferredSignal = false
        do {
            let body: SecretBytes
            switch request.call {
            case .health:
                return .ok(#"{"ok":true}"#)
            case .token(_, let minTTL):
                var options = GetOptions(format: .json)
                if let minTTL {
                    options.minTTL = max(TokenDocument.refreshMargin, minTTL)
                    options.requiredTTL = minTTL
                }
                // Exactly `get --json` (Runner.dispatch's `.get`), the answer kept where it was
                // built instead of being written to a console.
                let fresh = try runner.freshCredential(g, options)
                body = try GetFormatter.format(fresh.credential, options.format, profile: g.profile)
            case .usage:
                _ = try runner.dispatch(.usage(json: true, all: false), g)
                body = capture.takeAnswer()
            }
            // Notices (a token shorter-lived than min_ttl, diagnostics with --verbose) go to the
            // server's stderr, beside the audit line.
            for line in capture.lines { console.err(line) }
            return BrokerAnswer(status: 200, body: body, outcome: "ok", profile: g.profile.name)
        } catch let e as CredentialError {
            for line in capture.lines { console.err(line) }
            return .failure(status: BrokerProtocol.status(forExitCode: e.exitCode), message: e.message, profile: g.profile.name)
        } catch {
            return .failure(status: 500, message: "\(error)", profile: g.profile.name)
        }
    }
}

/// The server an answer may stop (set once, before the first connection is accepted).
final class ServerStopper: @unchecked Sendable {
    var server: BrokerServer?
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
