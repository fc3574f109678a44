public import ConclaveCore
import Foundation

/// The `tone` audio source: a steady sine with a loud, higher beep at the start of every second.
///
/// The beep starts on the exact sample of each whole second (in step with the `pattern` flash) and
/// lasts `beepDuration`; it is five times louder than the tone, so a simple level detector finds
/// its onset after Opus coding (see `BeepDetector`).
public final class ToneSource: AudioFrameSource {
    public let timeline: FrameTimeline
    public let channels: Int
    /// The steady tone's frequency in hertz.
    public let frequency: Double
    /// The beep's frequency in hertz.
    public let beepFrequency: Double
    /// How long each beep lasts, in samples.
    public let beepSamples: Int
    /// How many 20 ms frames to produce; nil for an endless stream.
    public let frameLimit: Int?
    /// The number of the next frame.
    public private(set) var frameIndex = 0

    /// Peak level of the steady tone (full scale is 32767).
    static let toneLevel = 3_000.0
    /// Peak level of the beep.
    static let beepLevel = 15_000.0

    /// Creates a tone; `beepMilliseconds` is the beep length.
    public init(
        channels: Int = 1,
        frequency: Double = 440,
        beepFrequency: Double = 1_000,
        beepMilliseconds: Int = 100,
        frameLimit: Int? = nil,
        initialTimestamp: UInt32 = 0
    ) throws(RawMediaError) {
        guard channels == 1 || channels == 2 else { throw .unsupportedChannelCount(channels) }
        self.channels = channels
        self.frequency = frequency
        self.beepFrequency = beepFrequency
        self.beepSamples = max(0, min(48_000, beepMilliseconds * 48))
        self.frameLimit = frameLimit
        self.timeline = .audio(initialTimestamp: initialTimestamp)
    }

    public func nextFrame() throws -> AudioFrame? {
        if let frameLimit, frameIndex >= frameLimit { return nil }
        let first = frameIndex * 960
        var samples = [Int16](repeating: 0, count: 960 * channels)
        for offset in 0..<960 {
            let sample = first + offset
            let time = Double(sample) / 48_000
            let inBeep = sample % 48_000 < beepSamples
            let value =
                inBeep
                ? Self.beepLevel * sin(2 * Double.pi * beepFrequency * time)
                : Self.toneLevel * sin(2 * Double.pi * frequency * time)
            let pcm = Int16(value.rounded())
            for channel in 0..<channels { samples[offset * channels + channel] = pcm }
        }
        let frame = try AudioFrame(
            channels: channels,
            samples: samples,
            rtpTimestamp: timeline.rtpTimestamp(forFrame: frameIndex)
        )
        frameIndex += 1
        return frame
    }
}

/// Finds beep onsets in decoded audio: the first sample of each run whose short-term level is
/// well above the steady tone's.
public struct BeepDetector: Sendable {
    /// Samples per analysis window (2.5 ms).
    public static let window = 120
    /// RMS threshold between the tone (about 2 100) and the beep (about 10 600).
    public static let threshold = 6_000.0

    private var inBeep = false
    private var position = 0
    private var pending: [Int16] = []

    /// Creates a detector at sample 0.
    public init() {}

    /// Feeds mono or interleaved samples; returns the sample indices (counted from the first sample
    /// ever fed, per channel) where a beep started.
    public mutating func feed(_ samples: [Int16], channels: Int) -> [Int] {
        let step = max(1, channels)
        var index = 0
        while index < samples.count {
            pending.append(samples[index])
            index += step
        }
        var onsets: [Int] = []
        while pending.count >= Self.window {
            var energy = 0.0
            for value in pending.prefix(Self.window) { energy += Double(value) * Double(value) }
            let loud = (energy / Double(Self.window)).squareRoot() >= Self.threshold
            if loud && !inBeep { onsets.append(position) }
            inBeep = loud
            position += Self.window
            pending.removeFirst(Self.window)
        }
        return onsets
    }
}
