import CredentialCore
import SystemRuntime
import HelperProtocols
import Credentials
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// `sink add|list|remove|run` (man page, `sink`; chatgpt-credential(7), SINKS): files this tool
/// keeps fresh for programs that only read a file, with no refresh token in them.
struct SinkCommand: Verb {
    static let spec = VerbSpec(
        name: "sink",
        summary: "keep a file fresh for a program that only reads one (Codex, ChatMock)",
        details: """
        add writes a file with a fresh access token and no refresh token, and registers it
        with the profile's stored credential: every refresh, by any process, rewrites it
        before the lock is released. list (the default) shows each sink, of every profile
        unless one is named, and its state (fresh, due, changed by another program, error);
        remove PATH stops keeping it and removes the file; run refreshes before a sink's
        token would go stale and sleeps until then.
        A file this tool did not write is never replaced (exit 2), except with
        --take-over for a file holding a sign-in, which is imported first.
        """,
        options: [
            OptionSpec("--format", value: "FORMAT", choices: SinkFormat.allCases.map(\.rawValue),
                       "add: what the file holds (codex and chatmock: their auth.json with no refresh token)"),
            OptionSpec("--path", value: "PATH", completion: .files,
                       "add: the file (default: Codex's or ChatMock's auth.json; required for token, env, json)"),
            OptionSpec("--take-over", "add: import the sign-in the file holds, then keep the file without its refresh token"),
            OptionSpec("--on-change", value: "CMD", "add: run CMD (split on spaces, no shell, 10 s) after each rewrite"),
            OptionSpec("--json", "list: as JSON"),
        ],
        examples: ["\(CommandLineSpec.programName) sink add --format codex",
                   "\(CommandLineSpec.programName) sink add --format env --path ~/app/token.env"],
        operands: .subcommands(Subcommand.allCases.map(\.rawValue)))

    enum Subcommand: String, CaseIterable, Sendable { case add, list, remove, run }

    var subcommand: Subcommand
    var format: SinkFormat?
    var path: String?
    var takeOver = false
    var onChange: [String] = []
    var json = false

    init(_ a: VerbArguments) throws {
        // Without a subcommand it lists, as `git remote` does.
        let word = a.operands.first ?? Subcommand.list.rawValue
        guard let sub = Subcommand(rawValue: word) else {
            throw CredentialError.usage("unknown sink subcommand '\(Sanitize.line(word, limit: 40))': add, list, remove or run")
        }
        subcommand = sub
        let operand = a.operands.count > 1 ? a.operands[1] : nil
        if a.operands.count > 2 { throw CredentialError.usage("unexpected argument '\(Sanitize.line(a.operands[2], limit: 60))'") }
        if let f = a.value("--format") {
            guard let parsed = SinkFormat(rawValue: f) else {
                throw CredentialError.usage("invalid value '\(Sanitize.line(f, limit: 40))' for --format: codex, chatmock, token, env or json")
            }
            format = parsed
        }
        path = a.value("--path")
        takeOver = a.has("--take-over")
        json = a.has("--json")
        if let cmd = a.value("--on-change") {
            onChange = cmd.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard !onChange.isEmpty else { throw CredentialError.usage("--on-change needs a command") }
        }
        func only(_ options: [String], for sub: Subcommand) throws {
            for o in ["--format", "--path", "--take-over", "--on-change", "--json"] where a.has(o) && !options.contains(o) {
                throw CredentialError.usage("sink \(sub.rawValue) takes no \(o)")
            }
        }
        switch sub {
        case .add:
            try only(["--format", "--path", "--take-over", "--on-change"], for: sub)
            guard format != nil else { throw CredentialError.usage("sink add needs --format codex|chatmock|token|env|json") }
            if path == nil, let operand { path = operand } else if operand != nil { throw CredentialError.usage("sink add takes its file as --path PATH") }
            // Only a file in the format's own shape can hold a sign-in to take over.
            if takeOver, !format!.isAuthJSON {
                throw CredentialError.usage("--take-over is for --format codex or chatmock (a file in their shape holding a sign-in); a \(format!.rawValue) sink never replaces a file it did not write")
            }
            if path == nil, !format!.isAuthJSON {
                throw CredentialError.usage("sink add --format \(format!.rawValue) needs --path PATH")
            }
        case .list:
            try only(["--json"], for: sub)
            if operand != nil { throw CredentialError.usage("sink list takes no PATH") }
        case .remove:
            try only([], for: sub)
            guard let operand else { throw CredentialError.usage("sink remove needs the sink's PATH") }
            path = operand
        case .run:
            try only([], for: sub)
            if operand != nil { throw CredentialError.usage("sink run takes no PATH") }
        }
    }

