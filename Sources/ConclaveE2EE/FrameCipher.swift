import Crypto
import Foundation

/// AES-256-GCM under one key, set up once and kept across frames: what the frame formats seal and
/// open with.
///
/// The formats write ciphertext straight into the outgoing frame and plaintext straight into the
/// opened one, so a cipher works between caller-owned buffers and reports failure as `false`
/// (the formats turn that into their typed errors with the codec and offset). An implementation
/// that keeps its key schedule and writes in place, as OpenSSL's in ConclaveOpenSSL does, costs
/// no allocation per frame; ``SwiftCryptoFrameCipher`` keeps this module pure Swift and usable
/// alone. Both produce the same bytes for the same key, nonce and AAD, so either opens what the
/// other sealed.
///
/// Not thread-safe: each instance belongs to one stage and is used under that stage's lock.
public protocol FrameCipher: AnyObject, SendableMetatype {
    /// A cipher for `key`; nil unless it is ``AES256GCM/keyLength`` bytes and the cipher can be
    /// set up.
    init?(key: UnsafeRawBufferPointer)

    /// Encrypts `plaintext` into `ciphertext` (same length, may not overlap) under the
    /// ``AES256GCM/nonceLength``-byte `nonce`, and writes the ``AES256GCM/tagLength``-byte tag
    /// over `aad` and the ciphertext to `tag`. False only if the cipher fails.
    func seal(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer,
        ciphertext: UnsafeMutableRawPointer,
        tag: UnsafeMutableRawPointer
    ) -> Bool

    /// Decrypts `ciphertext` into `plaintext` (same length, may not overlap) and checks `tag`
    /// over `aad` and the ciphertext. False when the tag does not verify; `plaintext` may then
    /// hold bytes the caller must discard.
    func open(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawPointer,
        plaintext: UnsafeMutableRawPointer
    ) -> Bool
}

/// The sizes AES-256-GCM frame sealing works with.
public enum AES256GCM {
    public static let keyLength = 32
    public static let nonceLength = 12
    public static let tagLength = 16
}

extension FrameCipher {
    /// A cipher for the key in `bytes`; nil unless they are 32 bytes.
    public static func make(key bytes: some ContiguousBytes) -> Self? {
        bytes.withUnsafeBytes { Self(key: $0) }
    }

    /// A cipher for a call key.
    public static func make(key: CallKey) -> Self? {
        key.withUnsafeBytes { Self(key: $0) }
    }
}

/// ``FrameCipher`` on swift-crypto's `AES.GCM`: the default of this module, with no C library of
/// its own to link.
///
/// Slower than a kept OpenSSL context for bulk frames: each call sets up the key schedule again
/// and `AES.GCM` returns new buffers that are then copied into the frame (see `bench/e2ee`, which
/// prints both). The composition layer therefore uses OpenSSL's; this one serves users of the
/// module alone and checks the other in tests.
public final class SwiftCryptoFrameCipher: FrameCipher {
    private let key: SymmetricKey

    public init?(key: UnsafeRawBufferPointer) {
        guard key.count == AES256GCM.keyLength else { return nil }
        self.key = SymmetricKey(data: key)
    }

    public func seal(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer,
        ciphertext: UnsafeMutableRawPointer,
        tag: UnsafeMutableRawPointer
    ) -> Bool {
        guard
            let nonce = try? AES.GCM.Nonce(data: UnsafeRawBufferPointer(start: nonce, count: AES256GCM.nonceLength)),
            let box = try? AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad),
            box.ciphertext.count == plaintext.count, box.tag.count == AES256GCM.tagLength
        else { return false }
        _ = box.ciphertext.copyBytes(to: UnsafeMutableRawBufferPointer(start: ciphertext, count: plaintext.count))
        _ = box.tag.copyBytes(to: UnsafeMutableRawBufferPointer(start: tag, count: AES256GCM.tagLength))
        return true
    }

    public func open(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawPointer,
        plaintext: UnsafeMutableRawPointer
    ) -> Bool {
        guard
            let nonce = try? AES.GCM.Nonce(data: UnsafeRawBufferPointer(start: nonce, count: AES256GCM.nonceLength)),
            let box = try? AES.GCM.SealedBox(
                nonce: nonce,
                ciphertext: ciphertext,
                tag: UnsafeRawBufferPointer(start: tag, count: AES256GCM.tagLength)
            ),
            let opened = try? AES.GCM.open(box, using: key, authenticating: aad),
            opened.count == ciphertext.count
        else { return false }
        _ = opened.copyBytes(to: UnsafeMutableRawBufferPointer(start: plaintext, count: ciphertext.count))
        return true
    }
}
