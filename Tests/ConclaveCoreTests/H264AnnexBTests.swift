import ConclaveCore
import ConclaveTestSupport
import Testing

@Suite struct H264AnnexBTests {
    /// Every start code, found one byte at a time: what the skipping scan must agree with.
    static func referenceStartCodes(_ bytes: [UInt8]) -> [H264AnnexB.StartCode] {
        var codes: [H264AnnexB.StartCode] = []
        var index = 0
        while index + 2 < bytes.count {
            if bytes[index] == 0, bytes[index + 1] == 0, bytes[index + 2] == 1 {
                let four = index > 0 && bytes[index - 1] == 0
                codes.append(.init(offset: four ? index - 1 : index, length: four ? 4 : 3))
                index += 3
            } else {
                index += 1
            }
        }
        return codes
    }

    @Test func theSkippingScanFindsWhatAByteByByteScanFinds() {
        var generator = SeededGenerator(seed: 0x264)
        for round in 0..<3_000 {
            // Mostly zeros, ones and a few other values, so start codes and near misses are dense.
            let length = Int.random(in: 0...200, using: &generator)
            let bytes = (0..<length).map { _ -> UInt8 in
                switch UInt8.random(in: 0...9, using: &generator) {
                case 0...4: 0
                case 5...7: 1
                default: UInt8.random(in: 2...255, using: &generator)
                }
            }
            #expect(H264AnnexB.startCodes(in: bytes) == Self.referenceStartCodes(bytes), "round \(round): \(bytes)")
            // The same from a slice that does not start at index 0.
            let slice = bytes.dropFirst(min(3, bytes.count))
            let shifted = Self.referenceStartCodes(Array(slice)).map {
                H264AnnexB.StartCode(offset: $0.offset + slice.startIndex, length: $0.length)
            }
            #expect(H264AnnexB.startCodes(in: slice) == shifted, "round \(round), slice")
        }
    }

    @Test func unitsAndRangesAgreeOnAnAccessUnit() {
        // Bytes before the first start code, a 4-byte and two 3-byte start codes, an empty unit.
        let bytes: [UInt8] = [9, 9, 0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 1, 0, 0, 1, 0x65, 4, 5]
        let units = H264AnnexB.nalUnits(in: bytes)
        #expect(units.map(\.type) == [7, 8, 5])
        #expect(units.map(\.startCodeLength) == [4, 3, 3])
        #expect(H264AnnexB.nalUnitRanges(bytes) == [6..<9, 12..<14, 20..<23])
        #expect(H264AnnexB.containsIDR(bytes))
        #expect(!H264AnnexB.containsIDR(Array(bytes[0..<14])))
        #expect(H264AnnexB.withFourByteStartCodes(bytes).count == 4 + 3 + 4 + 2 + 4 + 3)
        // No start code: no units, but one bare NAL unit range (an RTP single-NAL payload).
        #expect(H264AnnexB.nalUnits(in: [0x65, 1, 2]).isEmpty)
        #expect(H264AnnexB.nalUnitRanges([0x65, 1, 2] as [UInt8]) == [0..<3])
    }
}