    func run(_ runner: Runner, _ g: GlobalOptions) throws -> Outcome {
        switch subcommand {
        case .add: return try runner.sinkAdd(self, g)
        case .list: return try runner.sinkList(g, json: json)
        case .remove: return try runner.sinkRemove(path!, g)
        case .run: return try runner.sinkRun(g)
        }
    }
    static var clientMode: ClientModePolicy<Self> { .refused }

    /// The programs whose running refuses `--take-over` (they would spend the imported token).
    static let readers: Set<String> = ["codex", "chatmock"]
}

extension Runner {
    /// An absolute, `.`- and `..`-free spelling of `path` (relative to the working directory),
    /// with `~/` meaning the home directory: what the registry keeps.
    func absoluteSinkPath(_ path: String) throws -> String {
        var p = path
        if p.hasPrefix("~/"), let home = services.settings.home { p = home + p.dropFirst(1) }
        if !p.hasPrefix("/") {
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buf, buf.count) != nil else { throw CredentialError.usage("cannot resolve the relative path \(path); give an absolute one") }
            p = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + p
        }
        var parts: [Substring] = []
        for part in p.split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        guard !parts.isEmpty, !p.hasSuffix("/") else { throw CredentialError.usage("\(path) names a directory; a sink's path names a file", namesItsHelp: true) }
        return "/" + parts.joined(separator: "/")
    }

    /// The default path of a `codex` or `chatmock` sink (man page, SINKS).
    func defaultSinkPath(_ format: SinkFormat) throws -> String {
        let s = services.settings
        let dir: String?
        switch format {
        case .codex: dir = s.codexHome ?? s.home.map { $0 + "/.codex" }
        case .chatmock: dir = s.chatgptLocalHome ?? s.home.map { $0 + "/.chatgpt-local" }
        default: dir = nil
        }
        guard let dir else { throw CredentialError.usage("sink add --format \(format.rawValue): cannot find its default path (HOME is not set); give --path PATH") }
        return (dir.hasSuffix("/") ? dir : dir + "/") + "auth.json"
    }

    func sinkAdd(_ c: SinkCommand, _ g: GlobalOptions) throws -> Outcome {
        let format = c.format!
        let path = try absoluteSinkPath(try c.path ?? defaultSinkPath(format))
        if format == .chatmock, services.settings.codexHome != nil {
            console.err("chatgpt-credential: warning: CODEX_HOME is set, and ChatMock reads $CODEX_HOME/auth.json before ~/.chatgpt-local/auth.json (only CHATGPT_LOCAL_HOME comes first); run ChatMock with CHATGPT_LOCAL_HOME=\(AtomicFile.split(path).dir)")
        }
        if format == .codex { codexKeyringAdvice(path, g) }
        // A file holding a sign-in of its own: only taken over, never overwritten.
        var takeOver: CredentialOwner.TakeOver?
        if let bytes = try SinkFile.read(path) {
            let digest = SinkRendering.digest(bytes)
            if let imported = try? TokenImport.parse(bytes, profile: g.profile), imported.format == .codexAuthFile,
               !imported.document.refreshToken.isEmpty {
                guard c.takeOver else {
                    throw CredentialError.usage("\(path) holds a sign-in with a refresh token that another program refreshes; to import it and keep the file without it, add --take-over (quit that program first)", namesItsHelp: true)
                }
                let running = ProcessTable.running(SinkCommand.readers)
                if let first = running.first {
                    throw CredentialError.usage("--take-over refused: \(first.name) is running (pid \(first.pid)); quit it first, or its next refresh spends the token this tool would now hold", namesItsHelp: true)
                }
                takeOver = .init(document: imported.document, fileDigest: digest)
            }
        }
        // Never among this tool's own files (a sink named like a profile's store would be taken for one).
        let (dir, _) = AtomicFile.split(path)
        for own in [services.paths.dataDirectory, services.paths.configDirectory].compactMap({ $0 }) where Self.sameDirectory(dir, own) {
            throw CredentialError.usage("\(path) is in this tool's own directory \(own); choose another --path", namesItsHelp: true)
        }
        let record = SinkRecord(format: format, path: path, onChange: c.onChange)
        _ = try owner(g).addSink(record, takeOver: takeOver)
        console.err("chatgpt-credential: sink \(format.rawValue) \(path) written for profile '\(g.profile.name)'\(takeOver == nil ? "" : "; its sign-in was imported, and this tool now refreshes it")")
        return .exit(0)
    }

    /// Whether `a` and `b` name the same directory (through symlinks too).
    static func sameDirectory(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return a == b }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    /// Where Codex keeps its sign-in in the keyring, it does not read auth.json: say what to set.
    private func codexKeyringAdvice(_ path: String, _ g: GlobalOptions) {
        let s = services.settings
        guard let home = CodexKeyring.home(codexHome: s.codexHome, home: s.home) else { return }
        let config = (home.hasSuffix("/") ? home : home + "/") + "config.toml"
        guard let bytes = try? FileSystem.readSmallFile(config, limit: 1 << 20) else { return }
        let text = bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        guard let mode = CodexKeyring.mode(configTOML: text), mode != .file else { return }
        console.err("chatgpt-credential: notice: Codex is set to keep its sign-in in the keyring (cli_auth_credentials_store = \"\(mode.rawValue)\" in \(config)); for it to read \(path), set cli_auth_credentials_store = \"file\" there (nothing of Codex's was changed)")
    }

    /// The profiles `sink list` and `sink remove` look at: the one named, else every profile
    /// (the default first), as `sink run` keeps them.
    private func sinkScope(_ g: GlobalOptions) -> [Profile] {
        g.profileNamed ? [g.profile] : sinkProfiles(g)
    }

    func sinkList(_ g: GlobalOptions, json: Bool) throws -> Outcome {
        var rows: [(profile: Profile, record: SinkRecord, state: SinkState)] = []
        var problems: [(Profile, CredentialError)] = []
        for profile in sinkScope(g) {
            var one = g
            one.profile = profile
            do {
                rows += try owner(one).sinks().map { (profile, $0.record, $0.state) }
            } catch let e as CredentialError where !g.profileNamed {
                problems.append((profile, e))
            }
        }
        rows.sort { ($0.profile.name, $0.record.path) < ($1.profile.name, $1.record.path) }
        for (profile, e) in problems { console.err("chatgpt-credential: \(profile.name): " + e.message) }
        let status = problems.first.map { $0.1.exitCode } ?? 0
        if json {
            let v: JSONValue = .object([("sinks", .array(rows.map { row in
                .object([("format", .string(row.record.format.rawValue)), ("path", .string(row.record.path)),
                         ("profile", .string(row.profile.name)), ("state", .string(row.state.rawValue))])
            }))])
            try console.out(JSON.serialize(v) + "\n")
            return .exit(status)
        }
        if rows.isEmpty {
            console.err(g.profileNamed ? "chatgpt-credential: profile '\(g.profile.name)' has no sink" : "chatgpt-credential: no profile has a sink")
            return .exit(status)
        }
        var out = ""
        for row in rows {
            out += "\(row.profile.name)  \(row.record.format.rawValue.padded(to: 9))\(row.state.rawValue)  \(row.record.path)\n"
        }
        try console.out(out)
        for row in rows where row.state == .changed {
            console.err("chatgpt-credential: \(row.record.path) was changed by another program and is no longer rewritten: \(SinkState.advice(row.record, row.profile))")
        }
        return .exit(status)
    }

    func sinkRemove(_ rawPath: String, _ g: GlobalOptions) throws -> Outcome {
        let path = try absoluteSinkPath(rawPath)
        // The profile that keeps PATH: the one named, else the first that has it.
        var keeper: GlobalOptions? = g.profileNamed ? g : nil
        for profile in keeper == nil ? sinkProfiles(g) : [] {
            var one = g
            one.profile = profile
            if (try? owner(one).sinks())?.contains(where: { $0.record.path == path }) == true { keeper = one; break }
        }
        guard let keeper, let removal = try owner(keeper).removeSink(path: path) else {
            let whose = g.profileNamed ? "profile '\(g.profile.name)' has no" : "no profile has a"
            throw CredentialError.usage("\(whose) sink at \(path) (see: \(g.profile.command("sink list")))", namesItsHelp: true)
        }
        switch removal {
        case .removed: console.err("chatgpt-credential: sink \(path) removed")
        case .alreadyGone: console.err("chatgpt-credential: sink \(path) no longer kept (the file was already gone)")
        case .leftChanged: console.err("chatgpt-credential: sink \(path) no longer kept; the file was changed by another program and is left as it is")
        }
        return .exit(0)
    }
}

