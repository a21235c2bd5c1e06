import CredentialCore
import SystemRuntime
import Age
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// The encrypted-file store (man page STORES): one age v1 file per profile at
/// `$XDG_DATA_HOME/chatgpt-credential/NAME.age` (default `$HOME/.local/share/chatgpt-credential`),
/// directory 0700, file 0600, readable by the `age` tool itself.
///
/// Keys:
/// - Default: an X25519 age identity at `$XDG_CONFIG_HOME/chatgpt-credential/identity` (default
///   `$HOME/.config/chatgpt-credential/identity`), 0600 in a 0700 directory, in age-keygen's text
///   format (so `age -d -i IDENTITY FILE` works). It is created on the first *write*, never on a
///   read, and created exclusively: two processes racing to create it end up sharing one.
/// - Passphrase mode: an age scrypt recipient (work factor 18, as `age -p` writes).
///
/// Which key a *read* uses is decided by the file itself: an scrypt stanza means a passphrase,
/// anything else the identity. Which key a *write* uses:
/// - passphrase mode when `CHATGPT_CREDENTIAL_PASSPHRASE_FILE` is set, or when the existing file
///   for the profile is already passphrase-protected (so a refresh never silently downgrades a
///   passphrase file to the identity);
/// - otherwise the X25519 identity.
/// Setting `CHATGPT_CREDENTIAL_PASSPHRASE_FILE` therefore moves a profile to passphrase mode at its
/// next write; removing the file (erase) and signing in again without it moves it back.
///
/// The passphrase comes from the first line of the file named by
/// `CHATGPT_CREDENTIAL_PASSPHRASE_FILE` (trailing LF or CRLF stripped; the file must not be
/// accessible by group or others), or, when interactive, from the `PassphrasePrompt` the executable
/// hands in (on /dev/tty with echo off): the store itself never opens a terminal.
/// A prompted passphrase used for a write is first checked against the existing file, so a typo
/// cannot re-encrypt the credential under a passphrase nobody knows; a passphrase from the file is
/// authoritative (that is how the passphrase is changed).
///
/// Every failure leaves the file on disk as it was; all errors are exit 5 (`CredentialError`).
public final class AgeFileStore: CredentialStore {
    public let kind: StoreKind = .file
    /// `…/chatgpt-credential` under the data home, nil when neither XDG_DATA_HOME nor HOME is set.
    public let directory: String?
    /// `…/chatgpt-credential/identity` under the config home, nil when neither XDG_CONFIG_HOME nor HOME is set.
    public let identityPath: String?
    /// `CHATGPT_CREDENTIAL_PASSPHRASE_FILE`, when set and non-empty (the executable reads it).
    public let passphraseFile: String?
    public let interactive: Bool

    /// scrypt work factor for writes (tests lower it; reads accept up to `ageMaxScryptWorkFactor`).
    var scryptWorkFactor = 18
    /// Reads a passphrase interactively: the prompt handed in (tests replace it).
    var promptPassphrase: (String) throws -> SecretBytes
    /// A passphrase that has decrypted a file (or came from the passphrase file) in this process;
    /// empty while there is none (an empty passphrase is never accepted).
    private var passphrase = SecretBytes()

    static let maxFileBytes = 1 << 20

    /// `prompt`: how to ask for a passphrase; nil when nobody may be asked (`--non-interactive`).
    public init(paths: Paths, passphraseFile: String?, prompt: PassphrasePrompt?) {
        directory = paths.dataDirectory
        identityPath = paths.identityFile
        self.passphraseFile = passphraseFile.flatMap { $0.isEmpty ? nil : $0 }
        interactive = prompt != nil
        promptPassphrase = { text in
            guard let prompt else { throw CredentialError.storeUnavailable("no terminal to ask for the passphrase") }
            return try prompt.passphrase(text)
        }
    }

    // MARK: paths

    /// The file for `profile`, nil when no directory can be determined.
    public func path(for profile: Profile) -> String? { directory.map { Paths.encryptedFile(in: $0, for: profile) } }

    public func location(for profile: Profile) -> String {
        path(for: profile) ?? "the encrypted file store (HOME is not set)"
    }

