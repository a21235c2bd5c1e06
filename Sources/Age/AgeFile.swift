import Secrets

/// age v1 files (C2SP age spec): encryption to X25519 or scrypt recipients and decryption with
/// X25519 or scrypt identities. Everything is in memory: credential files are small.
public enum AgeFile {
    static let chunkSize = 64 * 1024
    static let nonceSize = 16
    static let headerLabel = Array("header".utf8)
    static let payloadLabel = Array("payload".utf8)

    // MARK: encrypt

    /// Encrypts `plaintext` to `recipients` with a fresh file key and payload nonce.
    public static func encrypt(_ plaintext: borrowing SecretBytes, to recipients: [AgeRecipient]) -> [UInt8] {
        let fileKey = SecretBytes(randomCount: AgeConst.fileKeySize)
        return plaintext.withUnsafeBytes { encrypt($0, to: recipients, fileKey: fileKey, nonce: Sodium.random(nonceSize)) }
    }

    /// Encrypts with a given file key and nonce (tests re-create files byte for byte with this).
    static func encrypt(_ plaintext: UnsafeRawBufferPointer, to recipients: [AgeRecipient], fileKey: borrowing SecretBytes, nonce: [UInt8]) -> [UInt8] {
        precondition(!recipients.isEmpty)
        let stanzas = recipients.flatMap { $0.wrap(fileKey: fileKey) }
        return header(stanzas: stanzas, fileKey: fileKey).encoded() + encryptPayload(plaintext, fileKey: fileKey, nonce: nonce)
    }

    /// A header with its MAC computed under `fileKey`.
    static func header(stanzas: [AgeStanza], fileKey: borrowing SecretBytes) -> AgeHeader {
        let macInput = AgeHeader.encodeMACInput(stanzas)
        let key = HKDF.sha256(ikm: fileKey, salt: [], info: headerLabel, length: 32)
        var h = AgeHeader(stanzas: stanzas, mac: HMAC.sha256(key: key, macInput), macInput: macInput, length: 0)
        h.length = h.encoded().count
        return h
    }

    /// The payload: nonce, then STREAM chunks of 64 KiB; the last chunk carries the last-chunk
    /// flag and is empty only when the whole plaintext is.
    static func encryptPayload(_ plaintext: UnsafeRawBufferPointer, fileKey: borrowing SecretBytes, nonce: [UInt8]) -> [UInt8] {
        precondition(fileKey.count == AgeConst.fileKeySize && nonce.count == nonceSize)
        let key = HKDF.sha256(ikm: fileKey, salt: nonce, info: payloadLabel, length: 32)
        var out = nonce
        out.reserveCapacity(nonceSize + plaintext.count + (plaintext.count / chunkSize + 1) * ChaChaPoly.tagSize)
        var counter: UInt64 = 0
        var pos = 0
        repeat {
            let end = min(pos + chunkSize, plaintext.count)
            let last = end == plaintext.count
            out += ChaChaPoly.seal(key: key, nonce: chunkNonce(counter, last: last), UnsafeRawBufferPointer(rebasing: plaintext[pos..<end]))
            pos = end
            counter += 1
        } while pos < plaintext.count
        return out
    }

    /// 11-byte big-endian counter, then 1 for the last chunk and 0 otherwise.
    static func chunkNonce(_ counter: UInt64, last: Bool) -> [UInt8] {
        var n = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { n[10 - i] = UInt8(truncatingIfNeeded: counter >> UInt64(8 * i)) }
        n[11] = last ? 1 : 0
        return n
    }

    // MARK: decrypt

    /// What a successful (or partly successful) decryption learnt.
    struct Opened: ~Copyable {
        var header: AgeHeader
        var fileKey: SecretBytes
        var nonce: [UInt8]
    }

