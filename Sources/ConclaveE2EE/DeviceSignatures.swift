import Crypto
import Foundation
import _CryptoExtras

/// Signatures made with a device's long-term key, so that a peer can tell who sent a key message.
///
/// ECall signs nothing: anyone who can publish to its broker can send a device a key of their
/// choosing. Conclave signs its key messages with the same device key it publishes (no second key
/// to register): a P-256 device signs with ECDSA P-256/SHA-256 using the key-agreement scalar, an
/// RSA device with RSA-PSS/SHA-256 using its RSA key. Verification needs only the public key string
/// a roster already holds.
extension DeviceIdentity {
    /// The signature of `message`: the 64-byte raw ECDSA signature (r‖s) for P-256, the 256-byte
    /// RSA-PSS signature for RSA.
    public func sign(_ message: some DataProtocol) throws(KeyMaterialError) -> [UInt8] {
        switch self {
        case .p256(let key):
            do {
                let signing = try P256.Signing.PrivateKey(rawRepresentation: key.rawRepresentation)
                return Array(try signing.signature(for: message).rawRepresentation)
            } catch {
                throw .unusableKey(what: "P-256 private key", reason: "ECDSA signing failed")
            }
        case .rsa(let key):
            do {
                let signing = try _RSA.Signing.PrivateKey(derRepresentation: key.derRepresentation)
                return Array(try signing.signature(for: message, padding: .PSS).rawRepresentation)
            } catch {
                throw .unusableKey(what: "RSA private key", reason: "RSA-PSS signing failed")
            }
        }
    }
}

extension DevicePublicKey {
    /// Whether `signature` was made over `message` by the private half of this key (see
    /// ``DeviceIdentity/sign(_:)``). Malformed signatures are simply not valid.
    public func isValidSignature(_ signature: some DataProtocol, for message: some DataProtocol) -> Bool {
        switch self {
        case .p256(let key):
            guard let verifying = try? P256.Signing.PublicKey(rawRepresentation: key.rawRepresentation),
                let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
            else { return false }
            return verifying.isValidSignature(parsed, for: message)
        case .rsa(let key):
            guard let verifying = try? _RSA.Signing.PublicKey(derRepresentation: key.derRepresentation) else {
                return false
            }
            return verifying.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: message,
                padding: .PSS
            )
        }
    }
}
