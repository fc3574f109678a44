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
            let units = H264AnnexB.units(in: frame.data)
            #expect(units.allSatisfy { $0.framingLength == 4 }, "frame \(index): start codes must be 4 bytes")
            let slices = units.filter(\.type.isSlice)
            #expect(slices.count == 1, "frame \(index) has \(slices.count) slices")
            let slice = try #require(slices.first)
            let header = try #require(SliceHeader(of: slice, in: frame.data))
            #expect(header.firstMacroblock == 0)
            #expect(header.sliceType == 0 || header.sliceType == 2, "frame \(index) slice_type \(header.sliceType)")
            #expect(header.pictureParameterSetID == 0)
            #expect(header.bitLength <= 8, "frame \(index): pps_id ends at bit \(header.bitLength)")
            #expect((header.sliceType == 2) == (slice.type == .idrSlice), "frame \(index): I slices only in IDRs here")
        }
    }

    @Test("SPS and PPS precede every IDR; keyframe on demand arrives on the very next frame")
    func keyframes() throws {
        let frames = try encode()
        var idrs: [Int] = []
        for (index, frame) in frames.enumerated() {
            let types = H264AnnexB.units(in: frame.data).map(\.type)
            if types.contains(.idrSlice) {
                idrs.append(index)
                #expect(Array(types.prefix(2)) == [.sps, .pps], "IDR \(index) starts with \(types)")
                #expect(frame.isKeyframe)
            } else {
                #expect(!frame.isKeyframe)
                #expect(!types.contains(.sps) && !types.contains(.pps))
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
            for rule in [H264AnnexB.CutRule.everyStartCode, .ecall] {
                for unit in H264AnnexB.units(in: bytes, rule: rule) {
                    #expect(
                        unit.framingStart < unit.headerIndex && unit.headerIndex < unit.end && unit.end <= bytes.count
                    )
                    _ = SliceHeader(of: unit, in: bytes)
                }
            }
            _ = H264AnnexB.parameterSets(in: bytes)
            _ = H264AnnexB.withFourByteStartCodes(bytes)
        }
    }
}

/// The first fields of a slice header (ITU-T H.264 7.3.3): enough to check the encoder's output
/// shape that ECall iOS receivers depend on.
struct SliceHeader: Hashable {
    /// `first_mb_in_slice`: 0 for the first (and, for us, only) slice of a picture.
    var firstMacroblock: UInt32
    /// `slice_type`: 0 P, 1 B, 2 I, 3 SP, 4 SI; 5...9 mean the same plus "all slices alike".
    var sliceType: UInt32
    /// `pic_parameter_set_id`.
    var pictureParameterSetID: UInt32
    /// How many bits these three fields took, counted from the byte after the NAL header.
    var bitLength: Int

    /// Parses the start of the slice header of `unit`, a type 1 or 5 unit in `bytes`; nil for
    /// other types or truncated input. Emulation-prevention bytes cannot occur in the first bytes
    /// these fields use, so they are not removed.
    init?(of unit: H264NALUnit, in bytes: [UInt8]) {
        guard unit.type.isSlice else { return nil }
        var reader = ExpGolombReader(bytes: Array(bytes[unit.payloadRange]))
        guard let firstMacroblock = reader.readUnsigned(), let sliceType = reader.readUnsigned(),
            let ppsID = reader.readUnsigned()
        else { return nil }
        self.firstMacroblock = firstMacroblock
        self.sliceType = sliceType
        self.pictureParameterSetID = ppsID
        self.bitLength = reader.bitPosition
    }
}
