import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// Bytes that are a secret: key material, passphrases, decrypted documents, bodies that carry
/// tokens. There is exactly one copy, because the type is noncopyable; it lives in a guarded
/// region of its own (`GuardedRegion`: guard pages on both sides, its end touching the one after
/// it, a canary before its start, `MADV_DONTDUMP`, `mlock`ed) and is zeroed (`sodium_memzero`)
/// and made inaccessible when it goes away (the region unmapped, or kept for the thread's next
/// value of its size). Code reaches the bytes only through borrowed access (`withUnsafeBytes`,
/// `withUnsafeMutableBytes`) for the length of a call.
///
/// Each value costs system calls to make and to release (one each way when a kept region fits,
/// four and one when it does not), so a value is made once per secret, not per byte or per
/// chunk. An empty value maps nothing at all: it has no bytes to protect.
///
/// An allocation failure (only a failed `mmap` or `mprotect`) ends the process
/// with a fatal error rather than throwing: the values are small (at most about a megabyte), a
/// process that cannot map four pages can do nothing useful, and a throwing initialiser would
/// make every hash, key derivation and append a `try` for a failure Swift's own allocator also
/// treats as fatal.
///
/// Getting the bytes out as a copyable value is an edge, and the edges are named and few:
/// `unsafeString()` and `unsafeArray()` (grep for them). Everything they return is an ordinary
/// Swift value that is never wiped.
public struct SecretBytes: ~Copyable, @unchecked Sendable {
    // @unchecked Sendable: the one owner may hand the value to another thread; nothing is shared.
    /// The bytes in their guarded region, nil while `capacity` is 0: an empty value has no bytes to
    /// protect, so it maps nothing (empty bodies and not-yet-known passphrases cost no syscalls).
    private var base: UnsafeMutableRawPointer?
    /// How many bytes fit before `append` has to move the value to a larger region.
    public private(set) var capacity: Int
    /// How many bytes the value holds.
    public private(set) var count: Int

    /// An empty value with room for `capacity` bytes before `append` has to move it.
    public init(capacity: Int = 0) {
        precondition(capacity >= 0, "negative capacity")
        base = capacity > 0 ? Self.allocate(capacity) : nil
        self.capacity = capacity
        count = 0
    }

    /// `count` zero bytes.
    public init(zeros count: Int) {
        self.init(capacity: count)
        if let base { sodium_memzero(base, count) }
        self.count = count
    }

    /// `count` bytes from libsodium's CSPRNG.
    public init(randomCount count: Int) {
        self.init(capacity: count)
        if let base { randombytes_buf(base, count) }
        self.count = count
    }

