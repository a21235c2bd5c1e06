import Testing
@testable import Secrets
#if canImport(Glibc)
import Glibc
#endif

@Suite struct SecretBytesTests {
    func contents(_ s: borrowing SecretBytes) -> [UInt8] { s.withUnsafeBytes { Array($0) } }

    @Test func holdsWhatItWasMadeFrom() {
        var source: [UInt8] = [1, 2, 3, 250]
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 1)
        defer { raw.deallocate() }
        raw.copyBytes(from: source)
        let s = SecretBytes(copying: UnsafeRawBufferPointer(raw))
        raw[0] = 9 // a copy, not a view
        source[0] = 9
        let count = s.count, bytes = contents(s)
        #expect(count == 4)
        #expect(bytes == [1, 2, 3, 250])
        let utf8 = contents(SecretBytes(copying: "héllo".utf8)), zeros = contents(SecretBytes(zeros: 5))
        #expect(utf8 == Array("héllo".utf8))
        #expect(zeros == [0, 0, 0, 0, 0])
        let array = SecretBytes(copying: [7, 8]).unsafeArray(), text = SecretBytes(copying: "a=b".utf8).unsafeString()
        #expect(array == [7, 8])
        #expect(text == "a=b")
    }

    @Test func randomValuesHaveTheirLengthAndDiffer() {
        let a = SecretBytes(randomCount: 32), b = SecretBytes(randomCount: 32)
        let count = a.count, same = a.equals(b), bytes = contents(a)
        #expect(count == 32)
        #expect(!same)
        #expect(bytes != [UInt8](repeating: 0, count: 32))
    }

    @Test func equalsComparesContentAndLength() {
        let a = SecretBytes(copying: [1, 2, 3])
        let results = [a.equals(SecretBytes(copying: [1, 2, 3])), a.equals(SecretBytes(copying: [1, 2, 4])),
                       a.equals(SecretBytes(copying: [1, 2])), a.equals(SecretBytes()),
                       SecretBytes().equals(SecretBytes(capacity: 10))]
        #expect(results == [true, false, false, false, true])
    }

    @Test func zeroSizeValuesWork() {
        let empty = SecretBytes()
        let count = empty.count, isEmpty = empty.isEmpty, viewed = empty.withUnsafeBytes { $0.count }
        let array = empty.unsafeArray(), text = empty.unsafeString()
        #expect(count == 0 && isEmpty && viewed == 0)
        #expect(array == [] && text == "")
        let copied = SecretBytes(copying: [UInt8]()).isEmpty, random = SecretBytes(randomCount: 0).isEmpty
        #expect(copied && random)
        var grown = SecretBytes()
        grown.append(42)
        let bytes = contents(grown)
        #expect(bytes == [42])
    }

    @Test func appendingGrowsAndKeepsEverything() {
        var s = SecretBytes(capacity: 3)
        var expected: [UInt8] = []
        for i in 0..<1000 {
            let b = UInt8(truncatingIfNeeded: i &* 7)
            if i % 3 == 0 { s.append(b) } else { [b].withUnsafeBytes { s.append($0) } }
            expected.append(b)
        }
        s.append(utf8: "xyz")
        s.append(SecretBytes(copying: [1, 2]))
        let bytes = contents(s)
        #expect(bytes == expected + Array("xyz".utf8) + [1, 2])
    }

    @Test func appendUpToKeepsWhatWasWrittenAndNothingOnAThrow() throws {
        var s = SecretBytes(copying: [1])
        s.append(upTo: 100) { room in
            room.storeBytes(of: 2, toByteOffset: 0, as: UInt8.self)
            room.storeBytes(of: 3, toByteOffset: 1, as: UInt8.self)
            return 2
        }
        let before = contents(s)
        #expect(before == [1, 2, 3])
        struct Boom: Error {}
        var threw = false
        do { try s.append(upTo: 10) { _ in throw Boom() } } catch is Boom { threw = true }
        let after = contents(s)
        #expect(threw)
        #expect(after == [1, 2, 3])
    }

    @Test func truncateWipesWhatItCuts() {
        var s = SecretBytes(copying: [9, 9, 9, 9])
        // The region stays mapped (capacity is unchanged): look at the cut bytes through the old pointer.
        let base = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        s.truncate(to: 1)
        let kept = contents(s)
        #expect(kept == [9])
        #expect((1..<4).map { base.load(fromByteOffset: $0, as: UInt8.self) } == [0, 0, 0])
    }

    @Test func mutableAccessWritesInPlace() {
        var s = SecretBytes(zeros: 3)
        s.withUnsafeMutableBytes { $0[1] = 5 }
        let bytes = contents(s)
        #expect(bytes == [0, 5, 0])
    }

    // MARK: the guarded allocation itself

    /// Runs `probe` in a forked child with the default SIGSEGV/SIGBUS action and no core file,
    /// and returns the signal that ended it (0 when it exited normally). The child does nothing
    /// but the probe (no allocation, no locks), which is what is safe after fork() in a threaded
    /// process.
    /// Runs `probe` in a forked child (SIGSEGV and SIGBUS fatal, no core file), which exits with
    /// what it returns; its wait status.
    func childStatus(_ probe: () -> Int32) -> Int32 {
        let pid = fork()
        if pid == 0 {
            signal(SIGSEGV, SIG_DFL)
            signal(SIGBUS, SIG_DFL)
            var none = rlimit(rlim_cur: 0, rlim_max: 0)
            setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
            _exit(probe())
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    /// The signal that ended a child running `probe`; 0 when it finished.
    func signalEndingChild(_ probe: () -> Void) -> Int32 {
        childStatus { probe(); return 0 } & 0x7F
    }

    /// After a value's region is released: reading its old address faults (the pages are
    /// unmapped), or — when another test's thread has been given the same address meanwhile, as
    /// the suites run in parallel in one process — finds anything but the old secret. True when
    /// the old bytes can still be read there.
    func staleSecretReadable(at address: UnsafeRawPointer, _ secret: [UInt8]) -> Bool {
        let status = childStatus { (0..<secret.count).map { address.load(fromByteOffset: $0, as: UInt8.self) } == secret ? 3 : 0 }
        return status & 0x7F == 0 && (status >> 8) & 0xFF == 3
    }

    @Test func oneBytePastTheEndFaults() {
        let s = SecretBytes(copying: [UInt8](repeating: 1, count: 100))
        let base = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        // Control: the last byte is readable in the child.
        #expect(signalEndingChild { _ = base.load(fromByteOffset: 99, as: UInt8.self) } == 0)
        #expect(signalEndingChild { _ = base.load(fromByteOffset: 100, as: UInt8.self) } == SIGSEGV)
    }

    @Test func thePageBeforeTheRegionFaults() {
        let s = SecretBytes(copying: [UInt8](repeating: 1, count: 100))
        let base = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        // The region's readable pages begin at the page holding the canary, 16 bytes before the start.
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let regionStart = UnsafeRawPointer(bitPattern: (UInt(bitPattern: base) - 16) / page * page)!
        #expect(signalEndingChild { _ = regionStart.load(as: UInt8.self) } == 0)
        #expect(signalEndingChild { _ = regionStart.load(fromByteOffset: -1, as: UInt8.self) } == SIGSEGV)
    }

    @Test func aWriteJustBeforeTheStartStopsTheProcessWhenTheValueGoes() {
        let control = childStatus {
            let s = SecretBytes(copying: [UInt8](repeating: 1, count: 100))
            _ = s.withUnsafeBytes { $0.baseAddress!.load(fromByteOffset: -1, as: UInt8.self) }
            return 0
        }
        #expect(control == 0)
        let status = childStatus {
            let s = SecretBytes(copying: [UInt8](repeating: 1, count: 100))
            s.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress!).storeBytes(of: 0x55, toByteOffset: -1, as: UInt8.self) }
            return 0
        }
        // Swift's fatalError traps (ud2): SIGILL, before the region is wiped and unmapped.
        #expect(status & 0x7F == SIGILL, "wait status \(status)")
    }

    @Test func anEmptyValueMapsNothingUntilItGrows() {
        var s = SecretBytes()
        let capacity = s.capacity, base = s.withUnsafeBytes { $0.baseAddress }
        #expect(capacity == 0 && base == nil)
        s.append(7)
        let grown = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        let bytes = contents(s)
        #expect(bytes == [7])
        // Once it holds a byte it is guarded like any other value.
        #expect(signalEndingChild { _ = grown.load(fromByteOffset: 0, as: UInt8.self) } == 0)
        let end = s.capacity
        #expect(signalEndingChild { _ = grown.load(fromByteOffset: end, as: UInt8.self) } == SIGSEGV)
    }

    @Test func movingToALargerRegionReleasesTheOldOne() {
        var s = SecretBytes(copying: [1, 2, 3])
        let old = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        s.reserveCapacity(5000)
        let bytes = contents(s)
        #expect(bytes == [1, 2, 3])
        #expect(!staleSecretReadable(at: old, [1, 2, 3]))
    }

    @Test func releasedValuesCannotBeReadBack() {
        var address: UnsafeRawPointer? = nil
        do {
            let s = SecretBytes(copying: [1, 2, 3])
            address = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
            #expect(signalEndingChild { _ = address!.load(as: UInt8.self) } == 0)
        }
        // deinit wiped the region and made it inaccessible (a spare) or unmapped it.
        #expect(!staleSecretReadable(at: address!, [1, 2, 3]))
    }

    /// Runs `body` on a new thread, which has no spare regions yet, and waits for it to end (and
    /// so for its spares to be unmapped).
    func onNewThread(_ body: @escaping () -> Void) {
        final class Work { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
        var thread = pthread_t()
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        let made = pthread_create(&thread, nil, { raw in
            Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, work)
        precondition(made == 0, "pthread_create: \(made)")
        pthread_join(thread, nil)
    }

    /// Where a value of `count` bytes, made and released on this thread, had its bytes.
    func addressOfAReleasedValue(_ count: Int) -> UnsafeRawPointer {
        let s = SecretBytes(copying: [UInt8](repeating: 0xA5, count: count))
        return s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
    }

    /// A mapping that is a kept spare: inaccessible and (where mlock worked) locked.
    func isSpare(_ m: (residentKB: Int, flags: [String])?) -> Bool {
        guard let m else { return false }
        return !m.flags.contains("rd") && !m.flags.contains("wr") && m.flags.contains("lo")
    }

    final class Seen: @unchecked Sendable {
        var kept: (residentKB: Int, flags: [String])?
        var keptFaults: Int32 = 0
        var first: UnsafeRawPointer?
        var second: UnsafeRawPointer?
        var secondContents: [UInt8] = []
        var pastSecondEndFaults: Int32 = 0
        var large: UnsafeRawPointer?
        var largeAfterRelease: (residentKB: Int, flags: [String])?
        var releasedContents: [UInt8] = []
        var closed: (residentKB: Int, flags: [String])?
    }

    @Test func aSmallReleasedRegionWaitsWipedAndInaccessibleForItsThreadsNextValue() {
        let seen = Seen()
        onNewThread { [self] in
            seen.first = addressOfAReleasedValue(100)
            seen.kept = mapping(of: seen.first!)
            seen.keptFaults = signalEndingChild { _ = seen.first!.load(as: UInt8.self) }
            let next = SecretBytes(zeros: 100)
            let second = next.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
            seen.second = second
            seen.secondContents = contents(next)
            seen.pastSecondEndFaults = signalEndingChild { _ = second.load(fromByteOffset: 100, as: UInt8.self) }
        }
        let kept = seen.kept
        #expect(kept != nil && !kept!.flags.contains("rd") && !kept!.flags.contains("wr"), "released: \(String(describing: kept))")
        #expect(kept?.flags.contains("dd") == true, "still out of core files: \(String(describing: kept))")
        if geteuid() == 0 { #expect(kept?.flags.contains("lo") == true, "still locked: \(String(describing: kept))") }
        #expect(seen.keptFaults == SIGSEGV)
        // The thread's next value of that size is the same region, open again, wiped, still guarded.
        #expect(seen.second == seen.first)
        #expect(seen.secondContents == [UInt8](repeating: 0, count: 100))
        #expect(seen.pastSecondEndFaults == SIGSEGV)
    }

    /// The broker's loop thread: a released region waits wiped but open (no `mprotect` either
    /// way), still locked and out of core files, and the next value of its size takes it. Other
    /// threads are unchanged.
    @Test func onAThreadThatKeepsSparesOpenAReleasedRegionWaitsWipedAndOpen() {
        let seen = Seen()
        onNewThread { [self] in
            SecretBytes.keepReleasedRegionsOpen(onThisThread: true)
            seen.first = addressOfAReleasedValue(100)
            seen.kept = mapping(of: seen.first!)
            // Read only where it is open: an inaccessible spare would stop the test process.
            if seen.kept?.flags.contains("rd") == true {
                seen.releasedContents = (0..<100).map { seen.first!.load(fromByteOffset: $0, as: UInt8.self) }
            }
            let next = SecretBytes(zeros: 100)
            let second = next.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
            seen.second = second
            seen.secondContents = contents(next)
            seen.pastSecondEndFaults = signalEndingChild { _ = second.load(fromByteOffset: 100, as: UInt8.self) }
            // Turned off again: the thread's open spare is made inaccessible.
            _ = consume next
            SecretBytes.keepReleasedRegionsOpen(onThisThread: false)
            seen.closed = mapping(of: second)
            seen.keptFaults = signalEndingChild { _ = second.load(as: UInt8.self) }
        }
        #expect(seen.closed != nil && !seen.closed!.flags.contains("rd"), "closed: \(String(describing: seen.closed))")
        #expect(seen.keptFaults == SIGSEGV)
        let kept = seen.kept
        #expect(kept?.flags.contains("rd") == true && kept?.flags.contains("wr") == true, "kept open: \(String(describing: kept))")
        #expect(kept?.flags.contains("dd") == true, "still out of core files: \(String(describing: kept))")
        if geteuid() == 0 { #expect(kept?.flags.contains("lo") == true, "still locked: \(String(describing: kept))") }
        #expect(seen.releasedContents == [UInt8](repeating: 0, count: 100), "released, so wiped")
        #expect(seen.second == seen.first)
        #expect(seen.secondContents == [UInt8](repeating: 0, count: 100))
        #expect(seen.pastSecondEndFaults == SIGSEGV)
        // Another thread still makes its spares inaccessible.
        let other = Seen()
        onNewThread { [self] in
            other.first = addressOfAReleasedValue(100)
            other.kept = mapping(of: other.first!)
        }
        #expect(other.kept != nil && !other.kept!.flags.contains("rd"), "\(String(describing: other.kept))")
    }

    @Test func aThreadsSparesAreUnmappedWhenItEnds() {
        guard geteuid() == 0 else { return } // a spare is told apart by its lock
        let seen = Seen()
        onNewThread { [self] in
            seen.first = addressOfAReleasedValue(100)
            seen.kept = mapping(of: seen.first!)
        }
        // Control: while the thread ran, the region was kept.
        #expect(isSpare(seen.kept), "\(String(describing: seen.kept))")
        var after = mapping(of: seen.first!)
        for _ in 0..<5 where isSpare(after) { after = mapping(of: seen.first!) }
        #expect(!isSpare(after), "left mapped after its thread ended: \(String(describing: after))")
    }

    @Test func aLargeReleasedRegionIsUnmapped() {
        guard geteuid() == 0 else { return }
        let seen = Seen()
        onNewThread { [self] in
            seen.first = addressOfAReleasedValue(100)
            seen.kept = mapping(of: seen.first!)
            seen.large = addressOfAReleasedValue(64 * 1024)
            seen.largeAfterRelease = mapping(of: seen.large!)
        }
        // Control: the small one was kept.
        #expect(isSpare(seen.kept), "\(String(describing: seen.kept))")
        #expect(!isSpare(seen.largeAfterRelease), "kept: \(String(describing: seen.largeAfterRelease))")
    }

    /// The mapping holding `address`, from /proc/self/smaps: its `Rss:` size in kB and its VmFlags.
    /// (Not `Locked:`: that is a proportional size, halved while another test's fork(2) shares the
    /// page until its exec, so it is 2 kB for a locked 4 kB page at such a moment.)
    func mapping(of address: UnsafeRawPointer) -> (residentKB: Int, flags: [String])? {
        let fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var text: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            text += chunk[0..<n]
        }
        let target = UInt(bitPattern: address)
        var inside = false
        var resident: Int?
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                let ends = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = ends.count == 2 && ends[0] <= target && target < ends[1]
                continue
            }
            guard inside else { continue }
            if fields.first == "Rss:", fields.count >= 2 { resident = Int(fields[1]) }
            if fields.first == "VmFlags:" { return (resident ?? 0, fields.dropFirst().map(String.init)) }
        }
        return nil
    }

    @Test func theBytesAreLockedAndKeptOutOfCoreFiles() throws {
        let s = SecretBytes(copying: [UInt8](repeating: 3, count: 64))
        let base = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        // smaps is generated piecemeal while other tests map and unmap: look again if a read missed it.
        var found = mapping(of: base)
        for _ in 0..<5 where found == nil { found = mapping(of: base) }
        let m = try #require(found)
        #expect(m.flags.contains("dd"), "MADV_DONTDUMP: \(m.flags)")
        // mlock can fail under a small RLIMIT_MEMLOCK (libsodium then goes on unlocked); as root
        // or with room under the limit it must have worked.
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &limit)
        if geteuid() == 0 || limit.rlim_cur == rlim_t.max {
            #expect(m.flags.contains("lo"), "mlock: \(m.flags)")
            #expect(m.residentKB >= 4, "a locked page is resident: \(m.residentKB) kB")
        }
    }
}
