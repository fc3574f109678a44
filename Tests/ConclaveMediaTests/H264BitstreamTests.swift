import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveTestSupport
import Testing

/// The H264 encoder's output is what ECall iOS receivers can parse: one slice per frame,
/// slice_type 0 or 2, pps_id 0 inside the one clear slice-header byte, SPS/PPS before every IDR.
@Suite("H264 bitstream shape")
struct H264BitstreamTests {
    static let forcedKeyframes: Set<Int> = [17, 41, 42]

    func encode(frames: Int = 60) throws -> [EncodedFrame] {
        let encoder = try H264Encoder(
            configuration: H264EncoderConfiguration(width: 320, height: 240, bitrate: 500_000)
        )
        let source = try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: frames)
        var output: [EncodedFrame] = []
        var index = 0
        while let picture = try source.nextFrame() {
            let encoded = try encoder.encode(picture, forceKeyframe: Self.forcedKeyframes.contains(index))
            #expect(encoded.count == 1, "frame \(index) gave \(encoded.count) access units")
            output += encoded
            index += 1
        }
        return output
    }

    @Test("One slice per frame, slice_type 0 or 2, first_mb 0, pps_id 0, all inside the first clear byte")
    func sliceHeaders() throws {
        for (index, frame) in try encode().enumerated() {
            let units = H264AnnexB.nalUnits(in: frame.data)
            #expect(units.allSatisfy { $0.startCodeLength == 4 }, "frame \(index): start codes must be 4 bytes")
            let slices = units.filter { $0.type == 1 || $0.type == 5 }
            #expect(slices.count == 1, "frame \(index) has \(slices.count) slices")
            let slice = try #require(slices.first)
            let header = try #require(H264AnnexB.sliceHeader(of: slice))
            #expect(header.firstMacroblock == 0)
            #expect(header.sliceType == 0 || header.sliceType == 2, "frame \(index) slice_type \(header.sliceType)")
            #expect(header.pictureParameterSetID == 0)
            #expect(header.bitLength <= 8, "frame \(index): pps_id ends at bit \(header.bitLength)")
            #expect((header.sliceType == 2) == (slice.type == 5), "frame \(index): I slices only in IDRs here")
        }
    }

    @Test("SPS and PPS precede every IDR; keyframe on demand arrives on the very next frame")
    func keyframes() throws {
        let frames = try encode()
        var idrs: [Int] = []
        for (index, frame) in frames.enumerated() {
            let types = H264AnnexB.nalUnits(in: frame.data).map(\.type)
            if types.contains(5) {
                idrs.append(index)
                #expect(Array(types.prefix(2)) == [7, 8], "IDR \(index) starts with \(types)")
                #expect(frame.isKeyframe)
            } else {
                #expect(!frame.isKeyframe)
                #expect(!types.contains(7) && !types.contains(8))
            }
        }
        #expect(idrs == [0] + Self.forcedKeyframes.sorted())
    }

    @Test("Exp-Golomb reader decodes known codes and rejects truncation")
    func expGolomb() {
        // 1 -> 0, 010 -> 1, 011 -> 2, 00100 -> 3, 00111 -> 6: bits 1 010 011 00100 00111 + padding.
        var reader = ExpGolombReader(bytes: [0b1010_0110, 0b0100_0011, 0b1000_0000])
        #expect(reader.readUnsigned() == 0)
        #expect(reader.readUnsigned() == 1)
        #expect(reader.readUnsigned() == 2)
        #expect(reader.readUnsigned() == 3)
        #expect(reader.readUnsigned() == 6)
        var truncated = ExpGolombReader(bytes: [0b0000_0001])
        #expect(truncated.readUnsigned() == nil)
    }

    @Test("Annex-B parsing of random bytes never traps")
    func fuzzAnnexB() {
        var random = SeededGenerator(seed: 0x264)
        let valid = (try? encode(frames: 3)) ?? []
        for iteration in 0..<3_000 {
            var bytes: [UInt8]
            if iteration % 2 == 0, let base = valid.randomElement(using: &random) {
                bytes = Array(base.data.prefix(200))
                for _ in 0..<Int.random(in: 1...8, using: &random) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            } else {
                bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in
                    [0, 0, 1, UInt8.random(in: 0...255, using: &random)].randomElement(using: &random) ?? 0
                }
            }
            for unit in H264AnnexB.nalUnits(in: bytes) {
                #expect(!unit.payload.isEmpty)
                _ = H264AnnexB.sliceHeader(of: unit)
            }
            _ = H264AnnexB.parameterSets(in: bytes)
            _ = H264AnnexB.withFourByteStartCodes(bytes)
        }
    }
}
