import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// The memory a `SecretBytes` value lives in: a mapping of its own, laid out as libsodium's
/// `sodium_malloc` lays out its regions (SECURITY.md "What is wiped in memory").
///
///     | guard page | slack … canary | the bytes | guard page |
///
/// The bytes end where the guard page after them begins (one byte past the end faults at once);
/// the 16 bytes before them hold this process's canary, checked when the region goes (a write
/// just before the start stops the process then); the page before the slack is a guard too.
/// The whole mapping is `MADV_DONTDUMP`; the readable pages are `mlock`ed (a failure under a
/// small `RLIMIT_MEMLOCK` is ignored, as libsodium ignores it: the value is still guarded and
/// wiped, only not locked). Releasing wipes the readable pages and makes them inaccessible, so a
/// stale pointer faults.
///
/// A new region takes four system calls (an inaccessible mapping, `madvise`, one `mprotect`
/// opening the middle, `mlock`) and `munmap` alone undoes it, where `sodium_malloc` and
/// `sodium_free` take ten (they build the guards by narrowing a read-write mapping, keep a page
/// that holds the size, and undo each step). A released region of at most `spareLimit` readable
/// bytes is not unmapped but kept, wiped and inaccessible (still locked, still out of core
/// files), for the next value of the same size made on the same thread: that value costs one
/// `mprotect` to make and one to release. Each thread keeps at most `sparesPerThread` such
/// regions, and unmaps them when it ends; a thread whose new region cannot be locked unmaps its
/// own first, so they never take a live value's share of `RLIMIT_MEMLOCK`. The broker's loop makes
/// a value for every cached answer (bench/results.md); being per thread, the spares need no lock.
/// A thread that asks for it (`keepSparesOpen`: the broker's loop, and nothing else) keeps its
/// spares wiped but open, so that its values cost no `mprotect` at all.
enum GuardedRegion {
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    private static let canaryCount = 16

    /// Random per process, so that a stray write cannot restore it by writing what it found.
    private static let canary: [UInt8] = {
        precondition(Sodium.ready, "libsodium failed to initialise")
        return Sodium.random(canaryCount)
    }()

    /// The readable pages' size for a value of `capacity` bytes: the bytes and the canary, rounded up.
    private static func openSize(_ capacity: Int) -> Int {
        (capacity + canaryCount + pageSize - 1) / pageSize * pageSize
    }

    /// Room for `capacity` (> 0) bytes, or nil when `mmap` or `mprotect` fails. Its pages are zero.
    static func allocate(_ capacity: Int) -> UnsafeMutableRawPointer? {
        let open = openSize(capacity)
        guard let inside = reopenedSpare(open) ?? mapped(open) else { return nil }
        let bytes = inside + open - capacity
        canary.withUnsafeBytes { (bytes - canaryCount).copyMemory(from: $0.baseAddress!, byteCount: canaryCount) }
        return bytes
    }

    /// Wipes the region `allocate(capacity)` returned `bytes` in, then keeps it inaccessible for
    /// this thread's next value of its size, or unmaps it. A changed canary means something wrote
    /// before the value's start: the process stops rather than go on.
    static func release(_ bytes: UnsafeMutableRawPointer, capacity: Int) {
        let open = openSize(capacity)
        let inside = bytes + capacity - open
        let intact = canary.withUnsafeBytes { sodium_memcmp(bytes - canaryCount, $0.baseAddress!, canaryCount) == 0 }
        guard intact else { fatalError("guarded memory: the bytes before a secret's start were overwritten") }
        sodium_memzero(inside, open)
        if !keptAsSpare(inside, open) { unmap(inside, open) }
    }

