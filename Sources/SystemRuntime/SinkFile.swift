import CredentialCore
import Secrets
import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// The files of sinks (man page, SINKS): written atomically beside themselves (temp file, fsync,
/// rename), mode 0600, only in a directory the user owns and others cannot write, never through a
/// symlink; and rewritten or removed only while they still hold what this tool last wrote there
/// (compare-and-swap by a rename-exchange and a check of what was swapped out).
public enum SinkFile {
    /// What a rewrite or a removal found.
    public enum Outcome: Equatable, Sendable {
        /// Written (or removed) as asked.
        case done
        /// Another program changed what stands there: left as it was.
        case changed
        /// Nothing stands there (another program removed it): not recreated.
        case absent
    }

    /// The largest sink file read back (an `auth.json` with three JWTs is a few KiB).
    static let maxBytes = 256 * 1024

    /// Refuses a directory a sink must not be written in: not a directory, another user's, or
    /// writable by group or others (exit 2). With `create`, a missing one is made (0700) with its
    /// missing parents. False when it does not exist and was not made.
    @discardableResult
    public static func checkDirectory(_ dir: String, create: Bool) throws -> Bool {
        var st = stat()
        if stat(dir, &st) != 0 {
            guard errno == ENOENT else { throw CredentialError.storeFailure("cannot access \(dir): \(FileSystem.errorText())") }
            guard create else { return false }
            try AtomicFile.makeDirectories(dir)
            guard stat(dir, &st) == 0 else { throw CredentialError.storeFailure("cannot access \(dir): \(FileSystem.errorText())") }
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw CredentialError.usage("\(dir) is not a directory; a sink's path must name a file in a directory", namesItsHelp: true)
        }
        guard st.st_uid == ProcessUser.effectiveID else {
            throw CredentialError.usage("\(dir) belongs to another user (uid \(st.st_uid)); a sink is written only in a directory you own", namesItsHelp: true)
        }
        guard st.st_mode & 0o022 == 0 else {
            throw CredentialError.usage("\(dir) is writable by group or others (another user could swap the file); refusing to write a sink there: chmod go-w \(dir)", namesItsHelp: true)
        }
        return true
    }

    /// The contents of the sink file at `path` (never following a symlink), nil when there is none.
    /// Refuses (exit 2) a symlink, anything but a regular file, and another user's file.
    public static func read(_ path: String) throws -> SecretBytes? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 {
            let e = errno
            if e == ENOENT { return nil }
            if e == ELOOP { throw CredentialError.usage("\(path) is a symbolic link; a sink never follows one (give the path of the file itself)", namesItsHelp: true) }
            throw CredentialError.storeFailure("cannot open \(path): \(FileSystem.errorText(e))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw CredentialError.storeFailure("cannot stat \(path): \(FileSystem.errorText())") }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw CredentialError.usage("\(path) is not a regular file; refusing to use it as a sink", namesItsHelp: true)
        }
        guard st.st_uid == ProcessUser.effectiveID else {
            throw CredentialError.usage("\(path) belongs to another user (uid \(st.st_uid)); refusing to use it as a sink", namesItsHelp: true)
        }
        var out = SecretBytes(capacity: min(max(Int(st.st_size), 0), maxBytes) + 1)
        guard try FileSystem.readToEnd(fd, into: &out, limit: maxBytes, failure: { .storeFailure("cannot read \(path): \(FileSystem.errorText($0))") }) else {
            throw CredentialError.usage("\(path) is larger than any sink file; refusing to use it as a sink", namesItsHelp: true)
        }
        return out
    }

    /// The digest (`SinkRendering.digest`) of what stands at `path`; nil when nothing does.
    public static func digest(_ path: String) throws -> String? {
        guard let bytes = try read(path) else { return nil }
        return SinkRendering.digest(bytes)
    }

    /// Creates `path` holding `bytes` only if nothing stands there; false when something does.
    public static func create(_ path: String, with bytes: borrowing SecretBytes) throws -> Bool {
        try bytes.withUnsafeBytes { try AtomicFile.createExclusive(path, with: $0) }
    }

