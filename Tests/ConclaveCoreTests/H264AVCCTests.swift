import ConclaveCore
import ConclaveTestSupport
import Testing

@Suite struct H264AVCCTests {
    @Test func lengthPrefixedUnitsOfEachSize() throws {
        let four: [UInt8] = [0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68, 0, 0, 0, 3, 0x65, 2, 3]
        let units = try H264AVCC.units(in: four)
        #expect(units.map(\.type) == [.sps, .pps, .idrSlice])
        #expect(units.map(\.range) == [4..<6, 10..<11, 15..<18])
        #expect(units.map(\.framingLength) == [4, 4, 4])
        #expect(try H264AVCC.units(in: [2, 0x41, 9, 1, 0x06], lengthSize: 1).map(\.range) == [1..<3, 4..<5])
        #expect(try H264AVCC.units(in: [0, 1, 0x41], lengthSize: 2).map(\.range) == [2..<3])
        #expect(try H264AVCC.units(in: []).isEmpty)
    }

    @Test("malformed length prefixes give a typed error, never a trap")
    func malformedPrefixes() {
        #expect(throws: H264AVCC.ParseError.truncatedLengthPrefix(offset: 0, lengthSize: 4, available: 3)) {
            try H264AVCC.units(in: [0, 0, 0])
        }
        #expect(throws: H264AVCC.ParseError.truncatedLengthPrefix(offset: 5, lengthSize: 4, available: 2)) {
            try H264AVCC.units(in: [0, 0, 0, 1, 0x41, 0, 0])
        }
        #expect(throws: H264AVCC.ParseError.unitPastEnd(offset: 0, length: 5, available: 2)) {
            try H264AVCC.units(in: [0, 0, 0, 5, 0x41, 1])
        }
        #expect(throws: H264AVCC.ParseError.unitPastEnd(offset: 0, length: 0xFFFF_FFFF, available: 1)) {
            try H264AVCC.units(in: [0xFF, 0xFF, 0xFF, 0xFF, 0x41])
        }
        #expect(throws: H264AVCC.ParseError.emptyUnit(offset: 3)) {
            try H264AVCC.units(in: [0, 1, 0x41, 0, 0, 0, 1, 0x41], lengthSize: 2)
        }
        #expect(throws: H264AVCC.ParseError.unsupportedLengthSize(3)) { try H264AVCC.units(in: [0], lengthSize: 3) }
        #expect("\(H264AVCC.ParseError.emptyUnit(offset: 2))" == "NAL length 0 at offset 2")
    }

    @Test("random bytes either split into units that tile the buffer or give a typed error")
    func fuzz() {
        var generator = SeededGenerator(seed: 0xA7CC)
        for round in 0..<3_000 {
            let lengthSize = [1, 2, 4][round % 3]
            // Small length bytes, so prefixes that fit are common.
            let bytes = (0..<Int.random(in: 0...60, using: &generator)).map { _ in
                UInt8.random(in: 0...(Bool.random(using: &generator) ? 8 : 255), using: &generator)
            }
            do {
                let units = try H264AVCC.units(in: bytes, lengthSize: lengthSize)
                var offset = 0
                for unit in units {
                    #expect(
                        unit.framingStart == offset && unit.framingLength == lengthSize && unit.end > unit.headerIndex
                    )
                    offset = unit.end
                }
                #expect(offset == bytes.count, "round \(round)")
            } catch {
                // Typed: only ParseError can reach here, which the compiler checks.
                _ = error.description
            }
        }
    }

    static let record: [UInt8] = [
        1, 0x42, 0xC0, 0x1E, 0xFF,  // version, profile, compatibility, level, 4-byte lengths
        0xE1, 0, 3, 0x67, 0x42, 0x1E,  // one SPS
        1, 0, 2, 0x68, 0xCE,  // one PPS
    ]

    @Test func decoderConfigurationRecord() throws {
        let configuration = try #require(H264AVCC.DecoderConfiguration(extradata: Self.record))
        #expect(configuration.lengthSize == 4)
        #expect(configuration.parameterSets == [0, 0, 0, 1, 0x67, 0x42, 0x1E, 0, 0, 0, 1, 0x68, 0xCE])
        // Annex-B extradata, a 3-byte length size and a cut-short record are not records.
        #expect(H264AVCC.DecoderConfiguration(extradata: [0, 0, 0, 1, 0x67, 0x42, 0x1E]) == nil)
        var threeByte = Self.record
        threeByte[4] = 0xFE
        #expect(H264AVCC.DecoderConfiguration(extradata: threeByte) == nil)
        #expect(H264AVCC.DecoderConfiguration(extradata: Array(Self.record.dropLast())) == nil)
    }

    @Test("samples become Annex-B, parameter sets go before keyframes that lack them")
    func annexBConversion() throws {
        let configuration = try #require(H264AVCC.DecoderConfiguration(extradata: Self.record))
        let idr: [UInt8] = [0, 0, 0, 2, 0x65, 9]
        #expect(try configuration.annexB(idr, keyframe: false) == [0, 0, 0, 1, 0x65, 9])
        #expect(try configuration.annexB(idr, keyframe: true) == configuration.parameterSets + [0, 0, 0, 1, 0x65, 9])
        let withSPS: [UInt8] = [0, 0, 0, 1, 0x67, 0, 0, 0, 2, 0x65, 9]
        #expect(try configuration.annexB(withSPS, keyframe: true) == [0, 0, 0, 1, 0x67, 0, 0, 0, 1, 0x65, 9])
        #expect(throws: H264AVCC.ParseError.unitPastEnd(offset: 0, length: 3, available: 2)) {
            try configuration.annexB([0, 0, 0, 3, 0x65, 9], keyframe: true)
        }
    }
}
