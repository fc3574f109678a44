import ConclaveCore
import ConclaveTestSupport
import Crypto
import Testing

@testable import ConclaveE2EE

@Suite("ecall frame format")
struct ECallFormatTests {
    @Test("H264 IDR: SPS/PPS untouched, slice keeps header and one byte clear, grows by 28, round-trips")
    func h264Layout() throws {
        var rng = SeededGenerator(seed: 1)
        let plain = idrFrame(&rng)
        let call = makeCall(format: .ecall)
        let sealed = try call.makeEncryptor(codec: .h264, senderID: 1).encrypt(frame(.h264, plain, keyframe: true))
        #expect(sealed.data.count == plain.count + 28)
        let units = H264AnnexB.units(in: plain, rule: .ecall)
        let slice = try #require(units.last)
        // Everything up to and including the first slice-header byte is identical.
        #expect(Array(sealed.data[..<(slice.headerIndex + 2)]) == Array(plain[..<(slice.headerIndex + 2)]))
        #expect(Array(sealed.data[(slice.headerIndex + 2)...]) != Array(plain[(slice.headerIndex + 2)...]))
        #expect(H264AnnexB.units(in: sealed.data, rule: .ecall).map(\.type) == [.sps, .pps, .idrSlice])
        #expect(sealed.isKeyframe && sealed.rtpTimestamp == 1234)

        // The sealed region is nonce ‖ ciphertext ‖ tag of the original bytes, openable by hand.
        let key = try #require(call.keyRing.current()).key
        let region = sealed.data[(slice.headerIndex + 2)...]
        let box = try AES.GCM.SealedBox(combined: region)
        #expect(Array(try AES.GCM.open(box, using: key.symmetricKey)) == Array(plain[(slice.headerIndex + 2)...]))

        #expect(try call.makeDecryptor(codec: .h264, senderID: 2).decrypt(sealed).data == plain)
    }

    @Test("H264 with two slices is refused: iOS cannot decrypt the second")
    func multipleSlicesRefused() {
        var rng = SeededGenerator(seed: 2)
        let plain = idrFrame(&rng) + nalUnit(header: 0x65, size: 300, using: &rng)
        let call = makeCall(format: .ecall)
        #expect(throws: FrameEncryptionError.multipleSlices(count: 2)) {
            try call.makeEncryptor(codec: .h264, senderID: 1).encrypt(frame(.h264, plain))
        }
    }

    @Test("Opus: 0xFF marker, then nonce, ciphertext and tag (29 bytes of overhead)")
    func audioLayout() throws {
        var rng = SeededGenerator(seed: 3)
        let plain = [0x48] + rng.bytes(99)
        let call = makeCall(format: .ecall)
        let sealed = try call.makeEncryptor(codec: .opus, senderID: 1).encrypt(frame(.opus, plain))
        #expect(sealed.data.count == plain.count + 29)
        #expect(sealed.data[0] == 0xFF)
        let key = try #require(call.keyRing.current()).key
        let box = try AES.GCM.SealedBox(combined: sealed.data[1...])
        #expect(Array(try AES.GCM.open(box, using: key.symmetricKey)) == plain)
        #expect(try call.makeDecryptor(codec: .opus, senderID: 2).decrypt(sealed).data == plain)
    }

    @Test("ecall VP8 passes in clear, with one warning per call")
    func vp8InClear() throws {
        let logs = LogCapture()
        let call = makeCall(format: .ecall, logger: logs.logger)
        let encryptor = call.makeEncryptor(codec: .vp8, senderID: 1)
        let decryptor = call.makeDecryptor(codec: .vp8, senderID: 2)
        let plain: [UInt8] = [0x31, 0x10, 0x00, 1, 2, 3, 4]
        for _ in 0..<5 {
            #expect(try encryptor.encrypt(frame(.vp8, plain)).data == plain)
            #expect(try decryptor.decrypt(frame(.vp8, plain)).data == plain)
        }
        #expect(logs.count(level: .warning, containing: "VP8") == 1)
    }

    @Test("a sender without a key sends nothing rather than plaintext")
    func noKeyNoSend() {
        let call = makeCall(format: .ecall, key: nil)
        #expect(throws: FrameEncryptionError.noKey(codec: .opus)) {
            try call.makeEncryptor(codec: .opus, senderID: 1).encrypt(frame(.opus, [1, 2, 3]))
        }
    }

    @Test("sealed slices never contain a start code, so packetizers cannot split them")
    func noStartCodeEmulation() throws {
        var rng = SeededGenerator(seed: 5)
        let call = makeCall(format: .ecall)
        let encryptor = call.makeEncryptor(codec: .h264, senderID: 1)
        for _ in 0..<200 {
            let plain = pFrame(&rng, size: 4_000)
            let sealed = try encryptor.encrypt(frame(.h264, plain))
            #expect(H264AnnexB.units(in: sealed.data, rule: .ecall).count == 1)
            #expect(
                !ECallFrameFormat.emulatesStartCode(sealed.data, from: 5, to: sealed.data.count, followedByUnit: false)
            )
        }
        // With a unit after the slice, a sealed region ending in zero (1 in 256) would lose that byte
        // to the next start code; the sealer redraws the nonce, so every frame still parses and opens.
        let decryptor = call.makeDecryptor(codec: .h264, senderID: 2)
        for _ in 0..<600 {
            let plain = pFrame(&rng, size: 50) + nalUnit(header: 0x06, size: 8, using: &rng)
            let sealed = try encryptor.encrypt(frame(.h264, plain))
            #expect(H264AnnexB.units(in: sealed.data, rule: .ecall).map(\.type) == [.nonIDRSlice, .sei])
            #expect(try decryptor.decrypt(sealed).data == plain)
        }
    }
}
