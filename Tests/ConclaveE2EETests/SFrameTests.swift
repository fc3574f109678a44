import ConclaveCore
import ConclaveTestSupport
import Crypto
import Testing

@testable import ConclaveE2EE

@Suite("SFrame (RFC 9605)")
struct SFrameTests {
    @Test("all 289 header vectors of RFC 9605 C.1 encode and parse")
    func headerVectors() throws {
        #expect(rfc9605HeaderVectors.count == 289)
        for vector in rfc9605HeaderVectors {
            let kid = try #require(UInt64(vector.kid, radix: 16))
            let ctr = try #require(UInt64(vector.ctr, radix: 16))
            let expected = hex(vector.header)
            #expect(SFrameHeader(keyID: kid, counter: ctr).bytes == expected, "encode \(vector)")
            let parsed = try SFrameHeader.parse(expected[...] + [0xAA, 0xBB])
            #expect(parsed.header == SFrameHeader(keyID: kid, counter: ctr), "parse \(vector)")
            #expect(parsed.length == expected.count)
        }
    }

    @Test("a header cut short is a typed error, not a crash")
    func truncatedHeader() {
        #expect(throws: SFrameHeaderError.empty) { try SFrameHeader.parse([]) }
        #expect(throws: SFrameHeaderError.truncated(field: "key id", needed: 2, available: 1)) {
            try SFrameHeader.parse([0x99, 0x01])
        }
    }

    /// RFC 9605 C.3, cipher_suite 0x0005 (AES_256_GCM_SHA512_128).
    @Test("RFC 9605 C.3 suite 0x0005: key schedule, nonce, seal and open")
    func suite5Vector() throws {
        let baseKey = hex("000102030405060708090a0b0c0d0e0f")
        let material = SFrameKeyMaterial(baseKey: baseKey, keyID: 0x123)
        #expect(
            SFrameKeyMaterial.label("key ", 0x123)
                == hex("534672616d6520312e3020536563726574206b65792000000000000001230005")
        )
        #expect(
            SFrameKeyMaterial.label("salt ", 0x123)
                == hex("534672616d6520312e30205365637265742073616c74200000000000000123 0005")
        )
        #expect(
            material.key.withUnsafeBytes { Array($0) }
                == hex("d3e27b0d4a5ae9e55df01a70e6d4d28d969b246e2936f4b7a5d9b494da6b9633")
        )
        #expect(material.salt == hex("84991c167b8cd23c93708ec7"))
        #expect(material.nonce(counter: 0x4567).withUnsafeBytes { Array($0) } == hex("84991c167b8cd23c9370cba0"))

        let metadata = hex("4945544620534672616d65205747")
        let plaintext = hex("64726166742d696574662d736672616d652d656e63")
        let expected = hex("990123456794f509d36e9beacb0e261d99c7d1e972f1fed787d4049f17ca21353c1cc24d56ceabced279")
        var sealed = [UInt8]()
        SFrameCipher.seal(
            plaintext[...],
            metadata: metadata[...],
            counter: 0x4567,
            material: material,
            appendingTo: &sealed
        )
        #expect(sealed == expected)

        let opened = try SFrameCipher.open(expected[...], metadata: metadata[...], codec: .opus) { keyID in
            #expect(keyID == 0x123)
            return material
        }
        #expect(opened.plaintext == plaintext)
        #expect(opened.header == SFrameHeader(keyID: 0x123, counter: 0x4567))

        var tampered = expected
        tampered[10] ^= 1
        #expect(throws: FrameDecryptionError.self) {
            try SFrameCipher.open(tampered[...], metadata: metadata[...], codec: .opus) { _ in material }
        }
    }

    @Test("sframe H264: every slice of a multi-slice frame is sealed, NAL headers stay clear")
    func multiSliceH264() throws {
        var rng = SeededGenerator(seed: 11)
        let plain = idrFrame(&rng, sliceSize: 800) + nalUnit(header: 0x65, size: 700, using: &rng)
        let call = makeCall(format: .sframe)
        let sealed = try call.makeEncryptor(codec: .h264, senderID: 5).encrypt(frame(.h264, plain, keyframe: true))
        let plainUnits = H264AnnexB.units(in: plain, rule: .ecall)
        let sealedUnits = H264AnnexB.units(in: sealed.data, rule: .ecall)
        #expect(sealedUnits.map(\.type) == plainUnits.map(\.type))
        // SPS and PPS unchanged; both slices changed and longer.
        #expect(
            Array(sealed.data[sealedUnits[0].framingStart..<sealedUnits[1].end])
                == Array(plain[plainUnits[0].framingStart..<plainUnits[1].end])
        )
        for index in 2...3 {
            let before = plain[(plainUnits[index].headerIndex + 1)..<plainUnits[index].end]
            let after = sealed.data[(sealedUnits[index].headerIndex + 1)..<sealedUnits[index].end]
            #expect(after.count > before.count)
            #expect(!after.starts(with: before.prefix(16)))
        }
        let opened = try call.makeDecryptor(codec: .h264, senderID: 5).decrypt(sealed)
        #expect(opened.data == plain)
    }

    @Test("sframe H264 escapes sealed units whose bytes need it and opens them again")
    func escapedH264Units() throws {
        var rng = SeededGenerator(seed: 13)
        let plain = idrFrame(&rng, sliceSize: 900) + nalUnit(header: 0x65, size: 600, using: &rng)
        let call = makeCall(format: .sframe)
        // Sender 0x10000 gives key id 0x01000000, so every SFrame header is `B0+counter 01 00 00 00`: each
        // sealed unit needs an escape, which takes the second (escaping) pass of the sealer and the
        // unescaping path of the opener.
        let sealed = try call.makeEncryptor(codec: .h264, senderID: 0x10000).encrypt(frame(.h264, plain))
        let units = H264AnnexB.units(in: sealed.data, rule: .ecall)
        #expect(units.map(\.type) == H264AnnexB.units(in: plain, rule: .ecall).map(\.type))
        for unit in units where unit.type == .idrSlice {
            let payload = Array(sealed.data[(unit.headerIndex + 1)..<unit.end])
            // Config byte `1 011 0 CCC` (4-byte key id, counter inline), then the escaped key id.
            #expect(payload.first.map { $0 & 0xF8 } == 0xB0)
            #expect(Array(payload.dropFirst().prefix(4)) == [0x01, 0x00, 0x00, 0x03])
            for index in 0..<max(0, payload.count - 2) {
                #expect(!(payload[index] == 0 && payload[index + 1] == 0 && payload[index + 2] <= 2))
            }
            let unescaped = H264EmulationPrevention.unescape(payload[...])
            #expect(try SFrameHeader.parse(unescaped[...]).header.keyID == 0x0100_0000)
        }
        let opened = try call.makeDecryptor(codec: .h264, senderID: 0x10000).decrypt(sealed)
        #expect(opened.data == plain)
    }

    @Test("sframe VP8 keeps the 10-byte keyframe header and the 3-byte delta header clear")
    func vp8ClearHeader() throws {
        var rng = SeededGenerator(seed: 12)
        let call = makeCall(format: .sframe)
        let encryptor = call.makeEncryptor(codec: .vp8, senderID: 1)
        let decryptor = call.makeDecryptor(codec: .vp8, senderID: 1)
        let keyframe: [UInt8] = [0x50, 0x42, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01] + rng.bytes(500)
        let delta: [UInt8] = [0x31, 0x10, 0x00] + rng.bytes(200)
        for plain in [keyframe, delta] {
            let clear = plain[0] & 1 == 0 ? 10 : 3
            let sealed = try encryptor.encrypt(frame(.vp8, plain))
            #expect(Array(sealed.data.prefix(clear)) == Array(plain.prefix(clear)))
            #expect(sealed.data.count > plain.count + 16)
            #expect(try decryptor.decrypt(sealed).data == plain)
            // The clear header is authenticated: changing it fails the frame.
            var altered = sealed
            altered.data[1] ^= 0x01
            #expect(throws: FrameDecryptionError.self) { try decryptor.decrypt(altered) }
        }
    }

    @Test("sframe counters never repeat across a sender's audio and video streams")
    func sharedCounter() throws {
        let call = makeCall(format: .sframe)
        let audio = call.makeEncryptor(codec: .opus, senderID: 9)
        let video = call.makeEncryptor(codec: .vp8, senderID: 9)
        var seen = Set<UInt64>()
        for _ in 0..<50 {
            let a = try audio.encrypt(frame(.opus, [1, 2, 3]))
            let v = try video.encrypt(frame(.vp8, [0x31, 0, 0, 4, 5]))
            #expect(seen.insert(try SFrameHeader.parse(a.data[...]).header.counter).inserted)
            #expect(seen.insert(try SFrameHeader.parse(v.data[3...]).header.counter).inserted)
        }
    }
}
