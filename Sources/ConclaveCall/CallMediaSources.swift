import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import Synchronization

/// What a participant sends on one track.
public enum CallMediaChoice: Sendable, Hashable, CustomStringConvertible {
    /// Nothing (the track is not published).
    case none
    /// The generated test signal: the pattern for video, the tone for audio.
    case generated
    /// A media file, looped (passed through when it holds the wanted codec, else transcoded).
    case file(String)

    /// Parses `none`, `pattern`/`tone` (for `generatedName`) or a file path.
    public init(_ text: String, generatedName: String) {
        switch text {
        case "none": self = .none
        case generatedName: self = .generated
        default: self = .file(text)
        }
    }

    public var description: String {
        switch self {
        case .none: "none"
        case .generated: "generated"
        case .file(let path): path
        }
    }
}

/// A frame source whose media timeline can be restarted at zero.
///
/// A call that recovers from a lost Janus session publishes again with a new pacer; the source
/// keeps its encoder and RTP timeline (so receivers and recordings see one continuous stream)
/// while its media times are rebased so that the new pacer does not wait out the time the
/// outage took. Only one ``MediaSender`` reads it at a time: the call cancels the old sender and
/// waits for it before starting the next one.
public final class RebasingFrameSource: EncodedFrameSource, @unchecked Sendable {
    // @unchecked: `inner` and `offset` are touched only by the one sender that runs at a time,
    // and by `rebase()`, which the call invokes between two senders.
    private let inner: any EncodedFrameSource
    private var offset: Duration?

    public init(_ inner: any EncodedFrameSource) { self.inner = inner }

    public var codec: MediaCodec { inner.codec }

    public var simulcastLayers: Int { inner.simulcastLayers }

    public var simulcastLayersSent: Int { inner.simulcastLayersSent }

    public var pacedByDevice: Bool { inner.pacedByDevice }

    /// Makes the next frame's media time zero.
    public func rebase() { offset = nil }

    public func nextFrame() throws -> TimedFrame? {
        guard var timed = try inner.nextFrame() else { return nil }
        let offset = self.offset ?? timed.mediaTime
        self.offset = offset
        timed.mediaTime -= offset
        return timed
    }

    public func requestKeyframe() { inner.requestKeyframe() }

    public func setBitrate(_ bitsPerSecond: Int) throws { try inner.setBitrate(bitsPerSecond) }

    public func waitUntilReady() async throws { try await inner.waitUntilReady() }
}

/// Video settings of a participant.
public struct CallVideoSettings: Sendable, Hashable {
    public var codec: MediaCodec
    public var width: Int
    public var height: Int
    public var frameRate: Int
    /// Bits per second; with simulcast, the top layer's.
    public var bitrate: Int
    /// Simulcast layers to send (1: no simulcast); only pictures made or captured here can be
    /// layered, not a file passed through.
    public var simulcastLayers: Int

    public init(
        codec: MediaCodec = .h264,
        width: Int = 640,
        height: Int = 480,
        frameRate: Int = PatternSource.defaultFrameRate,
        bitrate: Int = 600_000,
        simulcastLayers: Int = 1
    ) {
        self.codec = codec
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.bitrate = bitrate
        self.simulcastLayers = simulcastLayers
    }
}

/// Media to send that cannot be set up as asked.
public enum CallMediaSourceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Simulcast asked of a file: its frames are sent as they are (or transcoded once), so there
    /// are no pictures to layer.
    case simulcastFromFile(String)

    public var description: String {
        switch self {
        case .simulcastFromFile(let path):
            "simulcast needs pictures to encode (the pattern, a camera or a screen), not the file \(path)"
        }
    }
}

/// Builds the sources a participant sends.
public enum CallMediaSources {
    /// The video source for `choice`, or nil for `.none`.
    public static func video(_ choice: CallMediaChoice, settings: CallVideoSettings) throws -> RebasingFrameSource? {
        switch choice {
        case .none:
            return nil
        case .generated:
            let pattern = try PatternSource(
                width: settings.width,
                height: settings.height,
                frameRate: settings.frameRate
            )
            return try encoded(pattern, settings: settings)
        case .file(let path):
            guard settings.simulcastLayers == 1 else { throw CallMediaSourceError.simulcastFromFile(path) }
            let encoder = VideoEncoderSettings(
                codec: settings.codec,
                width: settings.width,
                height: settings.height,
                frameRate: settings.frameRate,
                bitrate: settings.bitrate
            )
            return RebasingFrameSource(
                try FileMediaSource(path: path, codec: settings.codec, loop: true, video: encoder)
            )
        }
    }

    /// `raw` through the call's video encoder (one per layer with simulcast), at the source's
    /// size and rate.
    public static func encoded(_ raw: any VideoFrameSource, settings: CallVideoSettings) throws
        -> RebasingFrameSource
    {
        guard settings.simulcastLayers == 1 else {
            let layers = try SimulcastPlan.layers(
                count: settings.simulcastLayers,
                width: raw.width,
                height: raw.height,
                bitrate: settings.bitrate
            )
            return RebasingFrameSource(try SimulcastVideoSource(raw: raw, codec: settings.codec, layers: layers))
        }
        let encoder = VideoEncoderSettings(
            codec: settings.codec,
            width: raw.width,
            height: raw.height,
            frameRate: raw.timeline.rateNumerator,
            bitrate: settings.bitrate
        )
        return RebasingFrameSource(EncodingVideoSource(raw: raw, encoder: try encoder.makeEncoder()))
    }

    /// The Opus source for `choice`, or nil for `.none`.
    public static func audio(_ choice: CallMediaChoice, bitrate: Int = 32_000) throws -> RebasingFrameSource? {
        var configuration = OpusEncoderConfiguration()
        configuration.bitrate = bitrate
        switch choice {
        case .none:
            return nil
        case .generated:
            return RebasingFrameSource(
                EncodingAudioSource(raw: try ToneSource(), encoder: try OpusAudioEncoder(configuration: configuration))
            )
        case .file(let path):
            return RebasingFrameSource(try FileMediaSource(path: path, codec: .opus, loop: true, audio: configuration))
        }
    }
}