    private func requireDirectory() throws -> String {
        guard let directory else {
            throw CredentialError.storeUnavailable(
                "cannot locate the encrypted file store: HOME is not set (nor XDG_DATA_HOME); set HOME and try again")
        }
        return directory
    }

    private func requireIdentityPath() throws -> String {
        guard let identityPath else {
            throw CredentialError.storeUnavailable(
                "cannot locate the age identity: HOME is not set (nor XDG_CONFIG_HOME); set HOME and try again")
        }
        return identityPath
    }

    /// The owner and mode checks a read of `profile` makes before decrypting — the store's
    /// directory, the encrypted file, the identity's directory and the identity (missing is
    /// fine) — made on their status alone, nothing opened or decrypted, with the functions the
    /// read itself uses (`AtomicFile.checkDirectory`, `AtomicFile.checkFile`). True when they pass,
    /// false when the file is not there; throws what the read would (exit 5). The access cache
    /// serves a file store's entry only while this is true (man page ACCESS CACHE; ARCHITECTURE.md).
    public func passesReadChecks(_ profile: Profile) throws -> Bool {
        try versionPassingReadChecks(profile) != nil
    }

    /// `passesReadChecks`, returning the version of the profile's file (`version(profile)`'s,
    /// from the same `lstat`) when they pass: what an access-cache entry is bound to.
    public func versionPassingReadChecks(_ profile: Profile) throws -> [UInt8]? {
        try Self.versionPassingReadChecks(profile, directory: requireDirectory(), identity: Self.keyPaths(identityPath))
    }

    /// The key file and its directory, as the read checks take them.
    public static func keyPaths(_ identityPath: String?) -> (file: String, directory: String)? {
        identityPath.map { (file: $0, directory: AtomicFile.split($0).dir) }
    }

    /// The same checks, of paths worked out once (the broker makes them for every cached answer).
    public static func versionPassingReadChecks(_ profile: Profile, directory dir: String,
                                                identity: (file: String, directory: String)?) throws -> [UInt8]? {
        guard try AtomicFile.checkDirectory(dir, create: false),
              let file = try AtomicFile.checkedFile(Paths.encryptedFile(in: dir, for: profile)) else { return nil }
        if let identity, try AtomicFile.checkDirectory(identity.directory, create: false) {
            try AtomicFile.checkFile(identity.file)
        }
        return version(of: file)
    }

    // MARK: CredentialStore

    public func read(_ profile: Profile) throws -> SecretBytes? {
        var version: [UInt8]?
        return try read(profile, version: &version)
    }

    public func read(_ profile: Profile, version: inout [UInt8]?) throws -> SecretBytes? {
        version = nil
        let dir = try requireDirectory()
        guard try AtomicFile.checkDirectory(dir, create: false) else { return nil }
        let path = Paths.encryptedFile(in: dir, for: profile)
        var st = stat()
        guard let file = try readEncrypted(path, profile, stat: &st) else { return nil }
        let secret = try decrypt(file, path: path, profile: profile)
        version = Self.version(of: st)
        return secret
    }

    /// The profile's encrypted file as `AtomicFile.read` checks it; one too large to be ours says
    /// how to remove it for this profile.
    private func readEncrypted(_ path: String, _ profile: Profile) throws -> [UInt8]? {
        var ignored = stat()
        return try readEncrypted(path, profile, stat: &ignored)
    }

    private func readEncrypted(_ path: String, _ profile: Profile, stat st: inout stat) throws -> [UInt8]? {
        do {
            return try AtomicFile.read(path, maxBytes: AgeFileStore.maxFileBytes, stat: &st)
        } catch CredentialError.storeCorrupt {
            throw CredentialError.storeCorrupt(
                "\(path) is larger than any credential file (over \(AgeFileStore.maxFileBytes) bytes); \(profile.removeDamagedHint)")
        }
    }

    @_spi(CredentialOwner) public func write(_ profile: Profile, secret: borrowing SecretBytes) throws {
        let path = try writablePath(profile)
        try encryptForWrite(secret, at: path, profile: profile).withUnsafeBytes { try AtomicFile.replace(path, with: $0) }
    }

