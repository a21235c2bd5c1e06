#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import OAuth
@testable import UsageBackend
@testable import Transport
@testable import SignIn
@testable import CredentialCore
@testable import Secrets
import TestSupport
import SystemRuntime

// SECURITY.md "What is wiped in memory": the tokens of an issuer's answer go straight into
// guarded memory and nowhere else. These tests parse scripted answers in-process, through the
// real client, drop every reference, and then read the process's own memory for the tokens'
// bytes. Each token is random and exists whole only in guarded memory: the test keeps it as two
// halves in separate arrays and looks for the first half followed by the second, so its own
// copy never matches. A match anywhere is a copy the code left behind.

/// A random, token-safe value held only as two halves (never contiguous outside guarded memory).
struct Needle: CustomStringConvertible {
    let first: [UInt8]
    let second: [UInt8]

    init(half: Int = 24) {
        let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        func randomHalf() -> [UInt8] { Sodium.random(half).map { b in alphabet.withUTF8Buffer { $0[Int(b & 63)] } } }
        first = randomHalf()
        second = randomHalf()
    }

    /// Appends the whole value to `out` (guarded memory), half by half.
    func append(to out: inout SecretBytes) {
        first.withUnsafeBytes { out.append($0) }
        second.withUnsafeBytes { out.append($0) }
    }

    /// Whether `token` is this value (compared half by half, no whole copy made).
    func matches(_ token: SecretToken?) -> Bool {
        guard let token, token.count == first.count + second.count else { return false }
        return token.withUnsafeBytes { t in
            first.withUnsafeBytes { Sodium.equal(UnsafeRawBufferPointer(rebasing: t[..<first.count]), $0) }
                && second.withUnsafeBytes { Sodium.equal(UnsafeRawBufferPointer(rebasing: t[first.count...]), $0) }
        }
    }

    /// A prefix of the first half, enough to tell needles apart in a failure message.
    var description: String { "needle " + String(decoding: first.prefix(6), as: UTF8.self) + "…" }
}

/// The process's own memory, read through /proc/self/mem (proc(5)).
///
/// The scan allocates nothing on the heap until it has finished: a freed copy of a token is
/// still in memory until something reuses its chunk, and the scanner's own allocations (reading
/// smaps into Strings, say) would be the first to do so and hide it. So smaps is read, parsed
/// and the matches are kept in mappings of the scan's own, made with mmap and marked
/// MADV_DONTDUMP, which also keeps them out of the scan.
enum OwnMemory {
    struct Scan {
        /// "start-end: needle …" for each match, formatted after the scan.
        var found: [String] = []
        var regions = 0
        var bytes = 0
    }

