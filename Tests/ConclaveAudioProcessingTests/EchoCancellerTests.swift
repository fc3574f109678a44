import ConclaveAudioProcessing
import ConclaveCore
import Foundation
import Testing

/// A seeded generator (SplitMix64), so the room's signals are the same on every run.
private struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A simulated room: the far end's speech-like noise bursts come out of the speaker and reach
/// the microphone 40 ms later at a quarter of their level (-12 dB), added to whatever the near
/// end says.
private struct Room {
    static let rate = 48_000
    /// The far end: low-passed noise, 300 ms on and 200 ms off, like syllables and pauses.
    let farEnd: [Int16]
    let echo: [Int16]

    init(seconds: Int, seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var low = 0.0
        var band = 0.0
        var far = [Int16](repeating: 0, count: seconds * Self.rate)
        for index in far.indices {
            let white = Double.random(in: -1...1, using: &random)
            low += 0.25 * (white - low)
            band += 0.5 * (low - band)
            let on = index % 24_000 < 14_400
            far[index] = on ? Int16(clamping: Int(band * 3.2 * 12_000)) : 0
        }
        farEnd = far
        let delay = 40 * Self.rate / 1_000
        echo = far.indices.map { index in index >= delay ? far[index - delay] / 4 : 0 }
    }
}

/// A 700 Hz tone from `start` on: what the person at the microphone says.
private func nearEnd(count: Int, from start: Int) -> [Int16] {
    (0..<count).map { index in
        index >= start ? Int16(3_000 * sin(2 * .pi * 700 * Double(index) / 48_000)) : 0
    }
}

private func energy(_ samples: ArraySlice<Int16>) -> Double {
    samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, samples.count))
}

/// The power of `frequency` in `samples` (Goertzel).
private func tonePower(_ samples: ArraySlice<Int16>, frequency: Double) -> Double {
    let coefficient = 2 * cos(2 * .pi * frequency / 48_000)
    var previous = 0.0
    var beforePrevious = 0.0
    for sample in samples {
        let current = Double(sample) + coefficient * previous - beforePrevious
        beforePrevious = previous
        previous = current
    }
    let power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
    return power / Double(samples.count * samples.count)
}

private func decibels(_ ratio: Double) -> Double { 10 * log10(max(ratio, 1e-12)) }

/// Runs the canceller over `microphone` with `speaker` as the echo reference, 20 ms at a time.
private func cancel(
    _ canceller: EchoCanceller,
    speaker: [Int16],
    microphone: [Int16],
    delay: Duration = .milliseconds(40)
) throws -> [Int16] {
    var output = microphone
    for start in stride(from: 0, to: microphone.count - 959, by: 960) {
        try speaker[start..<(start + 960)].withUnsafeBufferPointer { try canceller.analyzePlayback($0) }
        try output.withUnsafeMutableBufferPointer { buffer in
            try canceller.processCapture(
                UnsafeMutableBufferPointer(rebasing: buffer[start..<(start + 960)]),
                delay: delay
            )
        }
    }
    return output
}

@Suite struct EchoCancellerTests {
    /// Echo alone: after the canceller has converged, what the microphone sends has the far end's
    /// echo strongly reduced, whether the delay it is told is right (40 ms) or not.
    /// (Measured: 24 dB when told 40 or 150 ms, 19.5 dB when told 0 ms.)
    @Test(arguments: [(40, 18.0), (0, 14), (150, 18)])
    func theFarEndsEchoIsRemovedFromTheMicrophone(reportedDelay: Int, minimum: Double) throws {
        let room = Room(seconds: 12, seed: 3)
        let canceller = try EchoCanceller(options: EchoCancellerOptions(noiseSuppression: false, gainControl: false))
        let output = try cancel(
            canceller,
            speaker: room.farEnd,
            microphone: room.echo,
            delay: .milliseconds(reportedDelay)
        )
        let converged = (8 * 48_000)..<(12 * 48_000)
        let reduction = decibels(energy(room.echo[converged]) / energy(output[converged]))
        print("echo reduction after convergence, told \(reportedDelay) ms: \(reduction) dB")
        #expect(reduction >= minimum)
    }

