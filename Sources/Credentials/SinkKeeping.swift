import CredentialCore
import SystemRuntime
import Secrets
#if canImport(Glibc)
import Glibc
#endif

/// Sinks, on the owner's side (man page, SINKS): a profile's sinks live in its stored document,
/// and every write of that document through a `CredentialTransaction` rewrites the sinks whose
/// rendering changed, before the lock is released, each only while its file still holds what this
/// tool last wrote there (compare-and-swap, `SinkFile.replace`).
enum SinkKeeping {
    /// A sink to rewrite: the record as it was (what its file is checked against) and the bytes.
    struct Rewrite {
        let before: SinkRecord
        let after: SinkRecord
        let bytes: SecretToken
    }

    /// `document` with the digests of what its sinks are about to hold, and the rewrites to make
    /// once it is saved. A sink whose rendering is unchanged, or that has nothing to serve (an
    /// access token dropped), is left as it is.
    static func plan(_ document: TokenDocument) -> (TokenDocument, [Rewrite]) {
        guard !document.sinks.isEmpty else { return (document, []) }
        var next = document
        var rewrites: [Rewrite] = []
        for (i, record) in document.sinks.enumerated() {
            guard let bytes = SinkRendering.render(record.format, document) else { continue }
            let digest = SinkRendering.digest(bytes)
            guard !Sodium.equal(digest, record.digest) else { continue }
            var after = record
            // What the file holds now stays "ours": the last write, or — when that rewrite failed
            // (a full disk, a read-only mount) — still the one before it, so a second failure in a
            // row never makes the file look changed by another program.
            let lastWriteFailed = !record.previousDigest.isEmpty
                && (try? SinkFile.digest(record.path)).flatMap { $0 }.map { Sodium.equal($0, record.previousDigest) } == true
            after.previousDigest = lastWriteFailed ? record.previousDigest : record.digest
            after.digest = digest
            next.sinks[i] = after
            rewrites.append(Rewrite(before: record, after: after, bytes: SecretToken(bytes)))
        }
        return (next, rewrites)
    }

    /// What became of one rewrite.
    enum Outcome {
        /// Written (or, for a file another program changed or removed, left as it was).
        case file(SinkFile.Outcome)
        /// Not written: the reason (the file still holds the write before, `sink run` repairs it).
        case failed(String)
    }

    /// Makes the rewrites; each outcome is reported.
    static func rewrite(_ rewrites: [Rewrite], report: (SinkRecord, Outcome) -> Void) {
        for r in rewrites {
            do {
                let outcome = try r.bytes.withUnsafeBytes { raw in
                    try SinkFile.replace(r.after.path, with: raw, isOurs: r.before.isOurs)
                }
                report(r.after, .file(outcome))
            } catch let e as CredentialError {
                report(r.after, .failed(e.message))
            } catch {
                report(r.after, .failed("\(error)"))
            }
        }
    }

    /// A sink whose file still holds the write before the last one (a rewrite that failed, or a
    /// process that stopped between saving the document and rewriting the file): rewritten now.
    static func needsRepair(_ record: SinkRecord) -> Bool {
        guard !record.previousDigest.isEmpty, let found = try? SinkFile.digest(record.path) else { return false }
        return Sodium.equal(found, record.previousDigest) && !Sodium.equal(found, record.digest)
    }
}

/// What `sink list` and `status` say of a sink (man page, SINKS).
package enum SinkState: String, Sendable {
    case fresh
    case due
    case changed = "changed by another program"
    case error

    /// How to go on with a sink another program changed (man page, SINKS).
    package static func advice(_ record: SinkRecord, _ profile: Profile) -> String {
        let add = profile.command("sink add --format \(record.format.rawValue) --path \(record.path)")
        let takeOver = record.format.isAuthJSON ? " (with --take-over when it holds a sign-in of its own)" : " after removing the file"
        return "to keep it, run: \(add)\(takeOver); to stop keeping it, run: \(profile.command("sink remove \(record.path)"))"
    }

    /// The state of `record`'s file, for a credential `document`, at `now`.
    package static func of(_ record: SinkRecord, _ document: TokenDocument, now: Int64) -> SinkState {
        let found: String?
        do { found = try SinkFile.digest(record.path) } catch {
            // Not a regular file any more (a symbolic link, a directory put in its place): never
            // followed, and as for a refresh's rewrite, changed by another program.
            var st = stat()
            if lstat(record.path, &st) == 0, st.st_mode & S_IFMT != S_IFREG { return .changed }
            return .error
        }
        guard let found, record.isOurs(found) else { return .changed }
        guard Sodium.equal(found, record.digest) else { return .due } // the last rewrite did not happen
        let issued = document.lastRefresh > 0 ? document.lastRefresh : document.storedAt
        let due = SinkSchedule.due(expiresAt: document.expiresAt, issuedAt: issued, codex: record.format == .codex)
        return now >= due ? .due : .fresh
    }
}

