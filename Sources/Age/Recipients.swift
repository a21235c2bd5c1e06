import Secrets

/// Something that can wrap a file key into stanzas.
public protocol AgeRecipient {
    func wrap(fileKey: borrowing SecretBytes) -> [AgeStanza]
}

/// Something that can unwrap a file key from a header's stanzas.
public protocol AgeIdentity {
    /// The file key, or nil when no stanza is for this identity. Throws `AgeError.headerFailure`
    /// for a stanza of this identity's type that is malformed.
    func unwrap(_ stanzas: [AgeStanza]) throws -> SecretBytes?
}

enum AgeConst {
    static let fileKeySize = 16
    /// A wrapped file key: 16 bytes plus the Poly1305 tag.
    static let wrappedSize = 32
    static let zeroNonce = [UInt8](repeating: 0, count: 12)
}

private func decodeArg32(_ arg: String, what: String) throws -> [UInt8] {
    guard let b = Base64.decode(arg, alphabet: .standard, padding: .none), b.count == 32 else {
        throw AgeError.headerFailure("invalid \(what)")
    }
    return b
}

// MARK: X25519

public struct X25519Recipient: AgeRecipient, Equatable, Sendable {
    static let label = Array("age-encryption.org/v1/X25519".utf8)
    public let publicKey: [UInt8]

    public init(publicKey: [UInt8]) {
        precondition(publicKey.count == 32)
        self.publicKey = publicKey
    }

    /// Parses `age1…`.
    public init?(parsing text: String) {
        guard let (hrp, data) = Bech32.decode(text), hrp == "age", data.count == 32 else { return nil }
        publicKey = data
    }

    /// `age1…`
    public var encoded: String { Bech32.encode(hrp: "age", data: publicKey) }

    public func wrap(fileKey: borrowing SecretBytes) -> [AgeStanza] {
        let ephemeral = SecretBytes(randomCount: 32)
        let share = Curve25519.publicKey(secret: ephemeral)
        guard var key = Curve25519.sharedSecret(secret: ephemeral, point: publicKey) else {
            // Only a low-order recipient key gets here; nothing encrypted to it is recoverable.
            preconditionFailure("X25519 recipient is a low-order point")
        }
        // The shared secret becomes the wrap key in place.
        HKDF.sha256(replacing: &key, salt: share + publicKey, info: X25519Recipient.label, length: 32)
        let body = ChaChaPoly.seal(key: key, nonce: AgeConst.zeroNonce, fileKey)
        return [AgeStanza(type: "X25519", args: [Base64.encode(share, alphabet: .standard, padded: false)], body: body)]
    }
}

/// An X25519 identity. A class, so that identities can sit in arrays of `AgeIdentity` while the
/// key itself stays one noncopyable `SecretBytes`. `@unchecked Sendable`: every stored property
/// is a `let` set in `init`; the key is never written after.
public final class X25519Identity: AgeIdentity, @unchecked Sendable {
    static let hrp = "age-secret-key-"
    let secretKey: SecretBytes
    /// The public half, computed once.
    public let recipient: X25519Recipient

    public init(secretKey: consuming SecretBytes) {
        precondition(secretKey.count == 32)
        recipient = X25519Recipient(publicKey: Curve25519.publicKey(secret: secretKey))
        self.secretKey = secretKey
    }

    public static func generate() -> X25519Identity { X25519Identity(secretKey: SecretBytes(randomCount: 32)) }

    /// Parses `AGE-SECRET-KEY-1…` from the text of an identity file.
    public convenience init?(parsing text: UnsafeRawBufferPointer) {
        var key = SecretBytes(capacity: 32)
        guard Bech32.decode(text, into: &key) == X25519Identity.hrp, key.count == 32 else { return nil }
        self.init(secretKey: key)
    }

    /// Parses `AGE-SECRET-KEY-1…` (the String itself is an ordinary, unwiped value).
    public convenience init?(parsing text: String) {
        var key = SecretBytes(capacity: 32)
        let hrp = Array(text.utf8).withUnsafeBytes { Bech32.decode($0, into: &key) }
        guard hrp == X25519Identity.hrp, key.count == 32 else { return nil }
        self.init(secretKey: key)
    }

    /// `AGE-SECRET-KEY-1…` (upper case, as age-keygen writes it): as secret as the key.
    public func encoded() -> SecretBytes { Bech32.encode(hrp: X25519Identity.hrp, secret: secretKey, uppercase: true) }

