/// Keeps a sum of voices below full scale without touching it while it already is.
///
/// Shared by the recording's mixdown (ConclaveCompose) and the live call's playout mixer
/// (ConclaveAudio), so both mixes clip the same way.
///
/// A peak limiter without lookahead: the gain drops at once to what keeps the loudest channel at
/// `ceiling` (so no sample ever exceeds it) and recovers over about `releaseSeconds`. Speech at
/// normal levels, alone or two at a time, never reaches the ceiling, so the limiter does nothing
/// to it; it acts only when several loud voices pile up. Chosen over libavfilter's `alimiter`
/// because it runs in place on the block being mixed (a few operations per sample, no graph, no
/// latency) and its output is exactly the input below the ceiling, which keeps the mix's timing
/// tests exact.
public struct AudioLimiter: Sendable {
    /// The highest output magnitude (about -0.3 dBFS).
    public var ceiling: Float = 0.966
    /// The gain applied to the last sample (1 while the signal stays below the ceiling).
    public private(set) var gain: Float = 1
    /// Per-sample step of the gain back towards 1.
    private let release: Float

    /// Creates a limiter whose gain recovers over about `releaseSeconds` at `sampleRate`.
    public init(releaseSeconds: Double = 0.1, sampleRate: Int = AudioFrame.sampleRate) {
        release = Float(1 / (max(releaseSeconds, 0.001) * Double(max(sampleRate, 1))))
    }

    /// Limits `samples` (interleaved `channels`) in place.
    public mutating func process(_ samples: UnsafeMutableBufferPointer<Float>, channels: Int) {
        guard channels > 0 else { return }
        var index = 0
        let end = samples.count - samples.count % channels
        while index < end {
            var peak: Float = 0
            for channel in 0..<channels { peak = max(peak, abs(samples[index + channel])) }
            let target = peak > ceiling ? ceiling / peak : 1
            if target < gain {
                gain = target
            } else {
                gain = min(target, gain + (target - gain) * release)
            }
            if gain < 1 {
                for channel in 0..<channels { samples[index + channel] *= gain }
            }
            index += channels
        }
    }
}