extension CredentialOwner {
    /// A sink rewrite made or refused under the lock: an `--on-change` command is queued for after
    /// the lock; a file changed by another program is said once.
    func sinkRewritten(_ record: SinkRecord, _ outcome: SinkKeeping.Outcome) {
        switch outcome {
        case .file(.done):
            if !record.onChange.isEmpty { pendingOnChange.withLock { $0.append(record.onChange) } }
        case .file(.changed), .file(.absent):
            sinkNotice("notice: the sink \(record.path) was changed by another program since this tool wrote it; it is left as it is: \(SinkState.advice(record, profile))")
        case .failed(let reason):
            sinkNotice("notice: the sink \(record.path) could not be rewritten (\(reason)); it still holds the previous token until the next refresh or sink run")
        }
    }

    /// Runs the queued `--on-change` commands (no shell, 10 s each; a failure is said, never fatal).
    func runOnChangeCommands() {
        let commands = pendingOnChange.withLock { q in defer { q = [] }; return q }
        for argv in commands {
            switch Spawned.start(argv, childEnvironment: childEnvironment, quiet: true) {
            case .failure(let e):
                sinkNotice("notice: the sink's --on-change command \(argv[0]) could not be started: \(e.message)")
            case .success(let child):
                let deadline = Clock.monotonicMillis() + 10_000
                var state = child.poll()
                while state == .running, Clock.monotonicMillis() < deadline {
                    _ = Waiter.sleep(0.02, interrupt: nil)
                    state = child.poll()
                }
                if state == .running {
                    kill(child.pid, SIGKILL)
                    while child.poll() == .running { _ = Waiter.sleep(0.01, interrupt: nil) }
                    sinkNotice("notice: the sink's --on-change command \(argv[0]) did not finish within 10 s and was stopped")
                } else if state != .exited(0) {
                    sinkNotice("notice: the sink's --on-change command \(argv[0]) failed (\(state))")
                }
            }
        }
    }

    // MARK: sink add, remove, list

    /// What `sink add` found at the path and may replace: nothing, a file this tool wrote there
    /// for this profile, or (`--take-over`) the file whose digest is `takeOverDigest` together with
    /// the sign-in imported from it.
    package struct TakeOver {
        package let document: TokenDocument
        package let fileDigest: String
        package init(document: TokenDocument, fileDigest: String) { self.document = document; self.fileDigest = fileDigest }
    }

    /// `sink add`: registers `record` in the profile's document and writes its file, under the
    /// lock. Exit 3 when not signed in; exit 2 for a path that holds something this tool did not
    /// write (unless taken over). With `takeOver`, the profile's tokens become the file's (same
    /// account only) and the file no longer holds a refresh token.
    package func addSink(_ record: SinkRecord, takeOver: TakeOver?) throws -> SinkRecord {
        try transaction { tx in
            guard let current = try tx.locate(selector) else { throw CredentialError.notSignedIn(profile: profile.name) }
            var document = current.document
            if let takeOver {
                let theirs = takeOver.document.accountId, ours = document.accountId
                guard theirs.isEmpty || ours.isEmpty || theirs == ours else {
                    throw CredentialError.usage("\(record.path) holds the sign-in of another account (\(theirs)) than profile '\(profile.name)' (\(ours)); use another --profile", namesItsHelp: true)
                }
                var imported = takeOver.document
                imported.origin = .signIn // this tool owns the chain now: erase revokes it
                imported.sinks = document.sinks
                if imported.email.isEmpty { imported.email = document.email }
                if imported.plan.isEmpty { imported.plan = document.plan }
                if imported.accountId.isEmpty { imported.accountId = document.accountId }
                document = imported
            }
            let existing = document.sinks.firstIndex { $0.path == record.path }
            let (dir, _) = AtomicFile.split(record.path)
            try SinkFile.checkDirectory(dir, create: true)
            guard let bytes = SinkRendering.render(record.format, document) else {
                throw CredentialError.failure("the stored credential has no access token to write; run: \(profile.command("get")) first")
            }
            var added = record
            added.digest = SinkRendering.digest(bytes)
            added.previousDigest = ""
            // What stands there now decides whether it may be written: nothing, a file of ours
            // (written for this sink before), or the file taken over. `replacing` is the digest the
            // write is checked against.
            let found = try SinkFile.digest(record.path)
            let known = existing.map { document.sinks[$0] }
            var replacing: String?
            if let found {
                if let takeOver, Sodium.equal(found, takeOver.fileDigest) {
                    replacing = found // not kept as ours: the file it was is not this tool's
                } else if let known, known.isOurs(found) {
                    replacing = found
                    added.previousDigest = found
                } else {
                    throw CredentialError.usage("\(record.path) exists and was not written by this tool; refusing to replace it (remove it first, or choose another --path)", namesItsHelp: true)
                }
            }
            if let existing { document.sinks[existing] = added } else { document.sinks.append(added) }
            // The document first: a sink file never exists unregistered.
            guard try tx.write(document, to: current.store) else {
                throw CredentialError.storeFailure("the credential in \(current.store.location(for: profile)) was changed by another program meanwhile; nothing was changed, try again")
            }
            do {
                if let replacing {
                    guard try SinkFile.replace(record.path, with: bytes, isOurs: { Sodium.equal($0, replacing) }) == .done else {
                        throw CredentialError.usage("\(record.path) was changed by another program while the sink was being added; left as it is", namesItsHelp: true)
                    }
                } else if try !SinkFile.create(record.path, with: bytes) {
                    throw CredentialError.usage("\(record.path) appeared while the sink was being added; refusing to replace it", namesItsHelp: true)
                }
            } catch {
                // Not written: the document goes back to what it was, so a failed add registers
                // nothing (nor imports a taken-over sign-in).
                if let reread = try? tx.locate(selector), reread.store === current.store {
                    _ = try? tx.write(current.document, to: current.store)
                }
                throw error
            }
            return added
        }
    }

