import AccessCache
import CredentialCore
import SystemRuntime
import HelperProtocols
import Credentials
import Secrets
import Broker
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// The checks of `doctor` (man page VERBS, doctor), in the order they are printed. Each looks, never
/// changes anything, and prints no secret: a token read to be compared (another program's
/// refresh token) stays in guarded memory and is compared in constant time.
struct DoctorChecks {
    let runner: Runner
    let g: GlobalOptions
    var settings: Settings { runner.services.settings }
    var paths: Paths { runner.services.paths }

    func all() -> [DoctorCheck] {
        let found = settings.sessionBus.find()
        let busCheck = sessionBus(found)
        // A bus found but not there (a variable naming a socket nobody listens on) is not asked.
        let bus = busCheck.status == .ok ? found : nil
        let selector = runner.services.makeSelector(g)
        let keyring = secretService(bus: bus, selector)
        let listing = runner.everyProfile(g)
        let held = heldDocuments(listing)
        return [
            busCheck, keyring.check, fileStore(), lockDirectory(), accessCache(), brokerSocket(),
            systemdUnits(), sinks(held), issuerBackoff(listing),
            signIn(), profilesInBothStores(listing),
            otherRefresher("codex", program: "Codex", sources: codexSources(bus: bus, keyringAnswers: keyring.answers), held: held),
            otherRefresher("chatmock", program: "ChatMock", sources: chatmockSources(), held: held),
        ]
    }

    // MARK: the session bus and the Secret Service

    static let busAdvice = "the keyring needs the session bus of your login session: export DBUS_SESSION_BUS_ADDRESS from it (e.g. DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus), or start one with: dbus-run-session -- $SHELL; without one, sign-ins are kept in the encrypted file"

    func sessionBus(_ found: SessionBus.Found?) -> DoctorCheck {
        guard let found else { return .warn("session-bus", settings.sessionBus.notFoundReason, Self.busAdvice) }
        switch found.source {
        case .variable:
            let shown = Self.withoutGUID(found.address)
            if let absent = Self.whyNoBusListens(found.address) {
                return .warn("session-bus", "DBUS_SESSION_BUS_ADDRESS (\(Sanitize.line(shown, limit: 200))) names no bus here: \(absent)",
                             Self.busAdvice)
            }
            return .ok("session-bus", "from DBUS_SESSION_BUS_ADDRESS (\(shown))")
        case .runtimeDirectory: return .ok("session-bus", "at $XDG_RUNTIME_DIR/bus (\(Self.withoutGUID(found.address)))")
        case .perUserRuntimeDirectory: return .ok("session-bus", "at /run/user/\(geteuid())/bus")
        }
    }

    /// Why no bus can answer at `address`, or nil when one may: an address that does not parse,
    /// or one whose every entry is a socket path where nothing listens (connect(2), which does
    /// not wait for a UNIX socket). Other transports (abstract sockets, tcp) are not probed.
    static func whyNoBusListens(_ address: String) -> String? {
        guard let paths = StoreIdentity.socketPaths(ofBusAddress: address) else { return "it is not a D-Bus address" }
        var reasons: [String] = []
        for path in paths {
            guard let path, !BrokerListener.isLive(path) else { return nil }
            reasons.append(Self.look(path) == nil ? "\(path) does not exist" : "nothing listens on \(path)")
        }
        return reasons.joined(separator: "; ")
    }

    /// A bus address without its `guid=` (a per-daemon value that says nothing to a person).
    static func withoutGUID(_ address: String) -> String {
        address.split(separator: ",").filter { !$0.hasPrefix("guid=") }.joined(separator: ",")
    }