    /// Replaces `path` with `bytes` only while it holds what `isOurs` accepts (its digest). The new
    /// file is swapped in with a rename-exchange and what was swapped out is checked: ours is
    /// unlinked; anything else is swapped back, so a write by another program is never lost (if it
    /// wrote again in between, its newer file is what stays).
    public static func replace(_ path: String, with bytes: borrowing SecretBytes, isOurs: (String) -> Bool) throws -> Outcome {
        try bytes.withUnsafeBytes { try replace(path, with: $0, isOurs: isOurs) }
    }

    /// `replace` from bytes the caller holds in guarded memory (a planned rewrite's token), without
    /// a copy of them.
    public static func replace(_ path: String, with bytes: UnsafeRawBufferPointer, isOurs: (String) -> Bool) throws -> Outcome {
        let (dir, _) = AtomicFile.split(path)
        guard try checkDirectory(dir, create: false) else { return .absent }
        let ours = SinkRendering.digest(bytes)
        let tmp = try AtomicFile.writeTemp(bytes, beside: path)
        if cs_rename_exchange(tmp, path) != 0 {
            let e = errno
            if e == ENOENT { unlink(tmp); return .absent }
            guard e == EINVAL || e == ENOSYS else {
                unlink(tmp)
                throw CredentialError.storeFailure("cannot replace \(path): \(FileSystem.errorText(e))")
            }
            // A filesystem without the exchange: check, then rename (a narrower window).
            guard let current = try? digest(path) else { unlink(tmp); return .absent }
            guard isOurs(current) else { unlink(tmp); return .changed }
            guard rename(tmp, path) == 0 else {
                let e = errno
                unlink(tmp)
                throw CredentialError.storeFailure("cannot replace \(path): \(FileSystem.errorText(e))")
            }
            try AtomicFile.fsyncDirectory(dir)
            return .done
        }
        // `tmp` now names what stood at `path`.
        if let old = try? digest(tmp), isOurs(old) {
            unlink(tmp)
            try AtomicFile.fsyncDirectory(dir)
            return .done
        }
        // Not ours: put it back. What each exchange brings out of `path` is checked against what
        // was put there: anything else is a newer write by the other program, which is exchanged
        // back in its turn, so its newest file is the one that stays.
        var expected = ours
        var inTmp = (try? digest(tmp)) ?? ""
        for _ in 0..<16 {
            guard cs_rename_exchange(tmp, path) == 0 else { break }
            let out = (try? digest(tmp)) ?? ""
            if Sodium.equal(out, expected) { unlink(tmp); return .changed }
            expected = inTmp
            inTmp = out
        }
        unlink(tmp) // a writer that never stops: the file it last wrote stands at `path`
        return .changed
    }

    /// Removes `path` only while it holds what `isOurs` accepts: it is renamed aside first, checked,
    /// and put back when it is not ours.
    public static func remove(_ path: String, isOurs: (String) -> Bool) throws -> Outcome {
        let (dir, base) = AtomicFile.split(path)
        let aside = "\(dir)/\(AtomicFile.tempName(base: base, pid: getpid(), random: Sodium.random(6)))"
        if cs_rename_noreplace(path, aside) != 0 {
            let e = errno
            if e == ENOENT { return .absent }
            if e == EINVAL || e == ENOSYS {
                guard let current = try digest(path) else { return .absent }
                guard isOurs(current) else { return .changed }
                return try AtomicFile.remove(path) ? .done : .absent
            }
            throw CredentialError.storeFailure("cannot remove \(path): \(FileSystem.errorText(e))")
        }
        if let d = try? digest(aside), isOurs(d) {
            unlink(aside)
            try AtomicFile.fsyncDirectory(dir)
            return .done
        }
        if cs_rename_noreplace(aside, path) != 0 { unlink(aside) } // a newer file stands there now: it stays
        return .changed
    }
}
