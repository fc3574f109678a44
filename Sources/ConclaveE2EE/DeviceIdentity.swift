import Crypto
import Foundation
import _CryptoExtras

/// The algorithm of a device's long-term key pair.
public enum DeviceKeyType: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// RSA-2048; ECall's fallback and Conclave's default, because every ECall device can wrap for it.
    case rsa
    /// NIST P-256 key agreement; ECall's preferred type on devices with a Secure Enclave.
    case p256

    public var description: String {
        switch self {
        case .rsa: "RSA-2048"
        case .p256: "P-256"
        }
    }
}

/// A device's long-term private key: used to unwrap call keys sent to this device.
///
/// The public half is published exactly as ECall publishes its own (see `publicKeyString`), so ECall
/// clients can wrap call keys for a Conclave device without knowing it is not an iPhone.
/// Not `Sendable`: swift-crypto's RSA key types are not; keep an identity on one task.
public enum DeviceIdentity {
    case rsa(_RSA.Encryption.PrivateKey)
    case p256(P256.KeyAgreement.PrivateKey)

    /// Creates a new key pair of `type`.
    public static func generate(_ type: DeviceKeyType) throws -> DeviceIdentity {
        switch type {
        case .rsa: .rsa(try _RSA.Encryption.PrivateKey(keySize: .bits2048))
        case .p256: .p256(P256.KeyAgreement.PrivateKey())
        }
    }

    /// Restores a key from `privateKeyBytes` as produced by the property of that name.
    public init(type: DeviceKeyType, privateKeyBytes: [UInt8]) throws(KeyMaterialError) {
        switch type {
        case .rsa:
            do {
                self = .rsa(try _RSA.Encryption.PrivateKey(derRepresentation: privateKeyBytes))
            } catch {
                throw .unusableKey(what: "RSA private key", reason: "not PKCS#1 or PKCS#8 DER of 2048 bits or more")
            }
        case .p256:
            guard privateKeyBytes.count == 32 else {
                throw .wrongLength(what: "P-256 private key", expected: 32, actual: privateKeyBytes.count)
            }
            do {
                self = .p256(try P256.KeyAgreement.PrivateKey(rawRepresentation: privateKeyBytes))
            } catch {
                throw .unusableKey(what: "P-256 private key", reason: "scalar out of range")
            }
        }
    }

    /// The key type.
    public var type: DeviceKeyType {
        switch self {
        case .rsa: .rsa
        case .p256: .p256
        }
    }

    /// The private key as stored on disk: PKCS#1 DER for RSA (what ECall keeps in its Keychain), the
    /// 32-byte scalar for P-256.
    public var privateKeyBytes: [UInt8] {
        switch self {
        case .rsa(let key): Array(key.derRepresentation)
        case .p256(let key): Array(key.rawRepresentation)
        }
    }

    /// The public half.
    public var publicKey: DevicePublicKey {
        switch self {
        case .rsa(let key): .rsa(key.publicKey)
        case .p256(let key): .p256(key.publicKey)
        }
    }

    /// The public key string exactly as ECall publishes it: base64 PKCS#1 DER for RSA, base64 of the
    /// 64-byte X‖Y for P-256.
    public var publicKeyString: String { publicKey.publicKeyString }
}

/// A peer's (or our own) public key, parsed from the string ECall publishes.
public enum DevicePublicKey {
    case rsa(_RSA.Encryption.PublicKey)
    case p256(P256.KeyAgreement.PublicKey)

    /// ECall treats a public key string shorter than this as P-256 and anything longer as RSA.
    public static let p256LengthLimit = 150

    /// Parses a published public key string, choosing the type by length as ECall does.
    public init(publicKeyString: String) throws(KeyMaterialError) {
        let trimmed = publicKeyString.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let der = Data(base64Encoded: trimmed) else {
            throw .invalidEncoding(what: "public key", expected: "base64")
        }
        if trimmed.count < Self.p256LengthLimit {
            guard der.count == 64 else {
                throw .wrongLength(what: "P-256 public key (raw X||Y)", expected: 64, actual: der.count)
            }
            do {
                self = .p256(try P256.KeyAgreement.PublicKey(rawRepresentation: der))
            } catch {
                throw .unusableKey(what: "P-256 public key", reason: "point is not on the curve")
            }
        } else {
            do {
                self = .rsa(try _RSA.Encryption.PublicKey(derRepresentation: der))
            } catch {
                throw .unusableKey(what: "RSA public key", reason: "not PKCS#1 or SPKI DER of 2048 bits or more")
            }
        }
    }

    /// The key type.
    public var type: DeviceKeyType {
        switch self {
        case .rsa: .rsa
        case .p256: .p256
        }
    }

    /// The string ECall publishes for this key.
    public var publicKeyString: String {
        switch self {
        case .rsa(let key): key.pkcs1DERRepresentation.base64EncodedString()
        case .p256(let key): key.rawRepresentation.base64EncodedString()
        }
    }

    /// ECall's `publicKeyHash`: lowercase hex SHA-256 of the UTF-8 public key string.
    public var publicKeyHash: String {
        HexCoding.encode(SHA256.hash(data: Array(publicKeyString.utf8)))
    }

    /// The same SHA-256 shown in groups of four hex digits, for reading aloud and comparing by eye.
    public var fingerprint: String {
        let hex = Array(publicKeyHash)
        return stride(from: 0, to: hex.count, by: 4).map { String(hex[$0..<min($0 + 4, hex.count)]) }
            .joined(separator: " ")
    }
}