    /// A mapping of the scan's own (MADV_DONTDUMP, so it is never scanned itself).
    struct Scratch {
        let base: UnsafeMutableRawPointer
        let size: Int
        init?(_ size: Int) {
            guard let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), p != MAP_FAILED,
                  madvise(p, size, MADV_DONTDUMP) == 0 else { return nil }
            base = p
            self.size = size
        }
        func release() { munmap(base, size) }
    }

    /// Every needle's occurrences, whole, in every readable private mapping that can hold a
    /// copy made by our code — anonymous memory (malloc's arenas, thread stacks), `[heap]`,
    /// `[stack]`, and the writable data of loaded objects — except those marked MADV_DONTDUMP
    /// (`dd` in smaps' VmFlags): the guarded regions (SecretBytes still alive in
    /// tests running alongside) and the scan's own mappings.
    static func find(_ needles: [Needle]) -> Scan {
        let chunk = 1 << 20, window = chunk + 4096
        guard let text = Scratch(64 << 20), let table = Scratch(1 << 20), let window_ = Scratch(window) else {
            Issue.record("mmap failed: errno \(errno)")
            return Scan()
        }
        defer { text.release(); table.release(); window_.release() }
        // smaps, read whole into `text`.
        let smaps = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC)
        guard smaps >= 0 else { Issue.record("cannot open /proc/self/smaps: errno \(errno)"); return Scan() }
        var length = 0
        while length < text.size {
            let n = read(smaps, text.base + length, text.size - length)
            if n <= 0 { break }
            length += n
        }
        close(smaps)
        // (start, end) pairs of the mappings to scan, then (address, needle index) of each hit.
        let ranges = table.base.bindMemory(to: UInt.self, capacity: table.size / MemoryLayout<UInt>.size)
        let capacity = table.size / MemoryLayout<UInt>.size / 4
        var count = 0
        parse(UnsafeRawBufferPointer(start: text.base, count: length)) { start, end in
            if count < capacity { ranges[2 * count] = start; ranges[2 * count + 1] = end; count += 1 }
        }
        let hits = ranges + 2 * capacity
        var hitCount = 0
        let mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC)
        guard mem >= 0 else { Issue.record("cannot open /proc/self/mem: errno \(errno)"); return Scan() }
        var scanned = 0
        for r in 0..<count {
            var at = ranges[2 * r]
            let end = ranges[2 * r + 1]
            while at < end {
                let got = pread(mem, window_.base, Int(min(UInt(window), end - at)), off_t(Int(bitPattern: at)))
                if got > 0 {
                    scanned += min(got, chunk)
                    let memory = UnsafeRawBufferPointer(start: window_.base, count: got)
                    for (n, needle) in needles.enumerated() where contains(needle, in: memory) && hitCount < capacity {
                        hits[2 * hitCount] = ranges[2 * r]
                        hits[2 * hitCount + 1] = UInt(n)
                        hitCount += 1
                    }
                }
                at += UInt(chunk)
            }
        }
        close(mem)
        var scan = Scan(regions: count, bytes: scanned)
        for h in 0..<hitCount {
            scan.found.append("\(needles[Int(hits[2 * h + 1])]) in the mapping at 0x" + String(hits[2 * h], radix: 16))
        }
        return scan
    }

    /// Calls `range` with the bounds of each mapping of smaps' `text` that the scan reads.
    /// Byte by byte, with no String: see the type's comment.
    static func parse(_ text: UnsafeRawBufferPointer, _ range: (UInt, UInt) -> Void) {
        var pending: (UInt, UInt)? = nil
        var lineStart = 0
        while lineStart < text.count {
            var lineEnd = lineStart
            while lineEnd < text.count, text[lineEnd] != 0x0A { lineEnd += 1 }
            let line = UnsafeRawBufferPointer(rebasing: text[lineStart..<lineEnd])
            lineStart = lineEnd + 1
            // Field lines start with "Name:"; the VmFlags line says whether the mapping is `dd`.
            var i = 0
            while i < line.count, line[i] != 0x20, line[i] != 0x3A { i += 1 }
            if i < line.count, line[i] == 0x3A {
                if startsWith(line, "VmFlags:"), hasFlag(line, "dd") { pending = nil }
                continue
            }
            if let p = pending { range(p.0, p.1) }
            pending = nil
            // A mapping's header: start-end perms offset dev inode [path]
            var at = 0
            guard let start = hex(line, &at), at < line.count, line[at] == 0x2D else { continue }
            at += 1
            guard let end = hex(line, &at), at + 5 <= line.count else { continue }
            let perms = UnsafeRawBufferPointer(rebasing: line[(at + 1)..<(at + 5)])
            // The path is the sixth field (after offset, dev and inode), when there is one.
            var field = 0, p = at
            while p < line.count, field < 5 {
                while p < line.count, line[p] == 0x20 { p += 1 }
                if field == 4 { break }
                while p < line.count, line[p] != 0x20 { p += 1 }
                field += 1
            }
            while p < line.count, line[p] == 0x20 { p += 1 }
            let path = UnsafeRawBufferPointer(rebasing: line[p...])
            let readablePrivate = perms[0] == UInt8(ascii: "r") && perms[3] == UInt8(ascii: "p")
            let anonymous = path.isEmpty || startsWith(path, "[heap]") || startsWith(path, "[stack]") || startsWith(path, "[anon")
            let writableData = perms[1] == UInt8(ascii: "w") && (path.first ?? 0) != UInt8(ascii: "[")
            if readablePrivate && (anonymous || writableData) { pending = (start, end) }
        }
        if let p = pending { range(p.0, p.1) }
    }

    static func hex(_ line: UnsafeRawBufferPointer, _ at: inout Int) -> UInt? {
        var v: UInt = 0, digits = 0
        while at < line.count {
            let c = line[at]
            let d: UInt
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt(c - UInt8(ascii: "a") + 10)
            default: return digits > 0 ? v : nil
            }
            v = v << 4 | d
            digits += 1
            at += 1
        }
        return digits > 0 ? v : nil
    }

    static func startsWith(_ bytes: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { p in bytes.count >= p.count && zip(bytes, p).allSatisfy { $0 == $1 } }
    }

    /// Whether the VmFlags line holds the two-letter flag `flag` as a field of its own.
    static func hasFlag(_ line: UnsafeRawBufferPointer, _ flag: StaticString) -> Bool {
        flag.withUTF8Buffer { f in
            var i = 0
            while i + 2 <= line.count {
                if line[i] == f[0], line[i + 1] == f[1], i > 0, line[i - 1] == 0x20, i + 2 == line.count || line[i + 2] == 0x20 { return true }
                i += 1
            }
            return false
        }
    }

    /// Whether `needle`'s first half followed by its second occurs in `memory`.
    static func contains(_ needle: Needle, in memory: UnsafeRawBufferPointer) -> Bool {
        needle.first.withUnsafeBytes { first in
            needle.second.withUnsafeBytes { second in
                // memchr for the first byte, then memcmp of each half (memmem is a GNU extension
                // Glibc's module does not declare).
                let base = memory.baseAddress!, total = first.count + second.count
                var from = 0
                while from + total <= memory.count,
                      let hit = memchr(base + from, Int32(first[0]), memory.count - total - from + 1) {
                    let offset = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + offset, first.baseAddress!, first.count) == 0,
                       memcmp(base + offset + first.count, second.baseAddress!, second.count) == 0 {
                        return true
                    }
                    from = offset + 1
                }
                return false
            }
        }
    }
}