/// `sink run` (man page, SINKS): every profile with sinks is refreshed through the owner before
/// `SinkSchedule.due`; between, it sleeps on the wall clock until `SinkSchedule.nextWake`.
extension Runner {
    func sinkRun(_ g: GlobalOptions) throws -> Outcome {
        console.err("chatgpt-credential: sink run: keeping every profile's sinks fresh")
        let said = SaidOnce()
        // Per profile kept in an encrypted file: the file's version when it was last read and
        // when it is due again. Each minute every profile is looked at, so a sink or a profile
        // added meanwhile is seen within a minute; one whose file has not changed and is not due
        // is not read again (a passphrase-protected file costs a scrypt to read).
        var known: [String: (version: [UInt8], wake: Int64)] = [:]
        while true {
            let now = services.now()
            for profile in sinkProfiles(g) {
                let version = services.fileStoreVersion(profile)
                if let version, let k = known[profile.name], k.version == version, k.wake > now {
                    continue
                }
                var one = g
                one.profile = profile
                let next = keepSinksFresh(one, said)
                if let after = services.fileStoreVersion(profile) {
                    known[profile.name] = (after, next ?? now + SinkSchedule.longestSleep)
                } else {
                    known[profile.name] = nil
                }
                // A signal that waited for this profile's save ends the run (128 + its number).
                try stopIfSignalled()
            }
            WallClock.sleep(until: max(now, services.now()) + SinkSchedule.minimumSleep)
        }
    }

