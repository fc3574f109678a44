internal import COpenSSL
import ConclaveE2EE

/// ConclaveE2EE's ``FrameCipher`` on OpenSSL 3: AES-256-GCM under one key, with the key schedule
/// set up once and reused for every frame, sealing and opening straight between caller-owned
/// buffers. The composition layer, the recorder and `bench/e2ee` use it.
///
/// Why OpenSSL when ConclaveE2EE's default is swift-crypto: frame crypto must reach at least
/// 70% of `openssl speed -evp aes-256-gcm` at 16 kB, and swift-crypto's `AES.GCM` cannot. Profiling
/// `bench/e2ee` (`perf record -e cpu-clock -g`, 16 kB `ecall` audio path) showed that of the time in
/// `AES.GCM.seal` only a third was the cipher: each call sets up a new key schedule and GHASH table,
/// `malloc`s the ciphertext and the tag, and then `SealedBox(nonce:ciphertext:tag:)` appends nonce,
/// ciphertext and tag into yet another `Data` (21.7% of all samples against 13.2% for AES-GCM
/// itself), which the caller must copy once more into the outgoing frame. Its public API offers no
/// way to reuse a key or to write into a given buffer, so sealing stayed at 30–42% of OpenSSL's
/// figure at 16 kB (`bench/e2ee/run`, both sides per CPU second). One `EVP_CIPHER_CTX` per key,
/// re-armed with only a new nonce per frame, writes the ciphertext directly into the outgoing frame
/// and reaches 76–99%.
///
/// Opening was less affected: `AES.GCM.open` also copies the whole input into a `SealedBox` and
/// returns a fresh `Data`, but BoringSSL's VAES kernel is faster than OpenSSL 3.0's on CPUs that
/// have VAES, so the `ecall` paths opened at 87–104% of OpenSSL even so, the `sframe` paths (a
/// combined box built per unit) at 58–73%. Opening uses this context too (83–100%), so both
/// directions share one implementation and one key setup per key, including the up to three keys
/// an `ecall` frame may be tried with. OpenSSL 3 is already linked for DTLS, and this module is its
/// one owner; swift-crypto stays for key wrapping, HKDF and the nonce generator.
///
/// Output is byte-identical to ``SwiftCryptoFrameCipher``'s for the same key, nonce and AAD.
///
/// Not thread-safe: each instance belongs to one stage and is used under that stage's lock.
public final class OpenSSLFrameCipher: FrameCipher {
    /// The `EVP_CIPHER_CTX`, keyed at creation.
    private let context: OpaquePointer

    /// A context for the 32-byte `key`; nil when `key` is not 32 bytes or OpenSSL fails.
    public init?(key: UnsafeRawBufferPointer) {
        guard key.count == AES256GCM.keyLength, let keyBase = key.baseAddress,
            let context = EVP_CIPHER_CTX_new()
        else { return nil }
        // Fetched once per context: OpenSSL 3 would otherwise look the cipher up on every init.
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        defer { EVP_CIPHER_free(cipher) }
        guard
            EVP_CipherInit_ex(context, cipher, nil, keyBase.assumingMemoryBound(to: UInt8.self), nil, 1) == 1
        else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Encrypts `plaintext` into `ciphertext` (same length, may not overlap) and writes the 16-byte
    /// tag to `tag`, authenticating `aad`. False only if OpenSSL reports an error.
    public func seal(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer,
        ciphertext: UnsafeMutableRawPointer,
        tag: UnsafeMutableRawPointer
    ) -> Bool {
        guard aad.count <= Int32.max, plaintext.count <= Int32.max,
            EVP_EncryptInit_ex(context, nil, nil, nil, nonce.assumingMemoryBound(to: UInt8.self)) == 1
        else { return false }
        var written: Int32 = 0
        if let aadBase = aad.baseAddress, aad.count > 0 {
            guard
                EVP_EncryptUpdate(context, nil, &written, aadBase.assumingMemoryBound(to: UInt8.self), Int32(aad.count))
                    == 1
            else { return false }
        }
        let output = ciphertext.assumingMemoryBound(to: UInt8.self)
        var total = 0
        if let input = plaintext.baseAddress, plaintext.count > 0 {
            guard
                EVP_EncryptUpdate(
                    context,
                    output,
                    &written,
                    input.assumingMemoryBound(to: UInt8.self),
                    Int32(plaintext.count)
                ) == 1
            else { return false }
            total = Int(written)
        }
        guard EVP_EncryptFinal_ex(context, output + total, &written) == 1,
            total + Int(written) == plaintext.count,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(AES256GCM.tagLength), tag) == 1
        else { return false }
        return true
    }

    /// Decrypts `ciphertext` into `plaintext` (same length, may not overlap) and checks `tag` over
    /// `aad` and the ciphertext. False when the tag does not verify; `plaintext` then holds
    /// unauthenticated bytes the caller must discard.
    public func open(
        nonce: UnsafeRawPointer,
        aad: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawPointer,
        plaintext: UnsafeMutableRawPointer
    ) -> Bool {
        guard aad.count <= Int32.max, ciphertext.count <= Int32.max,
            EVP_DecryptInit_ex(context, nil, nil, nil, nonce.assumingMemoryBound(to: UInt8.self)) == 1
        else { return false }
        var written: Int32 = 0
        if let aadBase = aad.baseAddress, aad.count > 0 {
            guard
                EVP_DecryptUpdate(context, nil, &written, aadBase.assumingMemoryBound(to: UInt8.self), Int32(aad.count))
                    == 1
            else { return false }
        }
        let output = plaintext.assumingMemoryBound(to: UInt8.self)
        var total = 0
        if let input = ciphertext.baseAddress, ciphertext.count > 0 {
            guard
                EVP_DecryptUpdate(
                    context,
                    output,
                    &written,
                    input.assumingMemoryBound(to: UInt8.self),
                    Int32(ciphertext.count)
                ) == 1
            else { return false }
            total = Int(written)
        }
        // OpenSSL copies the expected tag into the context; the pointer is not written through.
        guard
            EVP_CIPHER_CTX_ctrl(
                context,
                EVP_CTRL_GCM_SET_TAG,
                Int32(AES256GCM.tagLength),
                UnsafeMutableRawPointer(mutating: tag)
            )
                == 1
        else { return false }
        return EVP_DecryptFinal_ex(context, output + total, &written) == 1 && total + Int(written) == ciphertext.count
    }
}
