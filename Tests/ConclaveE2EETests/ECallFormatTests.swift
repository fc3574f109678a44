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
        let units = H264FrameParser.annexBUnits(in: plain)
        let slice = try #require(units.last)
        // Everything up to and including the first slice-header byte is identical.
        #expect(Array(sealed.data[..<(slice.headerIndex + 2)]) == Array(plain[..<(slice.headerIndex + 2)]))
        #expect(Array(sealed.data[(slice.headerIndex + 2)...]) != Array(plain[(slice.headerIndex + 2)...]))
        #expect(H264FrameParser.annexBUnits(in: sealed.data).map(\.type) == [7, 8, 5])
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

    @Test("the Annex-B scanner finds the units ECall's scanner finds")
    func scannerMatchesReference() {
        var rng = SeededGenerator(seed: 4)
        for iteration in 0..<4_000 {
            // Zero-heavy buffers that start with a start code, so start codes and near misses abound;
            // every other one is long and mostly random, so the scanner's 64-byte blocks are covered
            // with start codes at every offset within and across them.
            var data: [UInt8] = Bool.random(using: &rng) ? [0, 0, 0, 1] : [0, 0, 1]
            let long = iteration.isMultiple(of: 2)
            let randomShare: UInt8 = long ? 30 : 3
            let length = Int.random(in: long ? 60...400 : 0...40, using: &rng)
            for _ in 0..<length {
                let random = UInt8.random(in: 0...randomShare, using: &rng) != 0
                data.append(random ? UInt8.random(in: 0...255, using: &rng) : UInt8.random(in: 0...1, using: &rng))
            }
            #expect(H264FrameParser.annexBUnits(in: data) == referenceScan(data), "\(data)")
        }
    }

    @Test("the 00 00 0x search finds the first triple a byte-by-byte search finds")
    func zeroZeroLowMatchesReference() {
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<4_000 {
            let count = Int.random(in: 0...300, using: &rng)
            let zeroOdds = [2, 4, 64, 1_000].randomElement(using: &rng) ?? 64
            var data: [UInt8] = []
            for _ in 0..<count {
                let zero = Int.random(in: 0...zeroOdds, using: &rng) == 0
                // Small values often, so triples, near misses and lone `00 0x` lanes abound.
                let small = Bool.random(using: &rng)
                data.append(
                    zero ? 0 : small ? UInt8.random(in: 1...5, using: &rng) : UInt8.random(in: 6...255, using: &rng)
                )
            }
            let from = Int.random(in: 0...(count + 1), using: &rng)
            let to = Int.random(in: 0...(count + 2), using: &rng)
            let last = max(from, min(to, count) - 2)
            let expected = (from..<last).first { data[$0] == 0 && data[$0 + 1] == 0 && data[$0 + 2] <= 3 }
            let found = data.withUnsafeBytes { ZeroZeroLow.first(in: $0, from: from, to: to) }
            #expect(found == expected, "\(data) from \(from) to \(to)")
        }
    }

    @Test("the 00 00 0x search finds a lone triple at every offset across its 64-byte blocks")
    func zeroZeroLowAtEveryOffset() {
        for from in 0..<3 {
            for position in from..<200 {
                // A near miss (`00 00 04`) after the one real triple and a lone `00 03` before it.
                var data = [UInt8](repeating: 0x80, count: 260)
                data.replaceSubrange(250..<253, with: [0, 0, 4])
                data.replaceSubrange(position..<(position + 3), with: [0, 0, UInt8(position % 4)])
                if position >= from + 8 { data.replaceSubrange((position - 6)..<(position - 4), with: [0, 3]) }
                let found = data.withUnsafeBytes { ZeroZeroLow.first(in: $0, from: from, to: data.count) }
                #expect(found == position, "triple at \(position), search from \(from)")
            }
        }
    }

    /// A byte-by-byte transcription of the scanning rule in the interop specification §1.2.
    func referenceScan(_ data: [UInt8]) -> [NALUnitRange] {
        var units: [NALUnitRange] = []
        var position = 0
        var open: (framing: Int, header: Int)?
        while position + 3 <= data.count {
            let code: Int
            if position + 4 <= data.count && data[position..<(position + 4)] == [0, 0, 0, 1] {
                code = 4
            } else if data[position..<(position + 3)] == [0, 0, 1] {
                code = 3
            } else {
                position += 1
                continue
            }
            if let current = open {
                units.append(
                    NALUnitRange(
                        framingStart: current.framing,
                        headerIndex: current.header,
                        end: position,
                        type: data[current.header] & 0x1F
                    )
                )
            }
            open = (position, position + code)
            position += code + 1
        }
        if let current = open, current.header < data.count {
            units.append(
                NALUnitRange(
                    framingStart: current.framing,
                    headerIndex: current.header,
                    end: data.count,
                    type: data[current.header] & 0x1F
                )
            )
        }
        return units
    }

    @Test("sealed slices never contain a start code, so packetizers cannot split them")
    func noStartCodeEmulation() throws {
        var rng = SeededGenerator(seed: 5)
        let call = makeCall(format: .ecall)
        let encryptor = call.makeEncryptor(codec: .h264, senderID: 1)
        for _ in 0..<200 {
            let plain = pFrame(&rng, size: 4_000)
            let sealed = try encryptor.encrypt(frame(.h264, plain))
            #expect(H264FrameParser.annexBUnits(in: sealed.data).count == 1)
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
            #expect(H264FrameParser.annexBUnits(in: sealed.data).map(\.type) == [1, 6])
            #expect(try decryptor.decrypt(sealed).data == plain)
        }
    }
}
