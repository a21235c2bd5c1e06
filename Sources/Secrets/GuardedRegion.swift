import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// The memory a `SecretBytes` value lives in: a mapping of its own, laid out as libsodium's
/// `sodium_malloc` lays out its regions (SECURITY.md "What is wiped in memory"), made and
/// released in five system calls instead of its ten.
///
///     | guard page | slack … canary | the bytes | guard page |
///
/// The bytes end where the guard page after them begins (one byte past the end faults at once);
/// the 16 bytes before them hold this process's canary, checked when the region goes (a write
/// just before the start stops the process then); the page before the slack is a guard too.
/// The whole mapping is `MADV_DONTDUMP`; the readable pages are `mlock`ed (a failure under a
/// small `RLIMIT_MEMLOCK` is ignored, as libsodium ignores it: the value is still guarded and
/// wiped, only not locked). Releasing wipes the readable pages and unmaps the whole region, so a
/// stale pointer faults.
///
/// Why not `sodium_malloc`: it makes the guard pages by `mprotect`ing a read-write mapping
/// (three calls, the third for a read-only page that holds the size) and undoes each before
/// `munmap` (an `mprotect`, a `madvise`, a `munlock`), all to find the size again from a bare
/// pointer. `SecretBytes` knows its capacity, so here the mapping starts inaccessible and one
/// `mprotect` opens the middle, and `munmap` alone undoes everything. On a virtual machine where
/// memory-map calls are dear this halved the cost of a value (bench/results.md); the broker makes
/// two per answer.
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

    /// Room for `capacity` (> 0) bytes, or nil when `mmap` or `mprotect` fails.
    static func allocate(_ capacity: Int) -> UnsafeMutableRawPointer? {
        let open = openSize(capacity), total = open + 2 * pageSize
        let base = mmap(nil, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let base, base != MAP_FAILED else { return nil }
        let inside = base + pageSize
        _ = madvise(base, total, MADV_DONTDUMP)
        guard mprotect(inside, open, PROT_READ | PROT_WRITE) == 0 else {
            munmap(base, total)
            return nil
        }
        _ = mlock(inside, open)
        let bytes = inside + open - capacity
        canary.withUnsafeBytes { (bytes - canaryCount).copyMemory(from: $0.baseAddress!, byteCount: canaryCount) }
        return bytes
    }

    /// Wipes and unmaps the region `allocate(capacity)` returned `bytes` in. A changed canary
    /// means something wrote before the value's start: the process stops rather than go on.
    static func release(_ bytes: UnsafeMutableRawPointer, capacity: Int) {
        let open = openSize(capacity)
        let inside = bytes + capacity - open
        let intact = canary.withUnsafeBytes { sodium_memcmp(bytes - canaryCount, $0.baseAddress!, canaryCount) == 0 }
        guard intact else { fatalError("guarded memory: the bytes before a secret's start were overwritten") }
        sodium_memzero(inside, open)
        munmap(inside - pageSize, open + 2 * pageSize)
    }
}
