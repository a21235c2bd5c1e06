import Secrets
import CSodium

/// HMAC-SHA-256 and HKDF (libsodium 1.0.18 has no HKDF, so it is built here from HMAC, RFC 5869),
/// X25519, ChaChaPoly and scrypt: the primitives age needs, on libsodium. Keys, shared secrets
/// and plaintexts are `SecretBytes`; ciphertexts, MACs and public keys are arrays.
enum HMAC {
    /// HMAC-SHA-256 of the concatenated `parts` under `key`, written to the 32 bytes at `out`.
    /// libsodium zeroes its own state and key pads in `crypto_auth_hmacsha256_final`/`_init`.
    static func sha256(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawPointer) {
        var state = crypto_auth_hmacsha256_state()
        var none: UInt8 = 0 // the key pointer must be valid; a length of 0 is what counts
        withUnsafeMutablePointer(to: &none) { fallback in
            let k = key.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(fallback)
            _ = crypto_auth_hmacsha256_init(&state, k, key.count)
        }
        for p in parts where p.count > 0 {
            _ = crypto_auth_hmacsha256_update(&state, p.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(p.count))
        }
        _ = crypto_auth_hmacsha256_final(&state, out.assumingMemoryBound(to: UInt8.self))
    }

    /// A MAC (not secret) of `message` under `key`.
    static func sha256(key: borrowing SecretBytes, _ message: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { out, initialized in
            key.withUnsafeBytes { k in
                message.withUnsafeBytes { m in sha256(key: k, [m], into: UnsafeMutableRawPointer(out.baseAddress!)) }
            }
            initialized = 32
        }
    }
}

/// HKDF-SHA-256 (RFC 5869). The PRK and each T(i) block exist only in a 64-byte scratch on the
/// call's stack, zeroed with `sodium_memzero` before it returns. Each value costs a guarded
/// mapping, so the `into:`/`replacing:` forms let a caller derive into a value it already has.
public enum HKDF {
    /// `length` bytes of output keying material from `ikm`, as a new value.
    public static func sha256(ikm: borrowing SecretBytes, salt: [UInt8], info: [UInt8], length: Int) -> SecretBytes {
        var out = SecretBytes(capacity: length)
        sha256(ikm: ikm, salt: salt, info: info, length: length, into: &out)
        return out
    }

    /// The same, written into `out` (whatever it held is wiped first).
    public static func sha256(ikm: borrowing SecretBytes, salt: [UInt8], info: [UInt8], length: Int, into out: inout SecretBytes) {
        withScratch { prk, t in
            ikm.withUnsafeBytes { extract($0, salt: salt, into: prk) }
            expand(prk, t, info: info, length: length, into: &out)
        }
    }

    /// Replaces `key` with the derivation from it (an X25519 shared secret becomes the wrap key
    /// in the same value): `key` is read in full before anything is written.
    public static func sha256(replacing key: inout SecretBytes, salt: [UInt8], info: [UInt8], length: Int) {
        withScratch { prk, t in
            key.withUnsafeBytes { extract($0, salt: salt, into: prk) }
            expand(prk, t, info: info, length: length, into: &key)
        }
    }

    private static func withScratch(_ body: (UnsafeMutableRawPointer, UnsafeMutableRawPointer) -> Void) {
        withUnsafeTemporaryAllocation(byteCount: 64, alignment: 16) { scratch in
            let prk = scratch.baseAddress!
            body(prk, prk + 32)
            sodium_memzero(prk, 64)
        }
    }

    /// PRK = HMAC(salt, ikm). An empty salt is HashLen zero bytes; HMAC pads keys with zeros, so
    /// the two are identical.
    private static func extract(_ ikm: UnsafeRawBufferPointer, salt: [UInt8], into prk: UnsafeMutableRawPointer) {
        salt.withUnsafeBytes { HMAC.sha256(key: $0, [ikm], into: prk) }
    }

    /// T(i) = HMAC(PRK, T(i-1) | info | i), concatenated into `out` (emptied first).
    private static func expand(_ prk: UnsafeMutableRawPointer, _ t: UnsafeMutableRawPointer, info: [UInt8], length: Int,
                               into out: inout SecretBytes) {
        precondition(length >= 0 && length <= 255 * 32)
        out.truncate(to: 0)
        out.reserveCapacity(length)
        var counter: UInt8 = 1
        while out.count < length {
            let previous = UnsafeRawBufferPointer(start: t, count: counter == 1 ? 0 : 32)
            info.withUnsafeBytes { i in
                withUnsafeBytes(of: counter) { c in
                    HMAC.sha256(key: UnsafeRawBufferPointer(start: prk, count: 32), [previous, i, c], into: t)
                }
            }
            out.append(UnsafeRawBufferPointer(start: t, count: min(32, length - out.count)))
            counter &+= 1
        }
    }
}