    /// Decrypts the whole file and returns the plaintext only when every byte verified: nothing
    /// is released from a file that fails anywhere. Throws `AgeError`.
    public static func decrypt(_ file: [UInt8], identities: [AgeIdentity]) throws -> SecretBytes {
        // The plaintext is shorter than the file: one region, decrypted into in place.
        var plaintext = SecretBytes(capacity: file.count)
        _ = try open(file, identities: identities, into: &plaintext)
        return plaintext
    }

    /// Parses and verifies the header, then decrypts the payload chunk by chunk into `plaintext`,
    /// handing each verified chunk to `release` as well (so a caller can see exactly what was
    /// authenticated before a later failure). Throws `AgeError`.
    static func open(_ file: [UInt8], identities: [AgeIdentity], into plaintext: inout SecretBytes,
                     release: (UnsafeRawBufferPointer) -> Void = { _ in }) throws -> Opened {
        let header = try AgeHeader.parse(file)
        if header.stanzas.contains(where: { $0.type == "scrypt" }) && header.stanzas.count != 1 {
            throw AgeError.headerFailure("an scrypt stanza must be the only stanza")
        }
        var fileKey: SecretBytes? = nil
        for identity in identities {
            if let k = try identity.unwrap(header.stanzas) { fileKey = consume k; break }
        }
        guard let key = fileKey else { throw AgeError.noMatch }
        var derived = HKDF.sha256(ikm: key, salt: [], info: headerLabel, length: 32)
        guard Sodium.equal(HMAC.sha256(key: derived, header.macInput), header.mac) else { throw AgeError.hmacFailure }
        guard file.count - header.length >= nonceSize else { throw AgeError.headerFailure("payload nonce is missing or short") }
        let nonce = Array(file[header.length..<(header.length + nonceSize)])
        // The MAC key's value is reused for the payload key (one guarded mapping fewer).
        HKDF.sha256(ikm: key, salt: nonce, info: payloadLabel, length: 32, into: &derived)
        try decryptPayload(file[(header.length + nonceSize)...], payloadKey: derived, into: &plaintext, release: release)
        return Opened(header: header, fileKey: key, nonce: nonce)
    }

    /// STREAM-decrypts the payload (after the nonce) under the payload key.
    static func decryptPayload(_ payload: ArraySlice<UInt8>, payloadKey key: borrowing SecretBytes,
                               into plaintext: inout SecretBytes, release: (UnsafeRawBufferPointer) -> Void) throws {
        let full = chunkSize + ChaChaPoly.tagSize
        var pos = payload.startIndex
        var counter: UInt64 = 0
        while true {
            let remaining = payload.endIndex - pos
            guard remaining > 0 else { throw AgeError.payloadFailure("the file ends before its last chunk") }
            guard counter < (UInt64(1) << 63) else { throw AgeError.payloadFailure("too many chunks") }
            let chunk = payload[pos..<(pos + min(remaining, full))]
            let start = plaintext.count
            var last: Bool
            if remaining < full {
                // A short chunk can only be the last one, and it is empty only in an empty file.
                last = true
                if counter > 0 && chunk.count == ChaChaPoly.tagSize {
                    throw AgeError.payloadFailure("the last chunk is empty")
                }
                guard ChaChaPoly.open(key: key, nonce: chunkNonce(counter, last: true), chunk, appendingTo: &plaintext) else {
                    throw AgeError.payloadFailure("chunk \(counter) failed to authenticate")
                }
            } else if ChaChaPoly.open(key: key, nonce: chunkNonce(counter, last: false), chunk, appendingTo: &plaintext) {
                last = false
            } else if ChaChaPoly.open(key: key, nonce: chunkNonce(counter, last: true), chunk, appendingTo: &plaintext) {
                // A full-length final chunk.
                last = true
            } else {
                throw AgeError.payloadFailure("chunk \(counter) failed to authenticate")
            }
            plaintext.withUnsafeBytes { release(UnsafeRawBufferPointer(rebasing: $0[start...])) }
            pos = chunk.endIndex
            counter += 1
            if last {
                guard pos == payload.endIndex else { throw AgeError.payloadFailure("trailing data after the last chunk") }
                return
            }
        }
    }
}