/// Answers each request with the next answer, built in guarded memory when asked (so the tokens
/// in it never pass through a String or an array), and records nothing.
final class BuiltAnswers: HTTPTransport {
    private var answers: [() -> HTTPResponse]
    init(_ answers: [() -> HTTPResponse]) { self.answers = answers }
    func send(_ request: borrowing HTTPRequest) throws -> HTTPResponse {
        guard !answers.isEmpty else {
            Issue.record("unexpected request \(request.method) \(request.url)")
            return HTTPResponse(status: 599)
        }
        return answers.removeFirst()()
    }

    /// `{"name":"value",…,"expires_in":3600}` with each value a needle, written into guarded memory.
    static func json(_ members: [(String, Needle)]) -> HTTPResponse {
        var body = SecretBytes(capacity: 4096)
        body.append(utf8: "{")
        for (name, needle) in members {
            body.append(utf8: "\"" + name + "\":\"")
            needle.append(to: &body)
            body.append(utf8: "\",")
        }
        body.append(utf8: "\"token_type\":\"Bearer\",\"expires_in\":3600}")
        return HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: body)
    }
}

@Suite(.serialized) struct IssuerAnswerMemoryScanTests {
    let config = try! IssuerConfig("https://auth.example.test")

    /// Runs `body` in a frame of its own (never inlined), so that nothing it made is still
    /// referenced from this frame when the scan starts.
    @inline(never)
    func exercise(_ body: () throws -> Void) rethrows { try body() }

    func expectNoCopy(of needles: [Needle]) {
        let scan = OwnMemory.find(needles)
        #expect(scan.regions > 0 && scan.bytes > 0, "nothing was scanned")
        #expect(scan.found.isEmpty, "copies left outside guarded memory after \(scan.bytes) bytes in \(scan.regions) regions: \(scan.found)")
    }

    /// The scan itself can fail: a token that became a String is found on the heap.
    @Test func theScanFindsATokenThatBecameAString() {
        let needle = Needle()
        var token = SecretBytes(capacity: 48)
        needle.append(to: &token)
        let leaked = token.unsafeString() // 48 bytes: a heap String, as an unwiped parse would make
        let scan = OwnMemory.find([needle])
        #expect(scan.found.count >= 1, "a String copy of the token was not found (\(scan.bytes) bytes in \(scan.regions) regions)")
        withExtendedLifetime(leaked) {}
    }

    @Test func aRefreshAnswerLeavesNoCopyOfItsTokens() throws {
        let access = Needle(), refresh = Needle(), id = Needle()
        exercise {
            let transport = BuiltAnswers([{ BuiltAnswers.json([("access_token", access), ("refresh_token", refresh), ("id_token", id)]) }])
            let client = IssuerClient(config: config, transport: transport, retry: .none)
            let old = TokenDocument(accessToken: "at_old", refreshToken: "rt_old", accountId: "acct")
            guard case .rotated(let t) = client.refresh(refreshToken: old.refreshToken) else {
                Issue.record("the refresh answer was not taken")
                return
            }
            #expect(access.matches(t.accessToken) && refresh.matches(t.refreshToken) && id.matches(t.idToken))
            // What the owner does next: the rotated document, and its stored form.
            let next = old.rotated(accessToken: t.accessToken, refreshToken: t.refreshToken, idToken: t.idToken, expiresIn: t.expiresIn)
            let stored = next.serialized()
            #expect(stored.count > 3 * 48)
        }
        expectNoCopy(of: [access, refresh, id])
    }

