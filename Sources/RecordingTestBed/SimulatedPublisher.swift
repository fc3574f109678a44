public import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import ConclaveRTP

/// A simulated publisher: pattern video and tone audio, encoded for real, timed as if captured
/// from `start` on the call timeline, with sender reports from a sender clock `clockError` off
/// the recorder's, arriving `delay` after capture.
///
/// The pattern carries frame numbers and flashes white on the first frame of every second of its
/// own media time, and the tone beeps on the same instants, so a recording (and anything made from
/// it) can be checked for frame loss and for audio/video and cross-participant alignment.
public struct SimulatedPublisher: Sendable {
    public var feedID: UInt64
    public var display: String?
    public var codec: MediaCodec
    public var width = 320
    public var height = 240
    public var seconds = 3
    /// Capture start on the call timeline (microseconds after the recording's start).
    public var start: Int64 = 0
    public var clockError: Int64 = 0
    public var delay: Int64 = 20_000
    public var videoBase: UInt32 = 0xFFFF_0000
    public var audioBase: UInt32 = 12_345
    public var withVideo = true
    /// Spans of the call timeline (microseconds after the recording's start) in which the
    /// microphone is muted: silence is encoded and the packets keep flowing, as a muted client
    /// sends them.
    public var muted: [Range<Int64>] = []

    /// One thing the recorder receives, with its arrival time (Unix microseconds).
    public enum Event: Sendable {
        case frame(UInt64, MediaKind, EncodedFrame, Int64)
        case senderReport(UInt64, MediaKind, UInt64, UInt32, Int64)

        public var time: Int64 {
            switch self {
            case .frame(_, _, _, let time), .senderReport(_, _, _, _, let time): time
            }
        }
    }

    public init(
        feedID: UInt64,
        display: String?,
        codec: MediaCodec,
        width: Int = 320,
        height: Int = 240,
        seconds: Int = 3,
        start: Int64 = 0,
        clockError: Int64 = 0,
        delay: Int64 = 20_000,
        videoBase: UInt32 = 0xFFFF_0000,
        audioBase: UInt32 = 12_345,
        withVideo: Bool = true,
        muted: [Range<Int64>] = []
    ) {
        self.feedID = feedID
        self.display = display
        self.codec = codec
        self.width = width
        self.height = height
        self.seconds = seconds
        self.start = start
        self.clockError = clockError
        self.delay = delay
        self.videoBase = videoBase
        self.audioBase = audioBase
        self.withVideo = withVideo
        self.muted = muted
    }

    /// Every frame and sender report, in capture order, with arrival times (Unix microseconds).
    public func events(recordingStart: Int64) throws -> [Event] {
        var events: [Event] = []
        let origin = recordingStart + start
        if withVideo {
            let source = EncodingVideoSource(
                raw: try PatternSource(
                    width: width,
                    height: height,
                    frameRate: 30,
                    frameLimit: seconds * 30,
                    initialTimestamp: videoBase
                ),
                encoder: try VideoEncoderSettings(codec: codec, width: width, height: height, bitrate: 300_000)
                    .makeEncoder()
            )
            var index = 0
            while true {
                // A keyframe every second, as a publisher answering the recorder's requests would send.
                if index % 30 == 0 { source.requestKeyframe() }
                index += 1
                guard let timed = try source.nextFrame() else { break }
                let capture = origin + microseconds(timed.mediaTime)
                events.append(.frame(feedID, .video, timed.frame, capture + delay + 5_000))
                if timed.frame.rtpTimestamp &- videoBase == 0
                    || (timed.frame.rtpTimestamp &- videoBase) % 90_000 == 45_000
                {
                    let ntp = NTPTimestamp(unixMicroseconds: capture + clockError).rawValue
                    events.append(.senderReport(feedID, .video, ntp, timed.frame.rtpTimestamp, capture + delay + 1_000))
                }
            }
        }
        let tone = try ToneSource(frameLimit: seconds * 50, initialTimestamp: audioBase)
        let audio = EncodingAudioSource(
            raw: muted.isEmpty ? tone : MutedAudioSource(tone, muted: muted, start: start),
            encoder: try OpusAudioEncoder()
        )
        while let timed = try audio.nextFrame() {
            let capture = origin + microseconds(timed.mediaTime)
            events.append(.frame(feedID, .audio, timed.frame, capture + delay))
            if (timed.frame.rtpTimestamp &- audioBase) % 48_000 == 24_000 {
                let ntp = NTPTimestamp(unixMicroseconds: capture + clockError).rawValue
                events.append(.senderReport(feedID, .audio, ntp, timed.frame.rtpTimestamp, capture + delay + 1_000))
            }
        }
        return events
    }
}

/// A microphone with a mute button: the source's blocks, silent within the muted spans.
private final class MutedAudioSource: AudioFrameSource {
    let timeline: FrameTimeline
    let channels: Int
    private let source: any AudioFrameSource
    private let muted: [Range<Int64>]
    /// The source's first block on the call timeline (microseconds).
    private let start: Int64
    private var index = 0

    init(_ source: any AudioFrameSource, muted: [Range<Int64>], start: Int64) {
        self.source = source
        self.timeline = source.timeline
        self.channels = source.channels
        self.muted = muted
        self.start = start
    }

    func nextFrame() throws -> AudioFrame? {
        guard let block = try source.nextFrame() else { return nil }
        let time = start + microseconds(timeline.mediaTime(forFrame: index))
        index += 1
        guard muted.contains(where: { $0.contains(time) }) else { return block }
        return try AudioFrame(
            channels: block.channels,
            samples: [Int16](repeating: 0, count: block.samples.count),
            rtpTimestamp: block.rtpTimestamp
        )
    }
}

/// A duration in whole microseconds.
public func microseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
}
