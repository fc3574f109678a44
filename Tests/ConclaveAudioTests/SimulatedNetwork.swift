import ConclaveAudio
import ConclaveCore
import ConclaveOpus
import Foundation
import Testing

/// A seeded generator (SplitMix64), so every simulated network is the same on every run.
struct SeededGenerator: RandomNumberGenerator {
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

/// A voiced sound (a 200 Hz buzz with harmonics, slowly modulated) that Opus codes with SILK or
/// hybrid, so its packets carry in-band FEC.
func voiceFrame(_ index: Int, amplitude: Double = 6_000) -> [Int16] {
    (0..<960).map { sample in
        let t = Double(index * 960 + sample) / 48_000
        let envelope = 0.75 + 0.25 * sin(2 * .pi * 3 * t)
        var value = 0.0
        for harmonic in 1...6 { value += sin(2 * .pi * 200 * Double(harmonic) * t) / Double(harmonic) }
        return Int16(amplitude * envelope * value / 2)
    }
}

/// `count` consecutive 20 ms Opus packets of `voiceFrame`, timestamps from `firstTimestamp`.
func encodedVoice(count: Int, firstTimestamp: UInt32 = 1_000) throws -> [EncodedFrame] {
    let encoder = try OpusAudioEncoder(
        configuration: OpusEncoderConfiguration(bitrate: 24_000, inbandFEC: true, expectedPacketLossPercent: 10)
    )
    return try (0..<count).map { index in
        let timestamp = firstTimestamp &+ UInt32(index * 960)
        let frame = try AudioFrame(channels: 1, samples: voiceFrame(index), rtpTimestamp: timestamp)
        return try #require(try encoder.encode(frame))
    }
}

/// One packet's fate on the simulated network: when it arrives (milliseconds since the first
/// was sent), or nil when it is lost.
struct Delivery {
    var frame: EncodedFrame
    var arrivalMilliseconds: Double?
}

/// Plays deliveries through a buffer, 20 ms per pull, packets inserted as they arrive.
struct PlayoutDriver {
    let buffer: PlayoutBuffer
    let origin = ContinuousClock.now
    private var pending: [(Double, EncodedFrame)]
    private(set) var pulls = 0
    /// Every pulled block, in order.
    private(set) var output: [[Int16]] = []

    init(buffer: PlayoutBuffer, deliveries: [Delivery]) {
        self.buffer = buffer
        pending = deliveries.compactMap { delivery in delivery.arrivalMilliseconds.map { ($0, delivery.frame) } }
        pending.sort { $0.0 < $1.0 }
    }

    /// Pulls one block at a time until the buffer has played `count` packets (at most until
    /// `limit` milliseconds), so the figures are read before the stream's end runs the buffer dry.
    mutating func run(untilPlayed count: Int, limit: Double) {
        while buffer.statistics.played < count, Double(pulls) * 20 < limit { run(until: Double(pulls) * 20 + 7) }
    }

    func instant(_ milliseconds: Double) -> ContinuousClock.Instant {
        origin + .microseconds(Int64((milliseconds * 1_000).rounded()))
    }

    /// Runs pulls until `milliseconds` (pull k happens at 20 k ms plus `phase`).
    mutating func run(until milliseconds: Double, phase: Double = 7) {
        while Double(pulls) * 20 + phase <= milliseconds {
            let now = Double(pulls) * 20 + phase
            var index = 0
            while index < pending.count, pending[index].0 <= now {
                buffer.insert(pending[index].1, arrival: instant(pending[index].0))
                index += 1
            }
            pending.removeFirst(index)
            var block = [Int16](repeating: 0, count: 960)
            block.withUnsafeMutableBufferPointer { buffer.pull(now: instant(now), into: $0) }
            output.append(block)
            pulls += 1
        }
    }
}

func rms(_ samples: some Collection<Int16>) -> Double {
    guard !samples.isEmpty else { return 0 }
    let squares = samples.reduce(0.0) { $0 + Double($1) * Double($1) }
    return (squares / Double(samples.count)).squareRoot()
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
}
