import ConclaveCore
import ConclaveE2EE
import ConclaveTestSupport
import Logging
import Testing

@testable import ConclaveOpenSSL

/// OpenSSL's frame cipher against ConclaveE2EE's swift-crypto default: the same bytes for the same
/// inputs, each opens what the other seals, and both refuse a wrong key or tag.
@Suite("Frame ciphers: OpenSSL and swift-crypto")
struct FrameCipherTests {
    static let ciphers: [any FrameCipher.Type] = [OpenSSLFrameCipher.self, SwiftCryptoFrameCipher.self]

    private static func hex(_ text: String) -> [UInt8] {
        let digits = Array(text.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    private static func bytes(_ count: Int, _ rng: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    /// `nonce ‖ ciphertext ‖ tag`-free result of sealing: ciphertext then tag.
    private static func seal(
        _ cipher: any FrameCipher.Type,
        key: [UInt8],
        nonce: [UInt8],
        aad: [UInt8],
        plaintext: [UInt8]
    ) throws -> [UInt8] {
        let made = cipher.make(key: key)
        let context = try #require(made, "\(cipher) accepts a 32-byte key")
        var output = [UInt8](repeating: 0, count: plaintext.count + AES256GCM.tagLength)
        let sealed = nonce.withUnsafeBytes { nonce in
            aad.withUnsafeBytes { aad in
                plaintext.withUnsafeBytes { plaintext in
                    output.withUnsafeMutableBytes { output in
                        context.seal(
                            nonce: nonce.baseAddress!,
                            aad: aad,
                            plaintext: plaintext,
                            ciphertext: output.baseAddress!,
                            tag: output.baseAddress! + plaintext.count
                        )
                    }
                }
            }
        }
        try #require(sealed, "\(cipher) sealed")
        return output
    }

    /// The plaintext, or nil when the tag does not verify.
    private static func open(
        _ cipher: any FrameCipher.Type,
        key: [UInt8],
        nonce: [UInt8],
        aad: [UInt8],
        sealed: [UInt8]
    ) throws -> [UInt8]? {
        let made = cipher.make(key: key)
        let context = try #require(made, "\(cipher) accepts a 32-byte key")
        let count = sealed.count - AES256GCM.tagLength
        var plaintext = [UInt8](repeating: 0, count: max(count, 1))
        let opened = nonce.withUnsafeBytes { nonce in
            aad.withUnsafeBytes { aad in
                sealed.withUnsafeBytes { sealed in
                    plaintext.withUnsafeMutableBytes { plaintext in
                        context.open(
                            nonce: nonce.baseAddress!,
                            aad: aad,
                            ciphertext: UnsafeRawBufferPointer(rebasing: sealed[0..<count]),
                            tag: sealed.baseAddress! + count,
                            plaintext: plaintext.baseAddress!
                        )
                    }
                }
            }
        }
        return opened ? Array(plaintext.prefix(count)) : nil
    }

    @Test("RFC 9605 C.3 suite 0x0005: both ciphers seal the vector's bytes and open them")
    func rfc9605Vector() throws {
        let material = SFrameKeyMaterial(baseKey: Self.hex("000102030405060708090a0b0c0d0e0f"), keyID: 0x123)
        let metadata = Self.hex("4945544620534672616d65205747")
        let plaintext = Self.hex("64726166742d696574662d736672616d652d656e63")
        let expected = Self.hex("990123456794f509d36e9beacb0e261d99c7d1e972f1fed787d4049f17ca21353c1cc24d56ceabced279")
        for cipher in Self.ciphers {
            var sealed: [UInt8] = []
            SFrameCipher.seal(
                plaintext[...],
                metadata: metadata[...],
                counter: 0x4567,
                material: material,
                cipher: cipher,
                appendingTo: &sealed
            )
            #expect(sealed == expected, "\(cipher)")
            for opener in Self.ciphers {
                let opened = try SFrameCipher.open(expected[...], metadata: metadata[...], codec: .opus, cipher: opener)
                {
                    _ in material
                }
                #expect(opened.plaintext == plaintext, "\(cipher) sealed, \(opener) opened")
                var tampered = expected
                tampered[tampered.count - 1] ^= 1
                #expect(throws: FrameDecryptionError.self, "\(opener) refuses a changed tag") {
                    try SFrameCipher.open(tampered[...], metadata: metadata[...], codec: .opus, cipher: opener) {
                        _ in material
                    }
                }
            }
        }
    }

    @Test(
        "same key, nonce and AAD: identical ciphertext and tag, each opens the other's",
        arguments: [0, 1, 100, 16_384, 30_000]
    )
    func identicalOutput(size: Int) throws {
        var rng = SeededGenerator(seed: UInt64(size) + 1)
        for _ in 0..<4 {
            let key = Self.bytes(AES256GCM.keyLength, &rng)
            let nonce = Self.bytes(AES256GCM.nonceLength, &rng)
            let aad = Self.bytes(Int.random(in: 0...40, using: &rng), &rng)
            let plaintext = Self.bytes(size, &rng)
            let openssl = try Self.seal(OpenSSLFrameCipher.self, key: key, nonce: nonce, aad: aad, plaintext: plaintext)
            let swiftCrypto = try Self.seal(
                SwiftCryptoFrameCipher.self,
                key: key,
                nonce: nonce,
                aad: aad,
                plaintext: plaintext
            )
            #expect(openssl == swiftCrypto)
            #expect(
                try Self.open(SwiftCryptoFrameCipher.self, key: key, nonce: nonce, aad: aad, sealed: openssl)
                    == plaintext
            )
            #expect(
                try Self.open(OpenSSLFrameCipher.self, key: key, nonce: nonce, aad: aad, sealed: swiftCrypto)
                    == plaintext
            )
        }
    }