    /// Whether a new credential for `profile` could be written here now, asked before a sign-in
    /// takes the person's time (man page, login): the store's directory and the identity's can
    /// be located (HOME or the XDG variables are set), and the nearest existing directory of each
    /// takes writes (not a read-only mount). Throws what the save would meet (exit 5).
    public func checkWritable(_ profile: Profile) throws {
        var directories = [try requireDirectory()]
        if passphraseFile == nil { directories.append(AtomicFile.split(try requireIdentityPath()).dir) }
        for directory in directories {
            var existing = directory
            while access(existing, F_OK) != 0, existing != "/" {
                existing = AtomicFile.split(existing).dir
                if existing.isEmpty { existing = "/" }
            }
            if access(existing, W_OK) != 0 {
                throw CredentialError.storeFailure("cannot write the encrypted file store in \(existing) (\(FileSystem.errorText())); nothing was asked of the issuer: make it writable, or choose another place (XDG_DATA_HOME, --store), and run login again")
            }
        }
    }

    /// Reserves the room a rotated document needs (twice the current file, and at least 16 KiB):
    /// on a full disk the refresh token is then never spent.
    @_spi(CredentialOwner) public func prepareWrite(_ profile: Profile, size: Int) throws -> PreparedWrite {
        let path = try writablePath(profile)
        var st = stat()
        let current = lstat(path, &st) == 0 ? Int(st.st_size) : 0
        let room = max(2 * max(current, size + 512), 16 * 1024)
        return ReservedWrite(store: self, profile: profile, reservation: try AtomicFile.reserve(beside: path, bytes: room))
    }

    /// A passphrase-protected file costs one scrypt (~0.7 s, 268 MB) to read: in passphrase mode
    /// (the variable set) or when the file's header holds an scrypt stanza.
    public func isExpensiveToRead(_ profile: Profile) -> Bool {
        if passphraseFile != nil { return true }
        guard let path = path(for: profile), let file = try? AtomicFile.read(path, maxBytes: AgeFileStore.maxFileBytes),
              let header = try? AgeHeader.parse(file) else { return false }
        return header.isPassphraseProtected
    }

