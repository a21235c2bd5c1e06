import Secrets
#if canImport(Glibc)
import Glibc
#endif
import CSodium

/// HMAC-SHA-256 and HKDF (libsodium 1.0.18 has no HKDF, so it is built here from HMAC, RFC 5869),
/// X25519, ChaCha20-Poly1305 and scrypt: the primitives age needs, on libsodium.
enum HMAC {
    static func sha256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        var state = crypto_auth_hmacsha256_state()
        var k = key
        if k.isEmpty { k = [0] } // pointer must be valid; length 0 is what counts
        k.withUnsafeBufferPointer { _ = crypto_auth_hmacsha256_init(&state, $0.baseAddress!, key.count) }
        for p in parts where !p.isEmpty {
            p.withUnsafeBufferPointer { _ = crypto_auth_hmacsha256_update(&state, $0.baseAddress, UInt64(p.count)) }
        }
        var out = [UInt8](repeating: 0, count: 32)
        _ = crypto_auth_hmacsha256_final(&state, &out)
        Memory.wipe(&k)
        return out
    }
}

/// HKDF-SHA-256 (RFC 5869).
public enum HKDF {
    public static func sha256(ikm: [UInt8], salt: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 255 * 32)
        // An empty salt is HashLen zero bytes; HMAC pads keys with zeros, so the two are identical.
        var prk = HMAC.sha256(key: salt, ikm)
        defer { Memory.wipe(&prk) }
        var out: [UInt8] = []
        var t: [UInt8] = []
        var counter: UInt8 = 1
        while out.count < length {
            t = HMAC.sha256(key: prk, t, info, [counter])
            out += t
            counter &+= 1
        }
        Memory.wipe(&t)
        return Array(out.prefix(length))
    }
}

/// ChaCha20-Poly1305 (IETF, 12-byte nonce).
enum ChaChaPoly {
    static let tagSize = 16

    static func seal(key: [UInt8], nonce: [UInt8], _ plaintext: [UInt8]) -> [UInt8] {
        precondition(key.count == 32 && nonce.count == 12)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagSize)
        var outLen: UInt64 = 0
        plaintext.withUnsafeBufferPointer { p in
            _ = crypto_aead_chacha20poly1305_ietf_encrypt(&out, &outLen, p.baseAddress, UInt64(p.count),
                                                          nil, 0, nil, nonce, key)
        }
        return out
    }

    static func open(key: [UInt8], nonce: [UInt8], _ ciphertext: ArraySlice<UInt8>) -> [UInt8]? {
        precondition(key.count == 32 && nonce.count == 12)
        guard ciphertext.count >= tagSize else { return nil }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagSize)
        var outLen: UInt64 = 0
        let rc = ciphertext.withUnsafeBufferPointer { c in
            crypto_aead_chacha20poly1305_ietf_decrypt(&out, &outLen, nil, c.baseAddress!, UInt64(c.count),
                                                      nil, 0, nonce, key)
        }
        return rc == 0 ? out : nil
    }
}

enum Curve25519 {
    static func publicKey(secret: [UInt8]) -> [UInt8] {
        precondition(Sodium.ready)
        var out = [UInt8](repeating: 0, count: 32)
        _ = crypto_scalarmult_base(&out, secret)
        return out
    }

    /// X25519(secret, point); nil when the result is the all-zero value (low-order point).
    static func sharedSecret(secret: [UInt8], point: [UInt8]) -> [UInt8]? {
        precondition(Sodium.ready)
        var out = [UInt8](repeating: 0, count: 32)
        let rc = crypto_scalarmult(&out, secret, point)
        // libsodium already refuses an all-zero result; check again so it never depends on that.
        if rc != 0 || sodium_is_zero(out, 32) == 1 { return nil }
        return out
    }
}

enum Scrypt {
    /// scrypt(N = 2^logN, r = 8, p = 1), 32 bytes. Callers bound logN before calling.
    static func derive(password: [UInt8], salt: [UInt8], logN: Int) -> [UInt8]? {
        precondition(Sodium.ready && logN > 0 && logN < 64)
        var out = [UInt8](repeating: 0, count: 32)
        let pw = password.isEmpty ? [0] : password
        let rc = pw.withUnsafeBufferPointer { p in
            salt.withUnsafeBufferPointer { s in
                crypto_pwhash_scryptsalsa208sha256_ll(p.baseAddress!, password.count, s.baseAddress!, s.count,
                                                      UInt64(1) << UInt64(logN), 8, 1, &out, 32)
            }
        }
        return rc == 0 ? out : nil
    }
}