    @Test func aDeviceSignInLeavesNoCopyOfItsCodeVerifierOrTokens() throws {
        let code = Needle(), verifier = Needle(), access = Needle(), refresh = Needle(), id = Needle()
        try exercise {
            let transport = BuiltAnswers([
                { BuiltAnswers.json([("authorization_code", code), ("code_challenge", Needle()), ("code_verifier", verifier)]) },
                { BuiltAnswers.json([("access_token", access), ("refresh_token", refresh), ("id_token", id)]) },
            ])
            let client = IssuerClient(config: config, transport: transport, retry: .none)
            let device = DeviceCode(deviceAuthId: "da_1", userCode: "AB-CD", interval: 0, verificationURL: "https://x.test")
            guard case .approved(let c, let v) = try client.pollDeviceToken(device) else {
                Issue.record("the device answer was not taken")
                return
            }
            #expect(code.matches(c) && verifier.matches(v))
            let grant = try client.exchangeCode(code: c, verifier: v, redirectURI: client.config.deviceRedirectURI)
            #expect(access.matches(grant.accessToken) && refresh.matches(grant.refreshToken) && id.matches(grant.idToken))
            let stored = TokenDocument.fromTokens(accessToken: grant.accessToken, refreshToken: grant.refreshToken,
                                                  idToken: grant.idToken, expiresIn: grant.expiresIn).serialized()
            #expect(stored.count > 3 * 48)
        }
        expectNoCopy(of: [code, verifier, access, refresh, id])
    }

    @Test func theUsageRequestLeavesNoCopyOfTheAccessToken() throws {
        let access = Needle()
        try exercise {
            var header = SecretBytes(capacity: 48)
            access.append(to: &header)
            let token = SecretToken(header)
            let transport = BuiltAnswers([{ HTTPResponse(status: 200, headers: ["content-type": "application/json"], text: #"{"plan_type":"pro"}"#) }])
            let client = UsageClient(config: try BackendConfig("https://backend.example.test/backend-api"), transport: transport,
                                     retry: .none, userAgent: "chatgpt-credential/0")
            #expect(try client.fetch(accessToken: token, accountId: "acct", profile: .default, now: { 1_800_000_000 }) == .report(UsageReport(plan: "pro")))
        }
        expectNoCopy(of: [access])
    }

    /// `exec`'s child environment (`ProcessImage`): the token goes from its guarded buffer into
    /// the `NAME=VALUE` entry `envp` points at, never through a String or setenv(3)'s copy.
    @Test func execsChildEnvironmentLeavesNoCopyOfTheAccessToken() throws {
        let access = Needle()
        exercise {
            var bytes = SecretBytes(capacity: 48)
            access.append(to: &bytes)
            let token = SecretToken(bytes)
            let image = ProcessImage(argv: ["true"], inherited: ["PATH": "/usr/bin", "CHATGPT_ACCESS_TOKEN": "inherited"])
            image.setSecret("CHATGPT_ACCESS_TOKEN", to: token)
            #expect(image.redactedEnvironment == ["PATH=/usr/bin", "CHATGPT_ACCESS_TOKEN=<48 bytes>"])
        }
        expectNoCopy(of: [access])
    }

    /// The address pasted for `login --no-browser`: read into guarded memory and parsed there, so
    /// the authorization code in it is never a String.
    @Test func aPastedAddressLeavesNoCopyOfItsCode() throws {
        let code = Needle()
        try exercise {
            var line = SecretBytes(capacity: 128)
            line.append(utf8: "http://localhost:1455/auth/callback?code=")
            code.append(to: &line)
            line.append(utf8: "&state=st_1\n")
            let callback = try PasteBackFlow.parse(line)
            #expect(code.matches(callback.codeToken) && callback.state == "st_1")
        }
        expectNoCopy(of: [code])
    }

    /// The browser's callback request to the loopback listener: its head read into guarded
    /// memory, the query kept there, the code decoded straight into a token.
    @Test func theBrowsersCallbackRequestLeavesNoCopyOfItsCode() throws {
        let code = Needle()
        let listener = try LoopbackListener.bind(port: 0)
        try exercise {
            var head = SecretBytes(capacity: 256)
            head.append(utf8: "GET /auth/callback?state=st_1&code=")
            code.append(to: &head)
            head.append(utf8: " HTTP/1.1\r\nHost: localhost:1455\r\n\r\n")
            let request = try #require(head.withUnsafeBytes { listener.parse($0) })
            let callback = CallbackParameters(try #require(request.queryPairs(secretNames: CallbackParameters.secretNames)))
            #expect(request.path == "/auth/callback" && code.matches(callback.codeToken) && callback.state == "st_1")
        }
        withExtendedLifetime(listener) {}
        expectNoCopy(of: [code])
    }
}
