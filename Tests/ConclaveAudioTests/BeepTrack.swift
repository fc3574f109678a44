import ConclaveAudio
import ConclaveCore
import ConclaveOpus
import Foundation
import Testing

/// The beep track bench/devices/loss plays into the call: 200 ms of a 1 kHz sine at 8000 every
/// 500 ms, each beep starting and ending at a zero crossing. Its largest sample-to-sample step is
/// 8000 · 2π/48 ≈ 1047, so a larger jump in what the playout makes of it is a splice that does
/// not meet (a click).
enum BeepTrack {
    static let amplitude = 8_000.0
    static let periodSamples = 24_000
    static let beepSamples = 9_600
    /// The sine's own largest step, rounded up.
    static let maximumStep = 1_048

    /// Sample `index` of the track; `phase` samples of it are skipped, so that with a phase off
    /// the 20 ms grid a beep starts and ends inside a packet, as a microphone's would.
    static func sample(_ index: Int, phase: Int = 0) -> Int16 {
        let position = (index + phase) % periodSamples
        guard position < beepSamples else { return 0 }
        return Int16((amplitude * sin(2 * .pi * 1_000 * Double(position) / 48_000)).rounded())
    }

    /// `count` 20 ms Opus packets of the track at the microphone's settings (32 kbit/s, FEC).
    static func encoded(count: Int, phase: Int = 0, firstTimestamp: UInt32 = 3_000) throws -> [EncodedFrame] {
        let encoder = try OpusAudioEncoder(configuration: OpusEncoderConfiguration())
        return try (0..<count).map { index in
            let samples = (0..<960).map { sample(index * 960 + $0, phase: phase) }
            let timestamp = firstTimestamp &+ UInt32(index * 960)
            let frame = try AudioFrame(channels: 1, samples: samples, rtpTimestamp: timestamp)
            return try #require(try encoder.encode(frame))
        }
    }
}

/// What the bench's analysis finds in a played beep track.
struct BeepAnalysis {
    /// Sample indices whose step from the previous sample exceeds `jumpLimit`.
    var jumps: [Int] = []
    /// The largest step anywhere.
    var largestStep = 0
    /// Starts of runs of >= 10 ms below a quarter of the amplitude inside a beep (its first
    /// 180 ms after the onset).
    var gaps: [Int] = []
    /// Beep onsets found.
    var onsets: [Int] = []
    /// How long each beep was heard, in samples: from its onset to its last sample above a
    /// quarter of the amplitude before the next onset (the bench's "short" beeps).
    var lengths: [Int] = []

    init(_ samples: [Int16], jumpLimit: Int = 3_000) {
        let quiet = 2_000
        var previous = 0
        var last = -BeepTrack.periodSamples
        for (index, value) in samples.enumerated() {
            let value = Int(value)
            if index > 0 {
                let step = abs(value - previous)
                largestStep = max(largestStep, step)
                if step > jumpLimit { jumps.append(index) }
            }
            previous = value
            if abs(value) > quiet {
                if index - last > BeepTrack.periodSamples / 2 { onsets.append(index) }
                last = index
            }
        }
        for (index, onset) in onsets.enumerated() {
            let limit = index + 1 < onsets.count ? onsets[index + 1] : samples.count
            let last = samples[onset..<limit].lastIndex { abs(Int($0)) > quiet } ?? onset
            lengths.append(last - onset + 1)
            var run = 0
            var window = onset
            while window + 48 <= min(samples.count, onset + BeepTrack.beepSamples - 960) {
                let loud = samples[window..<(window + 48)].contains { abs(Int($0)) >= quiet }
                run = loud ? 0 : run + 48
                if run == 480 { gaps.append(window + 48 - run) }
                window += 48
            }
        }
    }
}