/// ChaCha20-Poly1305 (IETF, 12-byte nonce).
enum ChaChaPoly {
    static let tagSize = 16

    static func seal(key: borrowing SecretBytes, nonce: [UInt8], _ plaintext: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(key.count == 32 && nonce.count == 12)
        return [UInt8](unsafeUninitializedCapacity: plaintext.count + tagSize) { out, initialized in
            var outLen: UInt64 = 0
            key.withUnsafeBytes { k in
                _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                    out.baseAddress!, &outLen, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                    nil, 0, nil, nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            initialized = Int(outLen)
        }
    }

    static func seal(key: borrowing SecretBytes, nonce: [UInt8], _ plaintext: borrowing SecretBytes) -> [UInt8] {
        plaintext.withUnsafeBytes { seal(key: key, nonce: nonce, $0) }
    }

    /// Authenticates and decrypts `ciphertext`, appending the plaintext to `out`. False, with
    /// nothing appended, when it does not authenticate.
    static func open(key: borrowing SecretBytes, nonce: [UInt8], _ ciphertext: ArraySlice<UInt8>, appendingTo out: inout SecretBytes) -> Bool {
        precondition(key.count == 32 && nonce.count == 12)
        guard ciphertext.count >= tagSize else { return false }
        var ok = false
        out.append(upTo: ciphertext.count - tagSize) { room in
            var outLen: UInt64 = 0
            let rc = key.withUnsafeBytes { k in
                ciphertext.withUnsafeBufferPointer { c in
                    crypto_aead_chacha20poly1305_ietf_decrypt(
                        room.baseAddress?.assumingMemoryBound(to: UInt8.self), &outLen, nil, c.baseAddress!, UInt64(c.count),
                        nil, 0, nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            ok = rc == 0
            return ok ? Int(outLen) : 0
        }
        return ok
    }

    /// A small authenticated plaintext (a wrapped file key) of its own, or nil.
    static func open(key: borrowing SecretBytes, nonce: [UInt8], _ ciphertext: ArraySlice<UInt8>) -> SecretBytes? {
        var out = SecretBytes(capacity: max(0, ciphertext.count - tagSize))
        guard open(key: key, nonce: nonce, ciphertext, appendingTo: &out) else { return nil }
        return out
    }
}

enum Curve25519 {
    static func publicKey(secret: borrowing SecretBytes) -> [UInt8] {
        precondition(Sodium.ready && secret.count == 32)
        return [UInt8](unsafeUninitializedCapacity: 32) { out, initialized in
            secret.withUnsafeBytes { _ = crypto_scalarmult_base(out.baseAddress!, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
            initialized = 32
        }
    }

    /// X25519(secret, point); nil when the result is the all-zero value (low-order point).
    static func sharedSecret(secret: borrowing SecretBytes, point: [UInt8]) -> SecretBytes? {
        precondition(Sodium.ready && secret.count == 32 && point.count == 32)
        var out = SecretBytes(zeros: 32)
        let rc = out.withUnsafeMutableBytes { o in
            secret.withUnsafeBytes { s in
                crypto_scalarmult(o.baseAddress!.assumingMemoryBound(to: UInt8.self), s.baseAddress!.assumingMemoryBound(to: UInt8.self), point)
            }
        }
        // libsodium already refuses an all-zero result; check again so it never depends on that.
        let zero = out.withUnsafeBytes { sodium_is_zero($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 32) == 1 }
        return rc == 0 && !zero ? consume out : nil
    }
}

enum Scrypt {
    /// scrypt(N = 2^logN, r = 8, p = 1), 32 bytes. Callers bound logN before calling.
    static func derive(password: borrowing SecretBytes, salt: [UInt8], logN: Int) -> SecretBytes? {
        precondition(Sodium.ready && logN > 0 && logN < 64)
        var out = SecretBytes(zeros: 32)
        var none: UInt8 = 0 // the password pointer must be valid; a length of 0 is what counts
        let rc = out.withUnsafeMutableBytes { o in
            password.withUnsafeBytes { p in
                withUnsafeMutablePointer(to: &none) { fallback in
                    crypto_pwhash_scryptsalsa208sha256_ll(
                        p.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(fallback), p.count, salt, salt.count,
                        UInt64(1) << UInt64(logN), 8, 1, o.baseAddress!.assumingMemoryBound(to: UInt8.self), 32)
                }
            }
        }
        return rc == 0 ? consume out : nil
    }
}
