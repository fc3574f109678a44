import ConclaveCompose
import Foundation
import Testing

@Suite struct AudioMixdownTests {
    /// Expected beep onsets on the call timeline, within 2 ms: the Opus round trip and the
    /// 0.25 ms detection step are all that separates them.
    static let tolerance = 0.002

    static func expectOnsets(_ found: [Double], _ expected: [Double], tolerance: Double = tolerance) {
        #expect(found.count == expected.count, "onsets \(found), expected \(expected)")
        for (actual, wanted) in zip(found, expected) {
            #expect(abs(actual - wanted) <= tolerance, "onset at \(actual), expected \(wanted)")
        }
    }

    @Test func everyBeepLandsAtItsTimeOnTheCallTimelineAndGapsAreSilent() throws {
        var recording = try AudioTestRecording(duration: 10)
        defer { recording.remove() }
        // A from the start; B joins late; C leaves and comes back (two segments).
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0.5, length: 4, beeps: [0.5, 2.0])])
        try recording.add("bob", [.init(file: "b.webm", startOffset: 4.0, length: 5, beeps: [1.0, 3.5], tone: 700)])
        try recording.add(
            "carol",
            [
                .init(file: "c1.webm", startOffset: 0.2, length: 1.5, beeps: [1.0], tone: 500),
                .init(file: "c2.webm", startOffset: 7.0, length: 2, beeps: [0.3], tone: 500),
            ]
        )
        let timeline = try recording.timeline()
        let mixdown = try AudioMixdown(timeline: timeline)
        let samples = try readAll(mixdown, block: 1_000)
        #expect(samples.count == 10 * 48_000 * 2)
        #expect(mixdown.problems.isEmpty)
        Self.expectOnsets(beepOnsets(samples, channels: 2), [1.0, 1.2, 2.5, 5.0, 7.3, 7.5])
        // Mono participants are centred: both channels carry the same signal.
        #expect(stride(from: 0, to: samples.count, by: 2).allSatisfy { samples[$0] == samples[$0 + 1] })
        // Nothing before the first beep (before anyone joined a beep, only silence), up to the
        // onsets' own tolerance: libopus starts the tone's ramp 3 samples before its onset.
        let silent = (48_000 - Int(Self.tolerance * 48_000)) * 2
        #expect(samples[0..<silent].allSatisfy { abs($0) < 0.01 })
    }

    @Test func aLongSegmentWithLostPacketsKeepsItsLastBeepInPlace() throws {
        // Three minutes with a second of packets lost in the middle: placing by counting decoded
        // samples would put every later beep a second early; timestamps keep them in place.
        let length = 180.0
        var recording = try AudioTestRecording(duration: length + 2)
        defer { recording.remove() }
        let beeps = stride(from: 5.0, to: length - 1, by: 20).map { $0 }
        try recording.add(
            "alice",
            [.init(file: "a.webm", startOffset: 1.25, length: length, beeps: beeps, lost: 60.0..<61.0)]
        )
        let mixdown = try AudioMixdown(timeline: try recording.timeline())
        let samples = try readAll(mixdown, block: 48_000)
        // 1 ms: Matroska's timestamp step, which bounds any frame's placement.
        Self.expectOnsets(beepOnsets(samples, channels: 2), beeps.map { $0 + 1.25 }, tolerance: 0.001)
    }

    @Test func aCorruptOrMissingSegmentIsSilenceAndAProblem() throws {
        var recording = try AudioTestRecording(duration: 6)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0, length: 5, beeps: [1.0, 4.0])])
        try recording.add("bob", [.init(file: "b.webm", startOffset: 1, length: 4, beeps: [1.0], corrupt: true)])
        try recording.add("carol", [.init(file: "c.webm", startOffset: 0, length: 4, beeps: [3.0], tone: 500)])
        try FileManager.default.removeItem(atPath: recording.directory + "/c.webm")
        let timeline = try recording.timeline()
        #expect(timeline.problems.count == 1)
        #expect(timeline.problems.first?.contains("c.webm") == true)
        let mixdown = try AudioMixdown(timeline: timeline)
        let samples = try readAll(mixdown)
        #expect(samples.count == 6 * 48_000 * 2)
        Self.expectOnsets(beepOnsets(samples, channels: 2), [1.0, 4.0])
        #expect(mixdown.problems.count == 1)
        #expect(mixdown.problems.first?.contains("b.webm") == true)
        #expect(mixdown.problems.allSatisfy { !$0.contains("\n") })
    }

    @Test func theFileOfARecordingStillGoingIsReadUpToWhereItIsCutWithoutAProblem() throws {
        var recording = try AudioTestRecording(duration: 8)
        recording.status = "recording"
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0, length: 8, beeps: [1.0, 7.0])])
        let path = recording.directory + "/a.webm"
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // Cut in the middle of a cluster, as a file being written is.
        try Data(bytes[0..<(bytes.count * 2 / 3 + 7)]).write(to: URL(fileURLWithPath: path))
        let mixdown = try AudioMixdown(timeline: try recording.timeline())
        let samples = try readAll(mixdown)
        Self.expectOnsets(beepOnsets(samples, channels: 2), [1.0])
        #expect(mixdown.problems.isEmpty, "\(mixdown.problems)")
    }

    @Test func loudVoicesTogetherAreLimitedBelowFullScale() throws {
        var recording = try AudioTestRecording(duration: 3)
        defer { recording.remove() }
        for (index, key) in ["a", "b", "c", "d"].enumerated() {
            try recording.add(
                key,
                [.init(file: "\(key).webm", startOffset: 0, length: 3, beeps: [], amplitude: 0.9, talk: [0.5..<2.5])]
            )
            _ = index
        }
        let samples = try readAll(try AudioMixdown(timeline: try recording.timeline()))
        let peak = samples.map(abs).max() ?? 0
        #expect(peak <= 0.97)
        #expect(peak > 0.5)
    }

    @Test func theMixEndsExactlyAtTheCallsDurationWhateverTheBlockSize() throws {
        var recording = try AudioTestRecording(duration: 2.5)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0, length: 2, beeps: [1.0])])
        let mixdown = try AudioMixdown(timeline: try recording.timeline())
        var total = 0
        while let block = try mixdown.next(frames: 7_777) {
            #expect(block.count % 2 == 0)
            total += block.count / 2
        }
        #expect(total == 120_000)
        #expect(try mixdown.next(frames: 10) == nil)
    }

    @Test func ebuR128NormalisationBringsAQuietCallUpAndKeepsItsLength() throws {
        var recording = try AudioTestRecording(duration: 12)
        defer { recording.remove() }
        try recording.add(
            "alice",
            [.init(file: "a.webm", startOffset: 0, length: 12, beeps: [], amplitude: 0.02, talk: [1..<11])]
        )
        let timeline = try recording.timeline()
        let plain = try readAll(try AudioMixdown(timeline: timeline))
        var options = AudioMixOptions()
        options.loudness = .ebuR128
        let normalised = try readAll(try AudioMixdown(timeline: timeline, options: options))
        #expect(normalised.count == plain.count)
        func rms(_ samples: ArraySlice<Float>) -> Float {
            (samples.reduce(0) { $0 + $1 * $1 } / Float(max(samples.count, 1))).squareRoot()
        }
        let middle = (6 * 48_000 * 2)..<(9 * 48_000 * 2)
        // -16 LUFS is far above a tone at -34 dBFS.
        #expect(rms(normalised[middle]) > rms(plain[middle]) * 4)
        #expect((normalised.map(abs).max() ?? 0) <= 1)
    }
}

