// age files: AgeHeader.parse (+ canonical re-encoding) and AgeFile.decrypt with fixed identities
// (the CCTV X25519 identity, and passphrase "password" with the work factor capped at 10 so one
// input costs at most ~1 MiB and a few ms of scrypt).
@testable import Age
import FuzzSupport
import Secrets

private let x25519 = X25519Identity(parsing: "AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0")!
private let scrypt = ScryptIdentity(passphrase: SecretBytes(copying: "password".utf8), maxWorkFactor: 10)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let file = bytesOf(data, size)
    var header: AgeHeader? = nil
    do {
        let h = try AgeHeader.parse(file)
        header = h
        require(h.length > 0 && h.length <= file.count, "header length \(h.length) outside the file")
        require(h.macInput == Array(file[..<(h.macInput.count)]), "macInput is not a prefix of the file")
        require(h.mac.count == 32, "MAC is not 32 bytes")
        // The parser accepts only the canonical encoding, so re-encoding gives the same bytes.
        let encoded = h.encoded()
        require(encoded == Array(file[..<h.length]), "re-encoded header differs from the input")
        require(AgeHeader.encodeMACInput(h.stanzas) == h.macInput, "re-encoded MAC input differs")
        let again = try AgeHeader.parse(encoded)
        require(again == h, "parse(encoded()) != header")
        for s in h.stanzas {
            for a in [s.type] + s.args { require(!a.isEmpty && a.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "bad stanza argument") }
        }
    } catch let e as AgeError {
        if case .headerFailure = e {} else { fuzzFail("header parse threw \(e)") }
    } catch { fuzzFail("header parse threw \(error)") }

    do {
        var released: [UInt8] = []
        var sink = SecretBytes()
        let opened = try AgeFile.open(file, identities: [x25519, scrypt], into: &sink) { released += $0 }
        guard let h = header else { fuzzFail("decrypted a file whose header does not parse") }
        require(opened.header == h, "open saw a different header")
        let plain = try AgeFile.decrypt(file, identities: [x25519, scrypt])
        require(plain.unsafeArray() == released, "decrypt and open disagree")
        // Re-encrypting with the recovered key and nonce reproduces the payload exactly.
        let payload = plain.withUnsafeBytes { AgeFile.encryptPayload($0, fileKey: opened.fileKey, nonce: opened.nonce) }
        require(payload == Array(file[h.length...]), "payload does not re-encrypt to the same bytes")
    } catch let e as AgeError {
        if header == nil { require({ if case .headerFailure = e { return true }; return false }(), "unparsable header gave \(e)") }
        _ = AgeError.noMatch.description
    } catch { fuzzFail("decrypt threw \(error)") }
    return 0
}