    func secretService(bus: SessionBus.Found?, _ selector: StoreSelector) -> (check: DoctorCheck, answers: Bool) {
        let name = "secret-service"
        guard bus != nil else { return (.warn(name, "not asked: no session bus (see session-bus)", "fix session-bus first"), false) }
        switch selector.secretServiceAvailability() {
        case .available:
            return (.ok(name, "answers; its default keyring is unlocked and kept on disk"), true)
        case .locked:
            return (.warn(name, "the default keyring is locked", "unlock it by logging in to the desktop session, or with: printf '%s' \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock"), true)
        case .volatile(let collection):
            return (.warn(name, "the default keyring is \(collection), which lives only in memory (lost when the keyring daemon restarts); new sign-ins go to the encrypted file",
                          "make a keyring kept on disk the default, e.g.: dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service.SetAlias string:default objpath:/org/freedesktop/secrets/collection/login"), true)
        case .unreachable(let why):
            return (.warn(name, StoreSelector.firstClause(why), "start a keyring daemon on this bus (gnome-keyring-daemon --start --components=secrets, or KeePassXC's Secret Service); without one, sign-ins are kept in the encrypted file"), false)
        case .unavailable(let why):
            return (.warn(name, StoreSelector.firstClause(why), "create a default keyring by logging in to the desktop session (or with seahorse); without one, sign-ins are kept in the encrypted file"), false)
        }
    }

    // MARK: files

    /// The mode bits of `path` (lstat), its owner and type, or nil when it is not there.
    static func look(_ path: String) -> stat? {
        var st = stat()
        return lstat(path, &st) == 0 ? st : nil
    }