    public func unwrap(_ stanzas: [AgeStanza]) throws -> SecretBytes? {
        let ours = recipient.publicKey
        for s in stanzas where s.type == "X25519" {
            guard s.args.count == 1 else { throw AgeError.headerFailure("X25519 stanza must have one argument") }
            let share = try decodeArg32(s.args[0], what: "X25519 share")
            guard s.body.count == AgeConst.wrappedSize else {
                throw AgeError.headerFailure("X25519 stanza body has the wrong size")
            }
            guard var key = Curve25519.sharedSecret(secret: secretKey, point: share) else {
                throw AgeError.headerFailure("X25519 share is a low-order point")
            }
            // The shared secret becomes the wrap key in place.
            HKDF.sha256(replacing: &key, salt: share + ours, info: X25519Recipient.label, length: 32)
            if let fileKey = ChaChaPoly.open(key: key, nonce: AgeConst.zeroNonce, s.body[...]) { return fileKey }
        }
        return nil
    }
}

// MARK: scrypt

/// The largest scrypt work factor (log2 N) we accept, checked before any scrypt work is done.
/// `age -p` and this store write 18: 256 MiB and about 1 s on the 2-core build machine. 19 took
/// 2.3 s and 20 took 4.1 s and 1 GiB there, too slow for a credential read on every `get`, so
/// anything above 18 is a header failure (the CCTV vectors require refusing at least 23).
public let ageMaxScryptWorkFactor = 18

/// A passphrase recipient. An scrypt stanza must be the only stanza in a header.
public final class ScryptRecipient: AgeRecipient {
    static let label = Array("age-encryption.org/v1/scrypt".utf8)
    let passphrase: SecretBytes
    public let workFactor: Int

    public init(passphrase: consuming SecretBytes, workFactor: Int = 18) {
        precondition(workFactor >= 1 && workFactor <= ageMaxScryptWorkFactor)
        self.passphrase = passphrase
        self.workFactor = workFactor
    }

    public func wrap(fileKey: borrowing SecretBytes) -> [AgeStanza] {
        let salt = Sodium.random(16)
        guard let key = Scrypt.derive(password: passphrase, salt: ScryptRecipient.label + salt, logN: workFactor) else {
            preconditionFailure("scrypt failed (out of memory?)")
        }
        let body = ChaChaPoly.seal(key: key, nonce: AgeConst.zeroNonce, fileKey)
        return [AgeStanza(type: "scrypt", args: [Base64.encode(salt, alphabet: .standard, padded: false), String(workFactor)], body: body)]
    }
}

public final class ScryptIdentity: AgeIdentity, Sendable {
    let passphrase: SecretBytes
    public let maxWorkFactor: Int

    public init(passphrase: consuming SecretBytes, maxWorkFactor: Int = ageMaxScryptWorkFactor) {
        self.passphrase = passphrase
        self.maxWorkFactor = min(maxWorkFactor, ageMaxScryptWorkFactor)
    }

    /// A work factor in canonical decimal: `[1-9][0-9]*`, at most two digits, within the bound.
    static func parseWorkFactor(_ text: String, max: Int) throws -> Int {
        let b = Array(text.utf8)
        guard (1...2).contains(b.count), b[0] >= 49 && b[0] <= 57, b.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw AgeError.headerFailure("invalid scrypt work factor")
        }
        let n = b.reduce(0) { $0 * 10 + Int($1 - 48) }
        guard n <= max else { throw AgeError.headerFailure("scrypt work factor \(n) is too high (at most \(max))") }
        return n
    }

    public func unwrap(_ stanzas: [AgeStanza]) throws -> SecretBytes? {
        if stanzas.contains(where: { $0.type == "scrypt" }) && stanzas.count != 1 {
            throw AgeError.headerFailure("an scrypt stanza must be the only stanza")
        }
        for s in stanzas where s.type == "scrypt" {
            guard s.args.count == 2 else { throw AgeError.headerFailure("scrypt stanza must have two arguments") }
            guard let salt = Base64.decode(s.args[0], alphabet: .standard, padding: .none), salt.count == 16 else {
                throw AgeError.headerFailure("invalid scrypt salt")
            }
            let logN = try ScryptIdentity.parseWorkFactor(s.args[1], max: maxWorkFactor)
            guard s.body.count == AgeConst.wrappedSize else {
                throw AgeError.headerFailure("scrypt stanza body has the wrong size")
            }
            guard let key = Scrypt.derive(password: passphrase, salt: ScryptRecipient.label + salt, logN: logN) else {
                throw AgeError.headerFailure("scrypt failed")
            }
            if let fileKey = ChaChaPoly.open(key: key, nonce: AgeConst.zeroNonce, s.body[...]) { return fileKey }
        }
        return nil
    }
}