    /// dev, inode, size and modification time of the file: an atomic replace always changes the inode.
    public func version(_ profile: Profile) throws -> [UInt8]? {
        let dir = try requireDirectory()
        var st = stat()
        guard lstat(Paths.encryptedFile(in: dir, for: profile), &st) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw CredentialError.storeFailure("cannot access \(Paths.encryptedFile(in: dir, for: profile)): \(FileSystem.errorText())")
        }
        return Self.version(of: st)
    }

    private static func version(of st: stat) -> [UInt8] {
        Array("\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)".utf8)
    }

    private final class ReservedWrite: PreparedWrite {
        let store: AgeFileStore
        let profile: Profile
        let reservation: AtomicFile.Reservation
        init(store: AgeFileStore, profile: Profile, reservation: AtomicFile.Reservation) {
            self.store = store; self.profile = profile; self.reservation = reservation
        }
        func commit(_ secret: borrowing SecretBytes) throws {
            try store.encryptForWrite(secret, at: reservation.path, profile: profile).withUnsafeBytes { try reservation.commit($0) }
        }
    }

    /// The profile's file path, its directory made (0700) and checked.
    private func writablePath(_ profile: Profile) throws -> String {
        let dir = try requireDirectory()
        try AtomicFile.checkDirectory(dir, create: true)
        return Paths.encryptedFile(in: dir, for: profile)
    }

    /// `secret` encrypted for the file at `path`: to the passphrase when passphrase mode applies,
    /// else to the identity (created on first use).
    private func encryptForWrite(_ secret: borrowing SecretBytes, at path: String, profile: Profile) throws -> [UInt8] {
        // Also refuses a symlink or a loose file at the path before anything changes.
        let existing = try readEncrypted(path, profile)
        let existingHeader = existing.flatMap { try? AgeHeader.parse($0) }
        let recipient: AgeRecipient
        if passphraseFile != nil || existingHeader?.isPassphraseProtected == true {
            try obtainPassphrase(for: path, verifyAgainst: existingHeader?.isPassphraseProtected == true ? existing : nil,
                                 profile: profile)
            recipient = ScryptRecipient(passphrase: passphrase.duplicate(), workFactor: scryptWorkFactor)
        } else {
            recipient = try loadOrCreateIdentity().recipient
        }
        return AgeFile.encrypt(secret, to: [recipient])
    }

    @discardableResult
    @_spi(CredentialOwner) public func delete(_ profile: Profile) throws -> Bool {
        let dir = try requireDirectory()
        guard try AtomicFile.checkDirectory(dir, create: false) else { return false }
        return try AtomicFile.remove(Paths.encryptedFile(in: dir, for: profile))
    }

    public func profiles() throws -> [String] {
        let dir = try requireDirectory()
        guard try AtomicFile.checkDirectory(dir, create: false) else { return [] }
        guard let d = opendir(dir) else {
            throw CredentialError.storeFailure("cannot list \(dir): \(FileSystem.errorText())")
        }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = FileSystem.entryName(entry)
            guard name.hasSuffix(".age") else { continue }
            let stem = String(name.dropLast(4))
            if Profile.isValid(stem) { names.append(stem) }
        }
        return names.sorted()
    }

    // MARK: decryption

    private func decrypt(_ file: [UInt8], path: String, profile: Profile) throws -> SecretBytes {
        let recovery = "restore the right key, or \(profile.removeDamagedHint)"
        let header: AgeHeader
        do { header = try AgeHeader.parse(file) } catch let e as AgeError {
            throw e.credentialError(path: path, keyHint: "", recovery: recovery)
        }
        if header.isPassphraseProtected {
            var wrong = 0
            while true {
                try obtainPassphrase(for: path, verifyAgainst: nil, profile: profile, wrongSoFar: wrong)
                do {
                    return try AgeFile.decrypt(file, identities: [ScryptIdentity(passphrase: passphrase.duplicate())])
                } catch AgeError.noMatch {
                    // A wrong passphrase is "try again", never advice to erase (man page, STORES).
                    if let file = passphraseFile {
                        throw CredentialError.wrongKey("the passphrase in \(file) does not open \(path); put the passphrase it was saved with on that file's first line and try again")
                    }
                    passphrase = SecretBytes()
                    wrong += 1
                    if interactive && wrong < Self.passphraseTries { continue }
                    throw CredentialError.wrongKey("wrong passphrase for \(path) (\(wrong) \(wrong == 1 ? "try" : "tries")); try again with the passphrase it was saved with")
                } catch let e as AgeError {
                    let source = passphraseFile.map { "the passphrase in \($0)" } ?? "the passphrase entered"
                    throw e.credentialError(path: path, keyHint: source,
                                            recovery: "check the passphrase, or \(profile.removeDamagedHint)")
                }
            }
        }
        let idPath = try requireIdentityPath()
        guard let identities = try loadIdentities() else {
            throw CredentialError.wrongKey("\(path) is encrypted to an age identity but \(idPath) does not exist; \(recovery)")
        }
        do {
            return try AgeFile.decrypt(file, identities: identities)
        } catch let e as AgeError {
            throw e.credentialError(path: path, keyHint: "the identity in \(idPath)", recovery: recovery)
        }
    }

    // MARK: identity

    /// The identities in the identity file, nil when there is none.
    func loadIdentities() throws -> [X25519Identity]? {
        let idPath = try requireIdentityPath()
        let dir = AtomicFile.split(idPath).dir
        guard try AtomicFile.checkDirectory(dir, create: false) else { return nil }
        guard let text = try AtomicFile.readSecret(idPath, maxBytes: 64 * 1024) else { return nil }
        // Lines are parsed in place: the key's text never leaves the SecretBytes it was read into.
        let identities: [X25519Identity] = try text.withUnsafeBytes { raw in
            var found: [X25519Identity] = []
            for rawLine in raw.split(separator: 10, omittingEmptySubsequences: true) {
                var line = rawLine
                if line.last == 13 { line = line.dropLast() }
                if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
                guard let id = X25519Identity(parsing: UnsafeRawBufferPointer(rebasing: line)) else {
                    throw CredentialError.storeCorrupt("\(idPath) is not an age identity file (expected AGE-SECRET-KEY-1… lines); restore it from a backup")
                }
                found.append(id)
            }
            return found
        }
        guard !identities.isEmpty else {
            throw CredentialError.storeCorrupt("\(idPath) holds no age identity; restore it from a backup")
        }
        return identities
    }

    /// The identity to encrypt to, creating it (exclusively) when there is none.
    func loadOrCreateIdentity() throws -> X25519Identity {
        if let ids = try loadIdentities() { return ids[0] }
        let idPath = try requireIdentityPath()
        try AtomicFile.checkDirectory(AtomicFile.split(idPath).dir, create: true)
        let identity = X25519Identity.generate()
        var text = SecretBytes(capacity: 192)
        text.append(utf8: "# created: \(Clock.rfc3339(Clock.now()))\n# public key: \(identity.recipient.encoded)\n")
        text.append(identity.encoded())
        text.append(utf8: "\n")
        if try text.withUnsafeBytes({ try AtomicFile.createExclusive(idPath, with: $0) }) { return identity }
        // Another process created it first: use that one.
        guard let ids = try loadIdentities() else {
            throw CredentialError.storeFailure("\(idPath) vanished while being created; try again")
        }
        return ids[0]
    }

    // MARK: passphrase

    /// How many passphrases a terminal is asked for before a wrong one is given up on.
    static let passphraseTries = 3

    /// Makes `passphrase` hold the passphrase: cached, from the passphrase file (or the systemd
    /// credential, which the executable names the same way), or prompted. A prompted passphrase is
    /// checked against `verifyAgainst` (the existing file) before it is used to write; on a
    /// terminal a wrong one is asked again, `passphraseTries` times in all. `wrongSoFar`: wrong
    /// answers already given for this file (the prompt says so).
    private func obtainPassphrase(for path: String, verifyAgainst existing: [UInt8]?, profile: Profile, wrongSoFar: Int = 0) throws {
        if !passphrase.isEmpty { return }
        if let file = passphraseFile {
            passphrase = try AgeFileStore.readPassphraseFile(file)
            return
        }
        guard interactive else {
            throw CredentialError.storeUnavailable(
                "\(path) is protected by a passphrase; set CHATGPT_CREDENTIAL_PASSPHRASE_FILE to a file (mode 600) holding it (in a systemd unit: LoadCredential=chatgpt-credential.passphrase:FILE), or run interactively")
        }
        var wrong = wrongSoFar
        while true {
            let left = Self.passphraseTries - wrong
            let p = try promptPassphrase(wrong == 0 ? "Passphrase for \(path): "
                                         : "Wrong passphrase; try again (\(left) \(left == 1 ? "try" : "tries") left). Passphrase for \(path): ")
            guard !p.isEmpty else { throw CredentialError.storeUnavailable("no passphrase entered for \(path)") }
            if let existing {
                do { _ = try AgeFile.decrypt(existing, identities: [ScryptIdentity(passphrase: p.duplicate())]) } catch AgeError.noMatch {
                    wrong += 1
                    if wrong < Self.passphraseTries { continue }
                    throw CredentialError.wrongKey("wrong passphrase for \(path) (\(wrong) tries); try again with the passphrase it was saved with")
                } catch {
                    // A damaged file is being replaced anyway; the passphrase could not be checked.
                }
            }
            passphrase = p
            return
        }
    }

    /// The checks a read makes of the passphrase file (it exists, this user's, closed to group
    /// and others, a first line), for `doctor`; what it read is wiped at once.
    public static func checkPassphraseFile(_ file: String) throws {
        _ = try readPassphraseFile(file)
    }

    static func readPassphraseFile(_ file: String) throws -> SecretBytes {
        // Symlinks are followed here (secret managers mount them so); the target's mode is checked.
        guard var line = try AtomicFile.readSecret(file, maxBytes: 64 * 1024, followSymlinks: true) else {
            throw CredentialError.storeUnavailable(
                "CHATGPT_CREDENTIAL_PASSPHRASE_FILE names \(file), which does not exist; create it (mode 600) or unset the variable")
        }
        // The first line, LF or CRLF stripped, cut in place (what is cut is wiped).
        var end = line.withUnsafeBytes { $0.firstIndex(of: 10) ?? $0.count }
        if end > 0, line.withUnsafeBytes({ $0[end - 1] }) == 13 { end -= 1 }
        line.truncate(to: end)
        guard !line.isEmpty else {
            throw CredentialError.storeUnavailable("the passphrase file \(file) is empty; put the passphrase on its first line")
        }
        return line
    }
}

@_spi(CredentialOwner)
extension AgeFileStore: CredentialStoreWriting {}