    static func octal(_ st: stat) -> String { "0" + String(st.st_mode & 0o777, radix: 8) }
    /// `path` as one shell word: bare when it holds only safe characters, else single-quoted.
    static func quoted(_ path: String) -> String {
        let safe = path.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "/._-+=@%:,".unicodeScalars.contains($0) }
        return safe && !path.isEmpty ? path : GetFormatter.shellQuote(path)
    }

    func fileStore() -> DoctorCheck {
        let name = "file-store"
        guard let dir = paths.dataDirectory else { return .ok(name, "not used: neither HOME nor XDG_DATA_HOME is set") }
        guard let dirStat = Self.look(dir) else { return .ok(name, "no encrypted file yet (\(dir) is made when one is needed)") }
        // The store's own read checks (what AgeFileStore.passesReadChecks asks), so what it would
        // refuse is exactly what fails here.
        var problems: [(String, String)] = []
        func refuses(_ path: String, _ check: () throws -> Bool) {
            do { _ = try check() } catch let e as CredentialError {
                if case .permissionsTooOpen(let loose) = e {
                    let isDirectory = loose.hasSuffix("/")
                    let mode = Self.look(path).map(Self.octal) ?? "?"
                    problems.append(("\(path) is mode \(mode), open to others (refused)", "chmod \(isDirectory ? "700" : "600") \(Self.quoted(path))"))
                } else {
                    problems.append((Sanitize.line(e.message), "move it out of the way: mv \(Self.quoted(path)) \(Self.quoted(path + ".old"))"))
                }
            } catch {
                problems.append(("\(path): \(error)", "move it out of the way: mv \(Self.quoted(path)) \(Self.quoted(path + ".old"))"))
            }
        }
        refuses(dir) { try AtomicFile.checkDirectory(dir, create: false) }
        let files = Self.entries(dir).filter { $0.hasSuffix(".age") }.sorted()
        for file in files {
            let path = dir + "/" + file
            refuses(path) { try AtomicFile.checkFile(path) }
        }
        var keyWords = "no key file yet"
        switch runner.services.fileStoreKey(files.compactMap { try? Profile(String($0.dropLast(4))) }) {
        case .passphraseFile(let file):
            keyWords = "passphrase file \(file)"
        case .refusedPassphraseFile(let why):
            problems.append((Sanitize.line(why), "the passphrase file must be yours and closed to others, with the passphrase on its first line"))
        case .identity(let key):
            keyWords = "key \(key) \(Self.look(key).map(Self.octal) ?? "?")"
            let keyDir = AtomicFile.split(key).dir
            refuses(keyDir) { try AtomicFile.checkDirectory(keyDir, create: false) }
            refuses(key) { try AtomicFile.checkFile(key) }
        case .missingIdentity(let key, let needing):
            let names = needing.map(\.name).joined(separator: ", ")
            problems.append(("no key: \(key) does not exist, so the encrypted file\(needing.count == 1 ? "" : "s") of \(names) cannot be read",
                             "put the key back at \(Self.quoted(key)) (mode 600) from a backup; if it is lost, move the files out of the way and sign in again: \(CommandLineSpec.programName) login"))
        case .none:
            break
        }
        if !problems.isEmpty {
            return .fail(name, problems.map(\.0).joined(separator: "; "), problems.map(\.1).joined(separator: "; "))
        }
        return .ok(name, "\(files.count) encrypted file\(files.count == 1 ? "" : "s") in \(dir) \(Self.octal(dirStat)), \(keyWords)")
    }

    /// The names in a directory (none when it cannot be read).
    static func entries(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let n = FileSystem.entryName(e)
            if n != "." && n != ".." { names.append(n) }
        }
        return names
    }

    func lockDirectory() -> DoctorCheck {
        let name = "lock-directory"
        let dir = paths.lockDirectory()
        guard let st = Self.look(dir) else { return .ok(name, "\(dir) (made on first use)") }
        // The lock's own rule (LockDirectory.problem), not a copy of it.
        switch LockDirectory.problem(st) {
        case nil: break
        case .notADirectory:
            return .fail(name, "\(dir) is not a directory (refused)", "remove it: rm \(Self.quoted(dir))")
        case .otherOwner(let uid):
            return .fail(name, "\(dir) belongs to uid \(uid) (refused)", "have its owner or root remove it: rm -r \(Self.quoted(dir))")
        case .openToOthers:
            return .fail(name, "\(dir) is mode \(Self.octal(st)): other users may use it (refused, exit 5)", "chmod 700 \(Self.quoted(dir))")
        }
        return .ok(name, "\(dir), yours, mode \(Self.octal(st))")
    }

    // MARK: the access cache, the broker, the units

    func accessCache() -> DoctorCheck {
        let name = "access-cache"
        guard g.cache.enabled else { return .ok(name, "off (--no-cache or CHATGPT_CREDENTIAL_CACHE=off)") }
        guard UserNamespace.isInitial else { return .ok(name, "not used in a user namespace other than the first") }
        if let e = KeyringCache.kernelRefusal() {
            return .ok(name, "not used here: the kernel refuses keys (\(FileSystem.errorText(e))); every get reads the store")
        }
        return .ok(name, "the kernel's user keyring answers; entries are served for up to \(g.cache.ttl) s")
    }

    func brokerSocket() -> DoctorCheck {
        let name = "broker"
        let path = BrokerListener.defaultPath()
        guard let st = Self.look(path) else {
            // Enabled for socket activation, yet nothing listens: the user manager is not running it.
            if unitDirectories.enabling.contains(where: { Self.look($0 + "/sockets.target.wants/chatgpt-credential.socket") != nil }) {
                return .warn(name, "chatgpt-credential.socket is enabled but nothing listens at \(path)",
                             "start it: systemctl --user start chatgpt-credential.socket (or run: \(CommandLineSpec.programName) serve)")
            }
            return .ok(name, "not set up (no socket at \(path))")
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            return .fail(name, "\(path) is not a socket", "remove it: rm \(Self.quoted(path))")
        }
        let client = BrokerClient(address: BrokerAddress(path: path), timeout: 3)
        let answered: Int?
        do { answered = try client.get(BrokerProtocol.healthPath).status } catch { answered = nil }
        guard answered == 200 else {
            return .warn(name, "\(path) is there but no broker answers on it (left by a broker that stopped)",
                         "start the broker: \(CommandLineSpec.programName) serve (or systemctl --user start chatgpt-credential.socket), or remove the socket: rm \(Self.quoted(path))")
        }
        var acl = [UInt8](repeating: 0, count: 256)
        let hasACL = cs_getxattr(path, "system.posix_acl_access", &acl, UInt(acl.count)) > 0
        let who = st.st_mode & 0o077 == 0 && !hasACL ? "only uid \(st.st_uid) can connect"
            : "other users can connect (\(hasACL ? "an ACL" : "its mode")); the broker answers only uid \(st.st_uid) and those it allows (--allow-uid)"
        return .ok(name, "listening at \(path) (\(Self.octal(st)), \(who))")
    }

    /// The user units and where systemd looks for them (systemd.unit(5), user unit search path).
    static let units = ["chatgpt-credential.socket", "chatgpt-credential.service",
                        "chatgpt-credential-refresh.timer", "chatgpt-credential-refresh.service",
                        "chatgpt-credential-sinks.service"]

    /// Where systemd looks for user units (systemd.unit(5)), and where `enable` puts its links.
    var unitDirectories: (search: [String], enabling: [String]) {
        let home = settings.home.flatMap { $0.hasPrefix("/") ? $0 : nil }
        let config = settings.configHome.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home.map { $0 + "/.config" }
        let data = settings.dataHome.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home.map { $0 + "/.local/share" }
        let userConfig = config.map { $0 + "/systemd/user" }
        let search = [userConfig, "/etc/systemd/user", data.map { $0 + "/systemd/user" },
                      "/usr/local/lib/systemd/user", "/usr/local/share/systemd/user", "/usr/lib/systemd/user", "/usr/share/systemd/user"].compactMap { $0 }
        return (search, [userConfig, "/etc/systemd/user"].compactMap { $0 })
    }

    func systemdUnits() -> DoctorCheck {
        let name = "systemd-units"
        let (searchPath, enabling) = unitDirectories
        func installed(_ unit: String) -> String? {
            searchPath.first { dir in Self.look(dir + "/" + unit).map { $0.st_mode & S_IFMT != S_IFLNK || access(dir + "/" + unit, F_OK) == 0 } ?? false }
        }
        let found = Self.units.compactMap { u in installed(u).map { (u, $0) } }
        // Each enable-able unit and where its [Install] WantedBy= puts the link.
        let wants = [("chatgpt-credential.socket", "sockets.target.wants"), ("chatgpt-credential-refresh.timer", "timers.target.wants"),
                     ("chatgpt-credential-sinks.service", "default.target.wants")]
        var enabled: [String] = []
        for (unit, dir) in wants {
            for base in enabling {
                let link = base + "/" + dir + "/" + unit
                guard Self.look(link) != nil else { continue }
                if access(link, F_OK) != 0 {
                    return .warn(name, "\(unit) is enabled but its unit file is gone (\(link) points nowhere)",
                                 "reinstall the units (make install-units, or the package), or disable it: systemctl --user disable \(unit) (or: rm \(Self.quoted(link)))")
                }
                enabled.append(unit)
                break
            }
        }
        guard !found.isEmpty else { return .ok(name, "not installed (optional: make install-units, or the package, installs them)") }
        let dirs = Set(found.map(\.1)).sorted().joined(separator: ", ")
        let missing = Self.units.filter { u in !found.contains { $0.0 == u } }
        if !missing.isEmpty {
            return .warn(name, "only some units are installed in \(dirs); missing: \(missing.joined(separator: ", "))", "reinstall them: make install-units, or the package")
        }
        let notEnabled = wants.map(\.0).filter { !enabled.contains($0) }
        let on = enabled.isEmpty ? "" : "; enabled: \(enabled.joined(separator: ", "))"
        if notEnabled.isEmpty { return .ok(name, "installed in \(dirs)\(on)") }
        return .ok(name, "installed in \(dirs)\(on); not enabled: \(notEnabled.joined(separator: ", ")) (optional: systemctl --user enable --now \(notEnabled.joined(separator: " ")))")
    }

    // MARK: the back-off, the sign-in, the profiles

    func issuerBackoff(_ listing: ProfileListing) -> DoctorCheck {
        let name = "issuer-backoff"
        let issuer = (try? settings.issuer.get().baseURL) ?? ""
        let now = runner.services.now()
        var profiles = listing.names
        if !profiles.contains(g.profile) { profiles.insert(g.profile, at: 0) }
        for profile in profiles {
            let backoff = IssuerBackoff(lockPath: paths.lockFile(for: profile), issuer: issuer)
            if let record = backoff.current(now: now) {
                return .warn(name, "profile \(profile.name): the issuer \(issuer) failed (\(record.reason)); refreshes wait until \(Clock.rfc3339(record.until))",
                             "nothing to do: it clears by itself then (check the network, or CHATGPT_CREDENTIAL_ISSUER if it is set)")
            }
        }
        return .ok(name, "none")
    }

    func signIn() -> DoctorCheck {
        let name = "sign-in"
        let profile = g.profile
        let located: LocatedCredential?
        do { located = try runner.owner(g).locate() } catch CredentialError.notFoundKeyringUnreachable(_, let keyring, let file) {
            return .warn(name, "profile \(profile.name) is not in \(file), and the keyring could not be asked (\(StoreSelector.firstClause(keyring)))",
                         "fix session-bus and secret-service above; if it was never signed in here: \(profile.loginCommand)")
        } catch let e as CredentialError {
            // The message's own advice (after its first "; "), else the checks above.
            let advice = Self.afterFirstSemicolon(e.message) ?? "fix the checks above, then: \(profile.command("status"))"
            return .fail(name, "profile \(profile.name): \(StoreSelector.firstClause(e.message))", advice)
        } catch {
            return .fail(name, "profile \(profile.name): \(error)", "fix the checks above, then: \(profile.command("status"))")
        }
        guard let located else { return .warn(name, "profile \(profile.name) is not signed in", "sign in: \(profile.loginCommand)") }
        let d = located.document
        let who = "profile \(profile.name): \(d.email.isEmpty ? "account \(shownAccount(d.accountId))" : d.email)\(d.plan.isEmpty ? "" : " (\(d.plan))") in \(located.store.kind.rawValue)"
        if let code = d.state.rejection, !RefreshPolicy.stillUsable(d, Freshness(), now: runner.services.now()) {
            return .fail(name, "\(who): the issuer rejected its refresh token (\(code))", "sign in again: \(profile.loginCommand)")
        }
        return .ok(name, who)
    }

    /// What follows a message's first "; " (its advice), or nil.
    static func afterFirstSemicolon(_ message: String) -> String? {
        let chars = Array(message)
        for i in chars.indices.dropLast() where chars[i] == ";" && chars[i + 1] == " " { return String(chars[(i + 2)...]) }
        return nil
    }

    func profilesInBothStores(_ listing: ProfileListing) -> DoctorCheck {
        let name = "profiles"
        let inFile = Set(listing.found.filter { $0.kind == .file }.map(\.profile.name))
        let both = listing.found.filter { $0.kind == .secretService && inFile.contains($0.profile.name) }.map(\.profile)
        if let p = both.first {
            let selector = runner.services.makeSelector(g)
            let others = both.count > 1 ? " (and \(both.dropFirst().map(\.name).joined(separator: ", ")))" : ""
            return .warn(name, "profile \(p.name)\(others) is kept in both the Secret Service and the encrypted file; auto reads the file, the keyring's copy is stale",
                         "remove the copy auto does not read: \(CopyRemoval.command(selector.store(of: .secretService), p))")
        }
        let names = listing.names.map(\.name)
        let unlisted = listing.problems.isEmpty ? "" : " (a store could not be listed: \(StoreSelector.firstClause(listing.problems[0].message)))"
        return .ok(name, (names.isEmpty ? "none signed in" : "\(names.count) signed in, none kept twice") + unlisted)
    }

    // MARK: sinks

    /// Every profile's sinks (kept in its document), in the state `sink list` shows: a file another
    /// program changed, or one that could not be read, is a warn, with the advice `sink list`
    /// gives; fresh and due (rewritten at the next refresh) are ok.
    func sinks(_ held: [(Profile, TokenDocument)]) -> DoctorCheck {
        let name = "sinks"
        let now = runner.services.now()
        var fresh = 0, due = 0
        var problems: [(detail: String, advice: String)] = []
        for (profile, document) in held {
            for record in document.sinks {
                let path = Sanitize.line(record.path, limit: 200)
                let whose = profile == .default ? "" : " (profile \(profile.name))"
                switch SinkState.of(record, document, now: now) {
                case .fresh: fresh += 1
                case .changed:
                    problems.append(("\(path)\(whose) was changed by another program and is no longer rewritten", SinkState.advice(record, profile)))
                case .error:
                    problems.append(("\(path)\(whose) cannot be read", "make its directory yours and closed to others, or run: \(profile.command("sink remove \(record.path)"))"))
                case .due: due += 1
                }
            }
        }
        guard !problems.isEmpty else {
            // Due is no problem of its own: the next refresh (get, the broker, sink run) rewrites it.
            let kept = [fresh > 0 ? "\(fresh) fresh" : nil, due > 0 ? "\(due) due for a rewrite at the next refresh" : nil].compactMap { $0 }
            return .ok(name, kept.isEmpty ? "none" : kept.joined(separator: ", "))
        }
        return .warn(name, problems.map(\.detail).joined(separator: "; "), problems.map(\.advice).joined(separator: "; "))
    }

    // MARK: other refreshers

    /// Every document this tool holds, for comparing another program's refresh token.
    func heldDocuments(_ listing: ProfileListing) -> [(Profile, TokenDocument)] {
        var held: [(Profile, TokenDocument)] = []
        for (profile, kind) in listing.found {
            var g2 = g
            g2.profile = profile
            // Never a passphrase prompt per profile: a copy that needs one is not compared.
            g2.nonInteractive = true
            g2.store = kind == .file ? .file : .secretService
            if let located = try? runner.services.makeSelector(g2).locate(profile) { held.append((profile, located.document)) }
        }
        return held
    }

    /// Where another program keeps a credential, and what was read there (nil: nothing there).
    struct Source {
        var label: String
        /// The file's path, for advice; nil for a keyring item.
        var path: String?
        var refreshToken: SecretToken?
        /// Why it could not be read (not a failure of this check: a word in the detail).
        var unreadable: String?
        /// For a keyring item: what takes it out of the way before a sink (Codex then reads a file).
        var removal: String?
    }

    func codexSources(bus: SessionBus.Found?, keyringAnswers: Bool) -> [Source] {
        var sources: [Source] = []
        if let path = CodexAuthFile.defaultPath(codexHome: settings.codexHome, home: settings.home) {
            sources.append(Self.fileSource(path))
        }
        if let home = CodexKeyring.home(codexHome: settings.codexHome, home: settings.home), bus != nil, keyringAnswers {
            let account = CodexKeyring.account(canonicalHome: Runner.canonicalPath(home))
            var source = Source(label: "the keyring item '\(CodexKeyring.service)' \(account)", path: nil)
            source.removal = "set cli_auth_credentials_store = \"file\" in \(Self.quoted((home.hasSuffix("/") ? home : home + "/") + "config.toml")), remove the item (this revokes nothing): secret-tool clear service \(Self.quoted(CodexKeyring.service)) account \(Self.quoted(account)), then "
            do {
                for attributes in CodexKeyring.searches(account: account) {
                    if let secret = try runner.services.lookupForeignSecret(attributes) {
                        source.refreshToken = Self.refreshToken(in: secret) ?? SecretToken()
                        break
                    }
                }
            } catch let e as CredentialError {
                source.unreadable = StoreSelector.firstClause(e.message)
            } catch {
                source.unreadable = "\(error)"
            }
            if source.refreshToken != nil || source.unreadable != nil { sources.append(source) }
        }
        return sources
    }

    func chatmockSources() -> [Source] {
        let home = settings.chatgptLocalHome ?? settings.home.map { ($0.hasSuffix("/") ? $0 : $0 + "/") + ".chatgpt-local" }
        guard let home else { return [] }
        return [Self.fileSource((home.hasSuffix("/") ? home : home + "/") + "auth.json")]
    }

    static func fileSource(_ path: String) -> Source {
        var source = Source(label: path, path: path)
        guard look(path) != nil else { return source }
        do {
            source.refreshToken = refreshToken(in: try FileSystem.readSmallFile(path, limit: TokenImport.maxBytes)) ?? SecretToken()
        } catch let e as CredentialError {
            source.unreadable = e.message
        } catch {
            source.unreadable = "\(error)"
        }
        return source
    }

    /// `tokens.refresh_token` (Codex's and ChatMock's shape) or a top-level `refresh_token`, in
    /// guarded memory; nil when the JSON holds neither.
    static func refreshToken(in secret: borrowing SecretBytes) -> SecretToken? {
        guard let v = try? JSON.parse(secret, maxBytes: TokenImport.maxBytes), v.isObject else { return nil }
        return v["tokens"]?["refresh_token"]?.secretValue ?? v["refresh_token"]?.secretValue
    }

    func otherRefresher(_ name: String, program: String, sources: [Source], held: [(Profile, TokenDocument)]) -> DoctorCheck {
        var findings: [DoctorCheck] = []
        for source in sources {
            if let why = source.unreadable {
                findings.append(.ok(name, "\(source.label) could not be read (\(why))"))
                continue
            }
            guard let token = source.refreshToken else {
                findings.append(.ok(name, "no \(source.label)"))
                continue
            }
            guard !token.isEmpty else {
                findings.append(.ok(name, "\(source.label) holds no refresh token (\(program) cannot refresh it)"))
                continue
            }
            func sink(_ profile: Profile, takeOver: Bool) -> String {
                profile.command("sink add --format \(name)\(source.path.map { " --path " + Self.quoted($0) } ?? "")\(takeOver ? " --take-over" : "")")
            }
            let itemFirst = source.removal ?? ""
            if let (profile, _) = held.first(where: { $0.1.refreshToken == token }) {
                findings.append(.fail(name, "\(source.label) holds the very refresh token profile \(profile.name) holds: two programs refresh one chain, and whichever refreshes second is signed out (refresh_token_reused)",
                                      "let this tool be the only refresher and give \(program) a file it keeps fresh: quit \(program), then \(itemFirst)\(sink(profile, takeOver: source.removal == nil))"))
            } else if let (profile, _) = held.first(where: { $0.1.hasSpent(token) }) {
                let moved = source.path.map { "mv \(Self.quoted($0)) \(Self.quoted($0 + ".spent")), then " } ?? ""
                findings.append(.fail(name, "\(source.label) holds a refresh token profile \(profile.name) already spent: \(program)'s next refresh fails with refresh_token_reused",
                                      "give \(program) a file this tool keeps fresh: quit \(program), then \(itemFirst)\(moved)\(sink(profile, takeOver: false))"))
            } else {
                findings.append(.warn(name, "\(source.label) holds another refresh token: \(program) refreshes a sign-in of its own",
                                      "nothing to do if it is another account; if it is the same one, let one program refresh: quit \(program), then \(itemFirst)\(sink(g.profile, takeOver: source.removal == nil))"))
            }
        }
        guard !findings.isEmpty else { return .ok(name, "no \(program) credential found") }
        let rank: [DoctorCheck.Status: Int] = [.ok: 0, .warn: 1, .fail: 2]
        let worst = findings.max { rank[$0.status]! < rank[$1.status]! }!
        var check = worst
        check.detail = findings.map(\.detail).joined(separator: "; ")
        return check
    }

    // MARK: client mode

    /// In client mode, the broker only (its health endpoint); no store is touched.
    static func broker(_ client: BrokerClient) -> DoctorCheck {
        do {
            let reply = try client.get(BrokerProtocol.healthPath)
            if reply.status == 200 { return .ok("broker", "\(client.address.description) answers (client mode: no store is checked here)") }
            return .fail("broker", "\(client.address.description) answered \(reply.status) to \(BrokerProtocol.healthPath)",
                         "on the broker's side, where the credential is, run: \(CommandLineSpec.programName) doctor")
        } catch let e as CredentialError {
            return .fail("broker", StoreSelector.firstClause(e.message),
                         "on the broker's side, where the credential is, start it (\(CommandLineSpec.programName) serve, or systemctl --user start chatgpt-credential.socket) and run: \(CommandLineSpec.programName) doctor")
        } catch {
            return .fail("broker", "\(error)", "on the broker's side, where the credential is, run: \(CommandLineSpec.programName) doctor")
        }
    }
}
