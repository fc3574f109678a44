import ConclaveCore

/// How loud one participant's last 20 ms were, for the active speaker indicator and level meters.
public struct AudioLevel: Sendable, Hashable {
    /// Root mean square, 0 (silence) ... 1 (a full-scale square wave).
    public var rms: Float
    /// The largest magnitude, 0 ... 1.
    public var peak: Float

    /// A level.
    public init(rms: Float, peak: Float) {
        self.rms = rms
        self.peak = peak
    }

    /// Silence.
    public static let silence = AudioLevel(rms: 0, peak: 0)
}

/// Sums several participants' 20 ms blocks into one, each at its own volume, and keeps the sum
/// within Int16 with `AudioLimiter` (the one the recording's mixdown uses).
///
/// A limiter rather than dividing by the number of participants: a division makes everyone
/// quieter each time someone joins, even when only one person speaks, while the limiter leaves
/// the usual one or two voices untouched and only catches the rare pile-up of loud ones.
///
/// Use: `begin()`, `add` once per participant, `finish(into:)`. The sum is kept in a Float
/// buffer allocated once. Not thread-safe: the output device's thread owns a mixer.
public struct AudioMixer: Sendable {
    /// The block size: 20 ms at 48 kHz, mono.
    public static let frameSamples = 960
    /// The loudest volume `add` accepts (+6 dB).
    public static let maximumVolume: Float = 2

    private var sum = [Float](repeating: 0, count: frameSamples)
    private var limiter = AudioLimiter()

    /// Creates a mixer.
    public init() {}

    /// The limiter's gain on the last sample: 1 unless the last block needed limiting.
    public var limiterGain: Float { limiter.gain }

    /// Starts a new block (silence).
    public mutating func begin() {
        for index in sum.indices { sum[index] = 0 }
    }

    /// Adds one participant's block (its first 960 samples) at `volume` (clamped to 0...2) and
    /// returns its level before the volume, i.e. how loud the person is, not how loud they are
    /// played.
    @discardableResult
    public mutating func add(_ samples: UnsafeBufferPointer<Int16>, volume: Float) -> AudioLevel {
        let count = min(samples.count, Self.frameSamples)
        let gain = volume.isNaN ? 0 : min(Self.maximumVolume, max(0, volume)) / 32_768
        var squares: Float = 0
        var peak: Int32 = 0
        sum.withUnsafeMutableBufferPointer { sum in
            for index in 0..<count {
                let sample = samples[index]
                let value = Float(sample)
                squares += value * value
                peak = max(peak, abs(Int32(sample)))
                sum[index] += value * gain
            }
        }
        guard count > 0 else { return .silence }
        return AudioLevel(
            rms: (squares / Float(count)).squareRoot() / 32_768,
            peak: Float(peak) / 32_768
        )
    }

    /// Limits the block and writes it as Int16 into `output` (its first 960 samples).
    public mutating func finish(into output: UnsafeMutableBufferPointer<Int16>) {
        sum.withUnsafeMutableBufferPointer { sum in
            limiter.process(sum, channels: 1)
            for index in 0..<min(output.count, Self.frameSamples) {
                let scaled = (sum[index] * 32_767).rounded()
                output[index] = Int16(max(-32_768, min(32_767, scaled)))
            }
        }
    }
}
