import Crypto
import Foundation
import _CryptoExtras

/// Wraps and unwraps the call key for one recipient device, in ECall's `encryptedAESKey` formats.
///
/// - RSA recipients: base64 of RSA-OAEP (SHA-256, MGF1-SHA-256, empty label) over the 32 key bytes.
/// - P-256 recipients: `"<sender public key b64>:<box b64>"`, where the box is AES-256-GCM
///   `nonce ‖ ciphertext ‖ tag` (60 bytes) under HKDF-SHA256(ECDH x-coordinate, empty salt,
///   info "ecall-e2ee-key", 32 bytes). ECall does not check the embedded sender key against the
///   server, so Conclave wraps with a fresh ephemeral key each time.
public enum KeyWrapping {
    /// The HKDF info string ECall uses for the P-256 wrapping key.
    static let hkdfInfo = Array("ecall-e2ee-key".utf8)

    /// The wrap format a string is in, chosen as ECall's receiver chooses it.
    public enum Format: String, Sendable, Equatable {
        /// `"<sender pub>:<box>"`.
        case p256Box = "P-256"
        /// Only the caller's public key: the session key is HKDF(ECDH) itself (ECall's receive-only
        /// legacy one-to-one format).
        case p256Legacy = "P-256 legacy"
        /// Base64 RSA-OAEP-SHA256.
        case rsaOAEP = "RSA-OAEP"

        /// ":" present means the box format; otherwise a string under 150 characters is the legacy
        /// format and anything longer is RSA.
        public init(wrapped: String) {
            if wrapped.contains(":") {
                self = .p256Box
            } else if wrapped.count < DevicePublicKey.p256LengthLimit {
                self = .p256Legacy
            } else {
                self = .rsaOAEP
            }
        }
    }

    /// Wraps `key` for the device whose published public key string is `recipient`.
    public static func wrap(_ key: CallKey, for recipient: DevicePublicKey) throws(KeyMaterialError) -> String {
        switch recipient {
        case .rsa(let publicKey):
            do {
                let sealed = try key.withUnsafeBytes { try publicKey.encrypt(Data($0), padding: .PKCS1_OAEP_SHA256) }
                return sealed.base64EncodedString()
            } catch {
                throw .unusableKey(what: "RSA public key", reason: "OAEP encryption failed")
            }
        case .p256(let publicKey):
            let ephemeral = P256.KeyAgreement.PrivateKey()
            do {
                let wrappingKey = try p256WrappingKey(ephemeral, publicKey)
                let box = try key.withUnsafeBytes { try AES.GCM.seal(Data($0), using: wrappingKey) }
                guard let combined = box.combined else {
                    throw KeyMaterialError.unusableKey(what: "P-256 wrap", reason: "no combined box")
                }
                return ephemeral.publicKey.rawRepresentation.base64EncodedString() + ":"
                    + combined.base64EncodedString()
            } catch {
                throw .unusableKey(what: "P-256 public key", reason: "key agreement failed")
            }
        }
    }

    /// Unwraps a call key sent to this device, choosing the format from the string as ECall does.
    public static func unwrap(_ wrapped: String, with identity: DeviceIdentity) throws(KeyMaterialError) -> CallKey {
        let text = wrapped.trimmingCharacters(in: .whitespacesAndNewlines)
        let format = Format(wrapped: text)
        switch (format, identity) {
        case (.p256Box, .p256(let privateKey)):
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw .invalidEncoding(what: "P-256 wrapped key", expected: "exactly one ':' separator")
            }
            let sender = try DevicePublicKey(publicKeyString: String(parts[0]))
            guard case .p256(let senderKey) = sender else {
                throw .keyTypeMismatch(expected: "P-256 sender", actual: sender.type.description)
            }
            guard let boxBytes = Data(base64Encoded: String(parts[1])) else {
                throw .invalidEncoding(what: "P-256 wrapped key box", expected: "base64")
            }
            guard boxBytes.count == 12 + CallKey.byteCount + 16 else {
                throw .wrongLength(what: "P-256 wrapped key box", expected: 60, actual: boxBytes.count)
            }
            do {
                let wrappingKey = try p256WrappingKey(privateKey, senderKey)
                let opened = try AES.GCM.open(AES.GCM.SealedBox(combined: boxBytes), using: wrappingKey)
                return try CallKey(bytes: opened)
            } catch {
                throw .unwrapFailed(format: format.rawValue)
            }
        case (.p256Legacy, .p256(let privateKey)):
            let sender = try DevicePublicKey(publicKeyString: text)
            guard case .p256(let senderKey) = sender else {
                throw .keyTypeMismatch(expected: "P-256 sender", actual: sender.type.description)
            }
            do {
                let derived = try p256WrappingKey(privateKey, senderKey)
                return try derived.withUnsafeBytes { try CallKey(bytes: Array($0)) }
            } catch {
                throw .unwrapFailed(format: format.rawValue)
            }
        case (.rsaOAEP, .rsa(let privateKey)):
            guard let sealed = Data(base64Encoded: text) else {
                throw .invalidEncoding(what: "RSA wrapped key", expected: "base64")
            }
            do {
                return try CallKey(bytes: try privateKey.decrypt(sealed, padding: .PKCS1_OAEP_SHA256))
            } catch {
                throw .unwrapFailed(format: format.rawValue)
            }
        case (.p256Box, .rsa), (.p256Legacy, .rsa):
            throw .keyTypeMismatch(expected: "P-256", actual: identity.type.description)
        case (.rsaOAEP, .p256):
            throw .keyTypeMismatch(expected: "RSA", actual: identity.type.description)
        }
    }

    /// HKDF-SHA256 over the ECDH x-coordinate, empty salt, info "ecall-e2ee-key", 32 bytes.
    static func p256WrappingKey(
        _ privateKey: P256.KeyAgreement.PrivateKey,
        _ publicKey: P256.KeyAgreement.PublicKey
    ) throws -> SymmetricKey {
        let shared = try privateKey.sharedSecretFromKeyAgreement(with: publicKey)
        return shared.hkdfDerivedSymmetricKey(
            using: SHA256.self,
            salt: [UInt8](),
            sharedInfo: hkdfInfo,
            outputByteCount: 32
        )
    }
}