    @Test("a wrong key, a changed tag, ciphertext or AAD is refused by both")
    func refusals() throws {
        var rng = SeededGenerator(seed: 9)
        let key = Self.bytes(AES256GCM.keyLength, &rng)
        let nonce = Self.bytes(AES256GCM.nonceLength, &rng)
        let aad = Self.bytes(8, &rng)
        let sealed = try Self.seal(
            OpenSSLFrameCipher.self,
            key: key,
            nonce: nonce,
            aad: aad,
            plaintext: Self.bytes(300, &rng)
        )
        var wrongKey = key
        wrongKey[0] ^= 0x80
        var changedTag = sealed
        changedTag[changedTag.count - 1] ^= 1
        var changedCiphertext = sealed
        changedCiphertext[0] ^= 1
        var changedAAD = aad
        changedAAD[7] ^= 1
        for cipher in Self.ciphers {
            #expect(try Self.open(cipher, key: wrongKey, nonce: nonce, aad: aad, sealed: sealed) == nil, "\(cipher)")
            #expect(try Self.open(cipher, key: key, nonce: nonce, aad: aad, sealed: changedTag) == nil, "\(cipher)")
            #expect(
                try Self.open(cipher, key: key, nonce: nonce, aad: aad, sealed: changedCiphertext) == nil,
                "\(cipher)"
            )
            #expect(try Self.open(cipher, key: key, nonce: nonce, aad: changedAAD, sealed: sealed) == nil, "\(cipher)")
            let refusesShortKey = cipher.make(key: [UInt8](repeating: 1, count: 16)) == nil
            #expect(refusesShortKey, "\(cipher) refuses a 16-byte key")
        }
    }

    /// Frames as the stages make them: an Opus packet and an H264 IDR frame (parameter sets in
    /// clear, one slice sealed).
    private static func frames(_ rng: inout SeededGenerator) -> [EncodedFrame] {
        let opus = EncodedFrame(codec: .opus, data: bytes(160, &rng), rtpTimestamp: 1, isKeyframe: false)
        var h264: [UInt8] = [0, 0, 0, 1, 0x67] + bytes(12, &rng).map { $0 | 1 }
        h264 += [0, 0, 0, 1, 0x68] + bytes(4, &rng).map { $0 | 1 }
        h264 += [0, 0, 0, 1, 0x65] + bytes(3_000, &rng).map { $0 | 1 }
        let idr = EncodedFrame(codec: .h264, data: h264, rtpTimestamp: 2, isKeyframe: true)
        let vp8 = EncodedFrame(
            codec: .vp8,
            data: [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A] + bytes(500, &rng),
            rtpTimestamp: 3,
            isKeyframe: true
        )
        return [opus, idr, vp8]
    }

    @Test(
        "frames sealed by one cipher's stages are opened by the other's, in both formats",
        arguments: FrameCryptoFormat.allCases
    )
    func stagesInteroperate(format: FrameCryptoFormat) throws {
        var rng = SeededGenerator(seed: 21)
        let ring = CallKeyRing()
        ring.install(CallKey.random(), epoch: 0)
        let call = CallFrameCrypto(callID: 5, format: format, keyRing: ring, logger: Logger(label: "test"))
        for frame in Self.frames(&rng) {
            for sealer in Self.ciphers {
                let sealed = try call.makeEncryptor(codec: frame.codec, senderID: 1, cipher: sealer).encrypt(frame)
                for opener in Self.ciphers {
                    let opened = try call.makeDecryptor(codec: frame.codec, senderID: 1, cipher: opener).decrypt(sealed)
                    #expect(opened.data == frame.data, "\(format) \(frame.codec): \(sealer) sealed, \(opener) opened")
                }
            }
        }
    }

    @Test("a frame under another key is refused by both ciphers' stages", arguments: FrameCryptoFormat.allCases)
    func stagesRefuseWrongKey(format: FrameCryptoFormat) throws {
        var rng = SeededGenerator(seed: 22)
        let senderRing = CallKeyRing()
        senderRing.install(CallKey.random(), epoch: 0)
        let receiverRing = CallKeyRing()
        receiverRing.install(CallKey.random(), epoch: 0)
        let sender = CallFrameCrypto(callID: 5, format: format, keyRing: senderRing, logger: Logger(label: "test"))
        let receiver = CallFrameCrypto(callID: 5, format: format, keyRing: receiverRing, logger: Logger(label: "test"))
        for frame in Self.frames(&rng) where frame.codec != .vp8 || format == .sframe {
            let sealed = try sender.makeEncryptor(codec: frame.codec, senderID: 1, cipher: OpenSSLFrameCipher.self)
                .encrypt(frame)
            for opener in Self.ciphers {
                let decryptor = receiver.makeDecryptor(codec: frame.codec, senderID: 1, cipher: opener)
                #expect("\(format) \(frame.codec) \(opener)") {
                    try decryptor.decrypt(sealed)
                } throws: { error in
                    (error as? FrameDecryptionError)?.reason == .authenticationFailed
                }
            }
        }
    }
}