    /// `sink run`: rewrites, under the lock, every sink whose file still holds the write before the
    /// last one (`SinkKeeping.needsRepair`). True when one was rewritten.
    @discardableResult
    package func repairSinks() throws -> Bool {
        guard let located = try locate(), located.document.sinks.contains(where: SinkKeeping.needsRepair) else { return false }
        return try transaction { tx in
            guard let current = try tx.locate(selector) else { return false }
            var repaired = false
            for record in current.document.sinks where SinkKeeping.needsRepair(record) {
                guard let bytes = SinkRendering.render(record.format, current.document),
                      Sodium.equal(SinkRendering.digest(bytes), record.digest) else { continue }
                let previous = record.previousDigest
                let outcome: SinkKeeping.Outcome
                do {
                    outcome = .file(try SinkFile.replace(record.path, with: bytes, isOurs: { Sodium.equal($0, previous) }))
                } catch let e as CredentialError {
                    outcome = .failed(e.message)
                }
                sinkRewritten(record, outcome)
                if case .file(.done) = outcome { repaired = true }
            }
            return repaired
        }
    }

    /// What `sink remove` and `erase` did to one sink's file.
    package enum SinkRemoval: Equatable {
        case removed, leftChanged, alreadyGone
    }

    /// `sink remove PATH`: unregisters the sink and removes its file unless another program
    /// changed it (then the file is left). nil when the profile has no sink at `path`.
    package func removeSink(path: String) throws -> SinkRemoval? {
        try transaction { tx in
            guard let current = try tx.locate(selector) else { throw CredentialError.notSignedIn(profile: profile.name) }
            var document = current.document
            guard let i = document.sinks.firstIndex(where: { $0.path == path }) else { return nil }
            let record = document.sinks.remove(at: i)
            guard try tx.write(document, to: current.store) else {
                throw CredentialError.storeFailure("the credential in \(current.store.location(for: profile)) was changed by another program meanwhile; nothing was changed, try again")
            }
            return try Self.removeFile(record)
        }
    }

    /// Removes a sink's file unless another program changed it.
    static func removeFile(_ record: SinkRecord) throws -> SinkRemoval {
        switch try SinkFile.remove(record.path, isOurs: record.isOurs) {
        case .done: return .removed
        case .changed: return .leftChanged
        case .absent: return .alreadyGone
        }
    }

    /// The profile's sinks and their states (`sink list`, `status`), read without the lock. With
    /// `onlyIfCheap`, none when reading the store costs a passphrase (`status` answered from the
    /// access cache does not prompt for one just to list the sinks).
    package func sinks(onlyIfCheap: Bool = false) throws -> [(record: SinkRecord, state: SinkState)] {
        if onlyIfCheap, selector.store(of: selector.readKind(of: profile)).isExpensiveToRead(profile) { return [] }
        guard let located = try locate() else { return [] }
        return located.document.sinks.map { ($0, SinkState.of($0, located.document, now: now())) }
    }
}
