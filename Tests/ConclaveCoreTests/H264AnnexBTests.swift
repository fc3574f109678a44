import ConclaveCore
import ConclaveTestSupport
import Testing

@Suite struct H264AnnexBTests {
    /// Every start code found one byte at a time, cut as ITU-T H.264 Annex B says: what
    /// `.everyStartCode` must agree with.
    static func referenceEveryStartCode(_ data: [UInt8]) -> [H264NALUnit] {
        var codes: [(framing: Int, header: Int)] = []
        var index = 0
        while index + 2 < data.count {
            if data[index] == 0, data[index + 1] == 0, data[index + 2] == 1 {
                let four = index > 0 && data[index - 1] == 0
                codes.append((four ? index - 1 : index, index + 3))
                index += 3
            } else {
                index += 1
            }
        }
        var units: [H264NALUnit] = []
        for (position, code) in codes.enumerated() {
            let end = position + 1 < codes.count ? codes[position + 1].framing : data.count
            guard code.header < end else { continue }
            units.append(
                H264NALUnit(
                    framingStart: code.framing,
                    headerIndex: code.header,
                    end: end,
                    type: H264NALUnitType(header: data[code.header])
                )
            )
        }
        return units
    }

    /// A byte-by-byte transcription of ECall iOS's scanning rule (interop specification §1.2): what
    /// `.ecall` must agree with.
    static func referenceECall(_ data: [UInt8]) -> [H264NALUnit] {
        var units: [H264NALUnit] = []
        var position = 0
        var open: (framing: Int, header: Int)?
        func close(at end: Int) {
            guard let current = open else { return }
            units.append(
                H264NALUnit(
                    framingStart: current.framing,
                    headerIndex: current.header,
                    end: end,
                    type: H264NALUnitType(header: data[current.header])
                )
            )
        }
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
            close(at: position)
            open = (position, position + code)
            position += code + 1
        }
        if let current = open, current.header < data.count { close(at: data.count) }
        return units
    }

    /// Zero-heavy bytes, so start codes, near misses and escapes are dense; every other buffer is
    /// long and mostly random, so the 64-byte blocks of the fast search are crossed at every offset.
    static func randomBitstream(_ generator: inout SeededGenerator, round: Int) -> [UInt8] {
        var data: [UInt8] = []
        switch round % 3 {
        case 0: data = [0, 0, 0, 1]
        case 1: data = [0, 0, 1]
        default: break
        }
        let long = round.isMultiple(of: 2)
        let randomShare: UInt8 = long ? 30 : 3
        for _ in 0..<Int.random(in: long ? 60...400 : 0...40, using: &generator) {
            let random = UInt8.random(in: 0...randomShare, using: &generator) != 0
            data.append(
                random
                    ? UInt8.random(in: 0...255, using: &generator) : UInt8.random(in: 0...1, using: &generator)
            )
        }
        return data
    }

    @Test("both cut rules agree with byte-by-byte reference scanners on 6,000 seeded buffers")
    func scannerMatchesReferences() {
        var generator = SeededGenerator(seed: 0x264)
        for round in 0..<6_000 {
            let data = Self.randomBitstream(&generator, round: round)
            #expect(H264AnnexB.units(in: data) == Self.referenceEveryStartCode(data), "round \(round): \(data)")
            #expect(
                H264AnnexB.units(in: data, rule: .ecall) == Self.referenceECall(data),
                "round \(round): \(data)"
            )
            // Ranges of a slice that does not start at index 0 are in the array's indices, and a
            // slice without any start code is one bare unit.
            let slice = data.dropFirst(min(3, data.count))
            let sliceUnits = Self.referenceEveryStartCode(Array(slice))
            let hasStartCode = slice.indices.dropLast(2).contains {
                slice[$0] == 0 && slice[$0 + 1] == 0 && slice[$0 + 2] == 1
            }
            let expected =
                hasStartCode
                ? sliceUnits.map { ($0.headerIndex + slice.startIndex)..<($0.end + slice.startIndex) }
                : slice.isEmpty ? [] : [slice.startIndex..<slice.endIndex]
            #expect(H264AnnexB.nalUnitRanges(slice) == expected, "round \(round), slice")
        }
    }

    /// One tricky buffer and the units each rule must find in it, as (framing start, header, end).
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var everyStartCode: [[Int]]
        var ecall: [[Int]]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "3- and 4-byte start codes",
            bytes: [0, 0, 0, 1, 0x67, 1, 0, 0, 1, 0x68, 2, 0, 0, 0, 1, 0x65, 3],
            everyStartCode: [[0, 4, 6], [6, 9, 11], [11, 15, 17]],
            ecall: [[0, 4, 6], [6, 9, 11], [11, 15, 17]]
        ),
        Case(
            name: "trailing zeros stay with the unit; a fourth zero before a start code is its own",
            bytes: [0, 0, 1, 0x65, 0xAA, 0, 0, 0, 0, 1, 0x41, 0xBB, 0, 0],
            everyStartCode: [[0, 3, 6], [6, 10, 14]],
            ecall: [[0, 3, 6], [6, 10, 14]]
        ),
        Case(
            name: "emulation-prevention escapes are not start codes",
            bytes: [0, 0, 0, 1, 0x65, 0, 0, 3, 1, 0, 0, 3, 0, 0, 3, 0xFF],
            everyStartCode: [[0, 4, 16]],
            ecall: [[0, 4, 16]]
        ),
        Case(
            name: "a start code cut off at the end: two zeros",
            bytes: [0, 0, 1, 0x41, 0xCC, 0, 0],
            everyStartCode: [[0, 3, 7]],
            ecall: [[0, 3, 7]]
        ),
        Case(
            name: "a start code with no header byte after it",
            bytes: [0, 0, 1, 0x41, 0xCC, 0, 0, 0, 1],
            everyStartCode: [[0, 3, 5]],
            ecall: [[0, 3, 5]]
        ),
        Case(
            name: "an empty unit: a start code right after a start code",
            bytes: [0, 0, 1, 0, 0, 1, 0x65, 7],
            everyStartCode: [[3, 6, 8]],
            ecall: [[0, 3, 8]]
        ),
        Case(
            name: "a header byte of zero that would be a 4-byte start code's leading zero",
            bytes: [0, 0, 1, 0, 0, 0, 1, 0x65, 7],
            everyStartCode: [[3, 7, 9]],
            ecall: [[0, 3, 4], [4, 7, 9]]
        ),
        Case(
            name: "bytes before the first start code are not a unit",
            bytes: [9, 9, 0, 0, 1, 0x06, 5],
            everyStartCode: [[2, 5, 7]],
            ecall: [[2, 5, 7]]
        ),
        Case(name: "no start code at all", bytes: [0x65, 0, 0, 2, 1], everyStartCode: [], ecall: []),
        Case(name: "empty", bytes: [], everyStartCode: [], ecall: []),
    ]

    @Test("each cut rule on tricky inputs", arguments: cases)
    func trickyInputs(_ example: Case) {
        func triples(_ units: [H264NALUnit]) -> [[Int]] { units.map { [$0.framingStart, $0.headerIndex, $0.end] } }
        #expect(triples(H264AnnexB.units(in: example.bytes)) == example.everyStartCode)
        #expect(triples(H264AnnexB.units(in: example.bytes, rule: .ecall)) == example.ecall)
        // Both references agree with the table too, so the fuzz test compares against the right thing.
        #expect(triples(Self.referenceEveryStartCode(example.bytes)) == example.everyStartCode)
        #expect(triples(Self.referenceECall(example.bytes)) == example.ecall)
    }

    @Test func escapesAreReportedInOneScan() {
        let bytes: [UInt8] = [0, 0, 1, 0x65, 0, 0, 3, 1, 0, 0, 2, 0, 0, 0, 1, 0x41, 0, 0, 3]
        var triples: [Int] = []
        let units = H264AnnexB.units(in: bytes, rule: .ecall) { triples.append($0) }
        #expect(units.map(\.type) == [.idrSlice, .nonIDRSlice])
        #expect(triples == [4, 8, 11, 16])
    }

    @Test func unitsRangesAndRewritesAgreeOnAnAccessUnit() {
        // Bytes before the first start code, a 4-byte and two 3-byte start codes, an empty unit.
        let bytes: [UInt8] = [9, 9, 0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 1, 0, 0, 1, 0x65, 4, 5]
        let units = H264AnnexB.units(in: bytes)
        #expect(units.map(\.type) == [.sps, .pps, .idrSlice])
        #expect(units.map(\.framingLength) == [4, 3, 3])
        #expect(H264AnnexB.nalUnitRanges(bytes) == [6..<9, 12..<14, 20..<23])
        #expect(H264AnnexB.nalUnitRanges(bytes[2...]) == [6..<9, 12..<14, 20..<23])
        #expect(
            H264AnnexB.withFourByteStartCodes(bytes)
                == [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5]
        )
        #expect(H264AnnexB.parameterSets(in: bytes) == [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3])
        #expect(H264AnnexB.parameterSets(in: Array(bytes[0..<12])) == nil)
        // Already in 4-byte form: handed back as is.
        let normal: [UInt8] = [0, 0, 0, 1, 0x41, 7]
        #expect(H264AnnexB.withFourByteStartCodes(normal) == normal)
        // No start code: no units, but one bare NAL unit range (an RTP single-NAL payload).
        #expect(H264AnnexB.units(in: [0x65, 1, 2]).isEmpty)
        #expect(H264AnnexB.nalUnitRanges([0x65, 1, 2] as [UInt8]) == [0..<3])
        // A start code with nothing after it: a start code was there, so no bare unit either.
        #expect(H264AnnexB.nalUnitRanges([0x65, 1, 0, 0, 1] as [UInt8]) == [])
        #expect(H264AnnexB.nalUnitRanges([] as [UInt8]) == [])
    }

    @Test func startsWithStartCode() {
        #expect(H264AnnexB.startsWithStartCode([0, 0, 1, 0x65]))
        #expect(H264AnnexB.startsWithStartCode([0, 0, 0, 1]))
        #expect(!H264AnnexB.startsWithStartCode([0, 0, 0, 0, 1]))
        #expect(!H264AnnexB.startsWithStartCode([0, 0, 0, 5, 0x65]))
        #expect(!H264AnnexB.startsWithStartCode([0, 0]))
    }

    @Test func nalUnitTypes() {
        #expect(H264NALUnitType(header: 0x65) == .idrSlice)
        #expect(H264NALUnitType(header: 0x41) == .nonIDRSlice)
        #expect(H264NALUnitType(header: 0x67) == .sps)
        #expect(H264NALUnitType(header: 0x7C) == .fuA)
        #expect(H264NALUnitType(rawValue: 0xE8) == .pps)
        #expect(H264NALUnitType.idrSlice.isSlice && H264NALUnitType.nonIDRSlice.isSlice)
        #expect(!H264NALUnitType.sei.isSlice && !H264NALUnitType(rawValue: 20).isSlice)
        #expect("\(H264NALUnitType.sps)" == "7")
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
}