    /// Double talk: a near-end tone (continuous from 8 s, over the far end's bursts and pauses)
    /// goes through the canceller converged on the echo.
    @Test func aNearEndToneSurvivesTheCanceller() throws {
        let room = Room(seconds: 14, seed: 4)
        let voice = nearEnd(count: room.echo.count, from: 8 * 48_000)
        let microphone = zip(room.echo, voice).map { $0 &+ $1 }
        let canceller = try EchoCanceller(options: EchoCancellerOptions(noiseSuppression: false, gainControl: false))
        let output = try cancel(canceller, speaker: room.farEnd, microphone: microphone)
        let talk = (9 * 48_000)..<(14 * 48_000)
        let kept = decibels(tonePower(output[talk], frequency: 700) / tonePower(voice[talk], frequency: 700))
        // In the far end's pauses (from 10 ms after its echo ends to the next burst) the near end
        // talks alone and should come through nearly whole.
        var alone = (input: 0.0, output: 0.0)
        for second in 9..<14 {
            let pause = (second * 48_000 + 16_800)..<(second * 48_000 + 24_000)
            alone.input += tonePower(voice[pause], frequency: 700)
            alone.output += tonePower(output[pause], frequency: 700)
        }
        let keptAlone = decibels(alone.output / alone.input)
        print("near-end tone kept: \(kept) dB overall, \(keptAlone) dB while the far end pauses")
        #expect(kept >= -14)
        #expect(keptAlone >= -12)
    }

    /// With noise suppression and gain control too, the whole chain runs on 20 ms blocks and
    /// still removes the echo.
    @Test func theFullChainRunsOnTwentyMillisecondFrames() throws {
        let room = Room(seconds: 10, seed: 5)
        let canceller = try EchoCanceller()
        var output: [Int16] = []
        for start in stride(from: 0, to: room.echo.count, by: 960) {
            try room.farEnd[start..<(start + 960)].withUnsafeBufferPointer { try canceller.analyzePlayback($0) }
            let frame = try AudioFrame(
                channels: 1,
                samples: Array(room.echo[start..<(start + 960)]),
                rtpTimestamp: UInt32(start)
            )
            let cleaned = try canceller.processCapture(frame, delay: .milliseconds(40))
            #expect(cleaned.rtpTimestamp == frame.rtpTimestamp)
            output += cleaned.samples
        }
        let converged = (6 * 48_000)..<(10 * 48_000)
        let reduction = decibels(energy(room.echo[converged]) / energy(output[converged]))
        print("full chain echo reduction: \(reduction) dB")
        #expect(reduction >= 28)
    }

    /// The output device hands over playback in whatever sizes it asks for (here 700 samples):
    /// the canceller cuts it into 10 ms frames itself and still removes the echo.
    @Test func playbackInAnyChunkSizeIsCutIntoFrames() throws {
        let room = Room(seconds: 12, seed: 6)
        let canceller = try EchoCanceller(options: EchoCancellerOptions(noiseSuppression: false, gainControl: false))
        var output = room.echo
        var played = 0
        for start in stride(from: 0, to: room.echo.count, by: 960) {
            // The speaker runs a little ahead of the microphone, as a device's buffer does.
            let target = min(room.farEnd.count, start + 960)
            while played < target {
                let end = min(played + 700, room.farEnd.count)
                try room.farEnd[played..<end].withUnsafeBufferPointer { try canceller.analyzePlayback($0) }
                played = end
            }
            try output.withUnsafeMutableBufferPointer { buffer in
                try canceller.processCapture(UnsafeMutableBufferPointer(rebasing: buffer[start..<(start + 960)]))
            }
        }
        let converged = (8 * 48_000)..<(12 * 48_000)
        let reduction = decibels(energy(room.echo[converged]) / energy(output[converged]))
        print("echo reduction with 700-sample playback chunks: \(reduction) dB")
        #expect(reduction >= 18)
    }

    @Test func microphoneBlocksThatAreNotWholeTenMillisecondFramesAreRefused() throws {
        let canceller = try EchoCanceller()
        var samples = [Int16](repeating: 0, count: 500)
        #expect(throws: AudioProcessingError.self) {
            try samples.withUnsafeMutableBufferPointer { try canceller.processCapture($0) }
        }
        let stereo = try AudioFrame(channels: 2, samples: [Int16](repeating: 0, count: 1_920), rtpTimestamp: 0)
        #expect(throws: AudioProcessingError.self) { _ = try canceller.processCapture(stereo) }
    }
}
