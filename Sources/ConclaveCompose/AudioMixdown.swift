import ConclaveCore

/// How the mix's loudness is treated.
public enum Loudness: Sendable, Hashable {
    /// As recorded: the sum of the participants, only held below full scale by the limiter.
    case none
    /// EBU R128 normalisation to -16 LUFS integrated, -1.5 dBTP (libavfilter's `loudnorm`,
    /// one pass, so the mix can be streamed).
    case ebuR128
}

/// What `AudioMixdown` does besides summing.
public struct AudioMixOptions: Sendable, Hashable {
    public var loudness: Loudness = .none

    public init() {}

    public init(loudness: Loudness) { self.loudness = loudness }
}

/// Mixed audio of a whole recording on the call timeline: 48 kHz, stereo, Float32 interleaved.
///
/// Every participant's segments are decoded once, as the mix advances, and added in place into
/// the block being produced (see `AudioParticipantTrack` for the placement: each decoded frame at
/// its segment's offset plus its own pts, so nothing drifts and gaps are silence). The sum goes
/// through `AudioLimiter`, which leaves normal speech untouched and keeps several people talking
/// at once below full scale; `amix` was not used because it scales every input by the number of
/// inputs active, so the level jumps each time someone joins or leaves. With `.ebuR128` the
/// limited sum then runs through libavfilter's `loudnorm`.
/// Not thread-safe: one task owns a mixdown.
public final class AudioMixdown {
    public static let sampleRate = 48_000
    /// Output channels (interleaved left, right).
    public static let channels = 2

    /// Samples per channel of the whole mix (the timeline's duration).
    public let totalFrames: Int64
    /// Samples per channel handed out so far.
    public private(set) var position: Int64 = 0
    private let tracks: [AudioParticipantTrack]
    private var limiter = AudioLimiter()
    private var loudness: AudioLoudnessFilter?
    /// Samples per channel already pushed into `loudness`.
    private var rendered: Int64 = 0
    /// The block rendered for `loudness`, reused.
    private var loudnessInput: [Float] = []

    public init(timeline: CompositionTimeline, options: AudioMixOptions = .init()) throws(ComposeError) {
        totalFrames = max(0, AudioParticipantTrack.samples(timeline.duration))
        tracks = timeline.participants.map(AudioParticipantTrack.init(participant:))
        if options.loudness == .ebuR128 {
            loudness = try AudioLoudnessFilter(channels: Self.channels, directory: timeline.directory)
        }
    }

    /// Segments that could not be decoded (composed as silence), one line each; the timeline's
    /// own `problems` (missing files) are not repeated here.
    public var problems: [String] { tracks.flatMap(\.problems) }

    /// The most samples per channel one `next` returns (about 5.8 minutes).
    public static let maximumBlock = 1 << 24

    /// The next `frames` samples per channel (fewer at the end, and at most `maximumBlock`), nil
    /// after the timeline's duration.
    public func next(frames: Int) throws(ComposeError) -> [Float]? {
        guard position < totalFrames else { return nil }
        let count = Int(min(Int64(max(1, min(frames, Self.maximumBlock))), totalFrames - position))
        var output = [Float](repeating: 0, count: count * Self.channels)
        if let loudness {
            try fillNormalised(&output, count: count, filter: loudness)
        } else {
            output.withUnsafeMutableBufferPointer { render(start: position, count: count, into: $0) }
        }
        position += Int64(count)
        return output
    }

    /// Sums every participant's audio for `count` samples from `start` into `output` (zeroed)
    /// and limits it.
    private func render(start: Int64, count: Int, into output: UnsafeMutableBufferPointer<Float>) {
        for track in tracks { track.add(start: start, count: count, into: output, channels: Self.channels) }
        limiter.process(output, channels: Self.channels)
    }

    /// Fills `output` from the loudness filter, feeding it rendered blocks until it has enough;
    /// the filter's latency is flushed at the end and the result held to the exact duration.
    private func fillNormalised(_ output: inout [Float], count: Int, filter: AudioLoudnessFilter) throws(ComposeError) {
        let block = 4_800
        if loudnessInput.isEmpty { loudnessInput = [Float](repeating: 0, count: block * Self.channels) }
        while filter.availableFrames < count && !filter.finished {
            if rendered < totalFrames {
                let frames = Int(min(Int64(block), totalFrames - rendered))
                for index in loudnessInput.indices { loudnessInput[index] = 0 }
                loudnessInput.withUnsafeMutableBufferPointer { render(start: rendered, count: frames, into: $0) }
                try loudnessInput.withUnsafeBufferPointer { buffer throws(ComposeError) in
                    try filter.push(UnsafeBufferPointer(rebasing: buffer[0..<(frames * Self.channels)]))
                }
                rendered += Int64(frames)
            } else {
                try filter.finish()
            }
        }
        output.withUnsafeMutableBufferPointer { filter.take(into: $0, frames: count) }
    }
}