    /// A copy of `bytes`. The source stays as it was: a caller that owns it wipes it.
    public init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let base, let source = bytes.baseAddress { memcpy(base, source, bytes.count) }
        count = bytes.count
    }

    /// A copy of `bytes` (test data, or a boundary that still hands over an array).
    public init<C: Collection>(copying bytes: C) where C.Element == UInt8 {
        self.init(capacity: bytes.count)
        var i = 0
        if let target = base?.assumingMemoryBound(to: UInt8.self) {
            for b in bytes {
                target[i] = b
                i += 1
            }
        }
        count = i
    }

    deinit { Self.release(base, capacity) }

    private static func allocate(_ size: Int) -> UnsafeMutableRawPointer {
        guard let p = GuardedRegion.allocate(size) else {
            fatalError("out of memory: cannot map \(size) bytes of guarded memory for a secret (\(String(cString: strerror(errno))))")
        }
        return p
    }

    /// With `open`, values released on this thread from now on leave their regions wiped but open
    /// for the thread's next values of their sizes, instead of inaccessible: for a thread that
    /// makes and drops one value per request many times a second (the broker's loop), where two
    /// `mprotect`s per value, and the TLB flushes they cause, are a large part of each request's
    /// cost. A stale pointer into such a region reads zeros until its next value rather than
    /// faulting; everything else about the value is as for any other (SECURITY.md).
    /// Without, the thread's kept regions are made inaccessible again, as on any thread.
    public static func keepReleasedRegionsOpen(onThisThread open: Bool) {
        GuardedRegion.keepSparesOpen(open)
    }

    private static func release(_ p: UnsafeMutableRawPointer?, _ size: Int) {
        guard let p else { return }
        GuardedRegion.release(p, capacity: size)
    }

    public var isEmpty: Bool { count == 0 }

    // MARK: borrowed access

    /// Calls `body` with the bytes; the pointer must not outlive the call. (An empty value's
    /// buffer has a nil base address, as an empty array's may.)
    public func withUnsafeBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Calls `body` with the bytes, writable; the pointer must not outlive the call.
    public mutating func withUnsafeMutableBytes<R: ~Copyable>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Constant-time comparison (`sodium_memcmp`); only the lengths may differ in time.
    public func equals(_ other: borrowing SecretBytes) -> Bool {
        other.withUnsafeBytes { Sodium.equal(UnsafeRawBufferPointer(start: base, count: count), $0) }
    }

    /// A second value with the same bytes, in its own guarded region (both are wiped when they
    /// go): for an owner that must hand a secret to another owner and keep it too.
    public func duplicate() -> SecretBytes {
        SecretBytes(copying: UnsafeRawBufferPointer(start: base, count: count))
    }

    // MARK: building

    /// Makes room for `total` bytes; moving to a larger region wipes the old one.
    public mutating func reserveCapacity(_ total: Int) {
        guard total > capacity else { return }
        let grown = Self.allocate(total)
        if let base, count > 0 { memcpy(grown, base, count) }
        Self.release(base, capacity)
        base = grown
        capacity = total
    }

    private mutating func makeRoom(_ more: Int) -> UnsafeMutableRawPointer {
        let needed = count + more
        if needed > capacity { reserveCapacity(max(needed, capacity * 2, 64)) }
        return base! + count
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        memcpy(makeRoom(bytes.count), source, bytes.count)
        count += bytes.count
    }

    public mutating func append(_ byte: UInt8) {
        makeRoom(1).storeBytes(of: byte, as: UInt8.self)
        count += 1
    }

    public mutating func append(_ other: borrowing SecretBytes) {
        other.withUnsafeBytes { append($0) }
    }

    /// Appends the UTF-8 of `text`. The String itself is an ordinary, unwiped value.
    public mutating func append(utf8 text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends what `fill` writes into up to `maxCount` bytes of new room (it returns how many
    /// it wrote), so `read(2)` or a decryption can write straight into the secret.
    public mutating func append(upTo maxCount: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows {
        guard maxCount > 0 else {
            _ = try fill(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            return
        }
        let room = UnsafeMutableRawBufferPointer(start: makeRoom(maxCount), count: maxCount)
        let written: Int
        do { written = try fill(room) } catch {
            sodium_memzero(room.baseAddress!, maxCount)
            throw error
        }
        precondition(written >= 0 && written <= maxCount, "append(upTo:) wrote outside its room")
        sodium_memzero(room.baseAddress! + written, maxCount - written)
        count += written
    }

    /// Drops everything after the first `newCount` bytes, wiping them.
    public mutating func truncate(to newCount: Int) {
        precondition(newCount >= 0 && newCount <= count, "truncate(to:) beyond the end")
        if let base, count > newCount { sodium_memzero(base + newCount, count - newCount) }
        count = newCount
    }

    // MARK: edges (named, few; what they return is not wiped)

    /// EDGE: the bytes as a String (invalid UTF-8 repaired as `String(decoding:)` does), for a
    /// place that can only read text (in the tool: the pasted callback address; tokens have their
    /// own edge, `SecretToken.unsafeString()`; tests read answers with it).
    public func unsafeString() -> String {
        String(decoding: UnsafeRawBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// EDGE: the bytes as an array, for a boundary that still takes one (none in the tool; tests
    /// and fuzz targets compare bytes with it).
    public func unsafeArray() -> [UInt8] {
        Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}
