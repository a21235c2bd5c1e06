import Foundation
import Testing
@testable import Age
@testable import Secrets

/// The C2SP CCTV age vectors (copied unchanged into age-cctv/, BSD licence there). Every vector of
/// the families this project implements is run; armour and post-quantum hybrid vectors are
/// skipped by name (those features are not implemented; they are not copied into the repository,
/// but the walk skips them if they are ever added).
@Suite struct AgeConformanceTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("age-cctv").path
    static let implemented = ["x25519", "scrypt", "stanza", "header", "hmac", "stream", "version", "empty"]
    static let skipped = ["armor", "hybrid"]

    struct Vector {
        var name: String
        var expect: String
        var payload: String?
        var fileKey: String?
        var identities: [String] = []
        var passphrases: [String] = []
        var compressed = false
        var file: [UInt8] = []
    }

    static func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

    static func inflate(_ data: [UInt8]) throws -> [UInt8] {
        // Foundation on Linux has no zlib API; python3's zlib module is everywhere tests run.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))"]
        let inp = Pipe(), out = Pipe()
        p.standardInput = inp
        p.standardOutput = out
        try p.run()
        let writer = Thread { inp.fileHandleForWriting.write(Data(data)); try? inp.fileHandleForWriting.close() }
        writer.start()
        let result = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw CocoaError(.fileReadCorruptFile) }
        return Array(result)
    }

    static func load(_ name: String) throws -> Vector {
        let raw = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
        var v = Vector(name: name, expect: "")
        var pos = 0
        while let nl = raw[pos...].firstIndex(of: 10) {
            let line = String(decoding: raw[pos..<nl], as: UTF8.self)
            pos = nl + 1
            if line.isEmpty { break }
            guard let colon = line.range(of: ": ") else { continue }
            let key = String(line[..<colon.lowerBound]), value = String(line[colon.upperBound...])
            switch key {
            case "expect": v.expect = value
            case "payload": v.payload = value
            case "file key": v.fileKey = value
            case "identity": v.identities.append(value)
            case "passphrase": v.passphrases.append(value)
            case "compressed": v.compressed = value == "zlib"
            default: break
            }
        }
        v.file = Array(raw[pos...])
        if v.compressed { v.file = try inflate(v.file) }
        return v
    }

    static func outcome(_ error: Error?) -> String {
        switch error {
        case nil: return "success"
        case AgeError.noMatch?: return "no match"
        case AgeError.hmacFailure?: return "HMAC failure"
        case AgeError.headerFailure?: return "header failure"
        case AgeError.payloadFailure?: return "payload failure"
        default: return "unexpected error \(String(describing: error))"
        }
    }

    @Test func allVectors() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory).sorted()
            .filter { $0 != "LICENSE" && $0 != "README.md" }
        var passed = 0, failed = 0, skipped = 0, walked = 0
        for name in names {
            if Self.skipped.contains(where: name.hasPrefix) { skipped += 1; continue }
            #expect(Self.implemented.contains(where: name.hasPrefix), "unknown vector family: \(name)")
            walked += 1
            let v = try Self.load(name)
            var ok = true
            func check(_ cond: Bool, _ what: String) {
                if !cond { ok = false; Issue.record("\(name): \(what)") }
            }
            var identities: [AgeIdentity] = []
            for text in v.identities {
                let id = X25519Identity(parsing: text)
                check(id != nil, "identity does not parse")
                if let id { identities.append(id) }
            }
            identities += v.passphrases.map { ScryptIdentity(passphrase: SecretBytes(copying: $0.utf8)) }

            // The streaming reader: what it releases chunk by chunk before any failure.
            var released: [UInt8] = []
            var error: Error? = nil
            var opened: AgeFile.Opened? = nil
            var sink = SecretBytes()
            do { opened = try AgeFile.open(v.file, identities: identities, into: &sink) { released += $0 } } catch let e { error = e }
            check(Self.outcome(error) == v.expect, "expected \(v.expect), got \(Self.outcome(error))")
            if let payload = v.payload {
                check(Self.hex(Sodium.sha256(released)) == payload, "released plaintext hash differs")
            } else {
                check(released.isEmpty, "released plaintext without an expected payload")
            }
            // The all-or-nothing reader the store uses: a failing file releases nothing at all.
            var whole: [UInt8]? = nil
            do { whole = try AgeFile.decrypt(v.file, identities: identities).unsafeArray() } catch let e {
                check(Self.outcome(e) == v.expect, "decrypt(): expected \(v.expect), got \(Self.outcome(e))")
            }
            if v.expect == "success" {
                check(whole == released, "decrypt() differs from the streamed plaintext")
                if let o = opened {
                    if let fk = v.fileKey { check(Self.hex(o.fileKey.unsafeArray()) == fk, "file key differs") }
                    let headerBytes = Array(v.file[..<o.header.length])
                    check(o.header.encoded() == headerBytes, "header does not re-encode byte-identically")
                    let payload = released.withUnsafeBytes { AgeFile.encryptPayload($0, fileKey: o.fileKey, nonce: o.nonce) }
                    check(payload == Array(v.file[o.header.length...]), "payload does not re-encrypt identically")
                    // And the MAC recomputed from the stanzas under the file key is the file's.
                    check(AgeFile.header(stanzas: o.header.stanzas, fileKey: o.fileKey).encoded() == headerBytes,
                          "header MAC does not recompute")
                } else {
                    check(false, "no file key on success")
                }
            } else {
                check(whole == nil, "decrypt() released plaintext from a failing file")
            }
            if ok { passed += 1 } else { failed += 1 }
        }
        print("age conformance: \(passed) passed, \(failed) failed, \(skipped) skipped")
        #expect(walked > 0 && passed + failed == walked)
        #expect(failed == 0)
    }
}