    /// The profiles found in either store (the one asked for first).
    private func sinkProfiles(_ g: GlobalOptions) -> [Profile] {
        var profiles: [Profile] = [g.profile]
        for (name, _) in services.makeSelector(g).allProfiles().0 {
            if let p = try? Profile(name), !profiles.contains(p) { profiles.append(p) }
        }
        return profiles
    }

    /// What `sink run` said of each profile last: a notice or an error is said when it first
    /// appears, not at every wake while it lasts.
    final class SaidOnce {
        private var last: [String: String] = [:]
        func say(_ profile: String, _ line: String, _ console: Console) {
            guard last[profile] != line else { return }
            last[profile] = line
            console.err(line)
        }
        func clear(_ profile: String) { last[profile] = nil }
    }

    /// One profile: refreshed when due; the moment to wake for it next (nil: no sinks).
    private func keepSinksFresh(_ g: GlobalOptions, _ said: SaidOnce) -> Int64? {
        let owner = owner(g)
        let name = "sink run: profile '\(g.profile.name)'"
        do {
            guard var document = try owner.locate()?.document, !document.sinks.isEmpty else { return nil }
            // A rewrite that failed (a full disk) or never happened (a process stopped between the
            // document's save and the file's rewrite) is made now.
            if try owner.repairSinks() { console.err("chatgpt-credential: \(name): a sink that still held the token before was rewritten") }
            var due = Self.sinkDue(document)
            if due <= services.now() {
                let fresh = try owner.fresh(Freshness(forceRefresh: true))
                for n in fresh.notices { said.say(g.profile.name, "chatgpt-credential: \(name): " + n, console) }
                if fresh.refreshed {
                    said.clear(g.profile.name)
                    console.err("chatgpt-credential: \(name): refreshed; sinks rewritten; valid until \(Clock.rfc3339(fresh.credential.expiresAt))")
                }
                if let d = try owner.locate()?.document { document = d }
                due = Self.sinkDue(document)
            }
            return SinkSchedule.nextWake(due: due, now: services.now(), backoffUntil: owner.backoff.current(now: services.now())?.until ?? 0)
        } catch let e as CredentialError {
            said.say(g.profile.name, "chatgpt-credential: \(name): error: " + e.message, console)
            return services.now() + SinkSchedule.minimumSleep * 5
        } catch {
            return services.now() + SinkSchedule.minimumSleep * 5
        }
    }

    static func sinkDue(_ d: TokenDocument) -> Int64 {
        SinkSchedule.due(expiresAt: d.expiresAt, issuedAt: d.lastRefresh > 0 ? d.lastRefresh : d.storedAt,
                         codex: d.sinks.contains { $0.format == .codex })
    }
}