    /// A new region with `open` readable bytes (zero, as fresh anonymous pages are); where they
    /// begin, or nil.
    private static func mapped(_ open: Int) -> UnsafeMutableRawPointer? {
        let total = open + 2 * pageSize
        let base = mmap(nil, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let base, base != MAP_FAILED else { return nil }
        let inside = base + pageSize
        _ = madvise(base, total, MADV_DONTDUMP)
        guard mprotect(inside, open, PROT_READ | PROT_WRITE) == 0 else {
            munmap(base, total)
            return nil
        }
        // This thread's idle spares give up their locked pages before a live value goes unlocked.
        if mlock(inside, open) != 0 && unmapSpares() { _ = mlock(inside, open) }
        return inside
    }

    private static func unmap(_ inside: UnsafeMutableRawPointer, _ open: Int) {
        munmap(inside - pageSize, open + 2 * pageSize)
    }

    // MARK: spares

    /// The most readable bytes a kept region has: a cache entry's 8 KiB read buffer (the one value
    /// of a broker's cached answer) and an answer's body fit.
    private static let spareLimit = 4 * pageSize
    private static let sparesPerThread = 2

    /// A released region waiting, wiped and (unless its thread keeps them open) inaccessible,
    /// for its thread's next value.
    private struct Spare {
        var inside: UnsafeMutableRawPointer?
        var open: Int
        var accessible = false
    }

    /// Set (to any non-nil value) on a thread that keeps its spares open.
    private static let openSparesKey: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// With `open`, this thread's released regions are kept wiped but readable and writable from
    /// now on: no `mprotect` when a value of a kept size is made or released here. A stale pointer
    /// into such a spare reads zeros until its next value instead of faulting (SECURITY.md). Without, the thread's open
    /// spares are made inaccessible (or unmapped) and later ones are too, as on any thread.
    static func keepSparesOpen(_ open: Bool) {
        guard let key = openSparesKey else { return }
        _ = pthread_setspecific(key, open ? UnsafeRawPointer(bitPattern: 1) : nil)
        guard !open, let spares = spares(create: false) else { return }
        for i in 0..<sparesPerThread where spares[i].inside != nil && spares[i].accessible {
            if mprotect(spares[i].inside!, spares[i].open, PROT_NONE) == 0 {
                spares[i].accessible = false
            } else {
                unmap(spares[i].inside!, spares[i].open)
                spares[i].inside = nil
            }
        }
    }

    private static var keepsSparesOpen: Bool {
        guard let key = openSparesKey else { return false }
        return pthread_getspecific(key) != nil
    }

    /// The thread-specific slot that holds a thread's spares (`sparesPerThread` of them); its
    /// destructor unmaps them when the thread ends. Nil when the process is out of keys: then
    /// every region is unmapped on release.
    private static let sparesKey: pthread_key_t? = {
        var key = pthread_key_t()
        let made = pthread_key_create(&key) { slots in
            guard let slots else { return }
            let spares = slots.assumingMemoryBound(to: Spare.self)
            for i in 0..<GuardedRegion.sparesPerThread {
                if let inside = spares[i].inside { GuardedRegion.unmap(inside, spares[i].open) }
            }
            spares.deallocate()
        }
        return made == 0 ? key : nil
    }()

    /// This thread's spares; made (empty) when `create` is true and there are none yet.
    private static func spares(create: Bool) -> UnsafeMutablePointer<Spare>? {
        guard let key = sparesKey else { return nil }
        if let slots = pthread_getspecific(key) { return slots.assumingMemoryBound(to: Spare.self) }
        guard create else { return nil }
        let spares = UnsafeMutablePointer<Spare>.allocate(capacity: sparesPerThread)
        spares.initialize(repeating: Spare(inside: nil, open: 0), count: sparesPerThread)
        guard pthread_setspecific(key, spares) == 0 else {
            spares.deallocate()
            return nil
        }
        return spares
    }

    /// A spare of exactly `open` readable bytes made accessible again (still locked and wiped, so
    /// its pages are zero); nil when this thread has none of that size.
    private static func reopenedSpare(_ open: Int) -> UnsafeMutableRawPointer? {
        guard let spares = spares(create: false) else { return nil }
        for i in 0..<sparesPerThread where spares[i].inside != nil && spares[i].open == open {
            let inside = spares[i].inside!
            spares[i].inside = nil
            if spares[i].accessible { return inside }
            guard mprotect(inside, open, PROT_READ | PROT_WRITE) == 0 else {
                unmap(inside, open)
                return nil
            }
            return inside
        }
        return nil
    }

    /// Keeps a wiped region as one of this thread's spares, made inaccessible unless the thread
    /// keeps them open; false when it is too large, the thread has no free slot, or it cannot be
    /// made inaccessible.
    private static func keptAsSpare(_ inside: UnsafeMutableRawPointer, _ open: Int) -> Bool {
        guard open <= spareLimit, let spares = spares(create: true) else { return false }
        for i in 0..<sparesPerThread where spares[i].inside == nil {
            let accessible = keepsSparesOpen
            guard accessible || mprotect(inside, open, PROT_NONE) == 0 else { return false }
            spares[i] = Spare(inside: inside, open: open, accessible: accessible)
            return true
        }
        return false
    }

    /// Unmaps this thread's spares; true when there was one.
    private static func unmapSpares() -> Bool {
        guard let spares = spares(create: false) else { return false }
        var any = false
        for i in 0..<sparesPerThread {
            if let inside = spares[i].inside {
                unmap(inside, spares[i].open)
                spares[i].inside = nil
                any = true
            }
        }
        return any
    }
}