@Suite struct AudioDamagedSegmentTests {
    /// Bytes overwritten anywhere in a segment: no trap, the call's full length, the damage as
    /// silence (and a problem line when the decoder noticed).
    @Test(arguments: 0..<12)
    func aSegmentWithDamagedBytesStillMixesToTheCallsLength(seed: Int) throws {
        var recording = try AudioTestRecording(duration: 4)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0.5, length: 3, beeps: [0.5, 2.5])])
        let path = recording.directory + "/a.webm"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var generator = SplitMix(seed: UInt64(seed))
        let damaged = 1 + Int(generator.next() % 64)
        for _ in 0..<damaged {
            // The header (first 200 bytes) in a third of the runs, anywhere in the others.
            let limit = seed % 3 == 0 ? min(200, bytes.count) : bytes.count
            bytes[Int(generator.next() % UInt64(limit))] = UInt8(truncatingIfNeeded: generator.next())
        }
        if seed % 4 == 1 { bytes.removeLast(bytes.count / 3) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let mixdown = try AudioMixdown(timeline: try recording.timeline())
        let samples = try readAll(mixdown)
        #expect(samples.count == 4 * 48_000 * 2)
        #expect(samples.allSatisfy { $0.isFinite && abs($0) <= 1 })
        #expect(mixdown.problems.allSatisfy { !$0.contains("\n") })
    }
}

/// A small deterministic generator, so a failing seed can be run again.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
