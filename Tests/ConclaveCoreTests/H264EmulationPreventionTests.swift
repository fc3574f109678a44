import ConclaveCore
import ConclaveTestSupport
import Testing

@Suite struct H264EmulationPreventionTests {
    /// H.264 7.4.1 read one byte at a time: a `03` after two zeros is dropped, and the zeros before
    /// it do not count towards the next one.
    static func referenceUnescape(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var zeros = 0
        for byte in bytes {
            if zeros >= 2, byte == 3 {
                zeros = 0
                continue
            }
            zeros = byte == 0 ? zeros + 1 : 0
            output.append(byte)
        }
        return output
    }

    @Test("unescaping agrees with a byte-by-byte reading on 3,000 seeded buffers")
    func unescapeMatchesReference() {
        var generator = SeededGenerator(seed: 0x703)
        for round in 0..<3_000 {
            let bytes = (0..<Int.random(in: 0...120, using: &generator)).map { _ in
                [0, 0, 0, 3, 1, UInt8.random(in: 0...255, using: &generator)].randomElement(using: &generator) ?? 0
            }
            #expect(H264EmulationPrevention.unescape(bytes[...]) == Self.referenceUnescape(bytes), "round \(round)")
        }
    }

    @Test("escaping leaves no start code or escape look-alike and unescapes to the input")
    func roundTrip() {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<500 {
            // Zero-heavy input ending in a non-zero byte (as a sealed `sframe` unit does).
            let input =
                (0..<Int.random(in: 0...200, using: &generator)).map { _ in
                    UInt8.random(in: 0...7, using: &generator) < 5 ? 0 : UInt8.random(in: 0...4, using: &generator)
                } + [0x80]
            var escaped: [UInt8] = []
            H264EmulationPrevention.escape(input[...], into: &escaped)
            for index in 0..<max(0, escaped.count - 2) {
                #expect(!(escaped[index] == 0 && escaped[index + 1] == 0 && escaped[index + 2] <= 2))
            }
            #expect(H264EmulationPrevention.unescape(escaped[...]) == input)
            let needed = input.withUnsafeBytes { H264EmulationPrevention.needsEscape($0) }
            #expect(needed == (escaped.count != input.count))
        }
    }
}
