import ConclaveAV
public import ConclaveCore
import ConclaveOpenH264
public import ConclaveOpus
import ConclaveVPX

/// An encoded frame with the media time at which it is due (from the stream's start).
public struct TimedFrame: Sendable, Hashable {
    /// The frame, with its RTP timestamp.
    public var frame: EncodedFrame
    /// When to send it, measured from the first frame.
    public var mediaTime: Duration
}

/// A source of encoded frames ready for the transport: a raw source through one of our encoders,
/// or a file passed through or transcoded.
public protocol EncodedFrameSource: AnyObject {
    /// The codec of the frames.
    var codec: MediaCodec { get }
    /// The next frame, or nil at the end.
    func nextFrame() throws -> TimedFrame?
    /// Asks for a keyframe as soon as possible (PLI/FIR from a receiver). No-op for audio.
    func requestKeyframe()
    /// Changes the target bitrate (REMB). Pass-through sources ignore it.
    func setBitrate(_ bitsPerSecond: Int) throws
    /// Suspends until `nextFrame()` can answer without blocking: at once for files and
    /// generators (the default), when the device has the next frame for live capture.
    func waitUntilReady() async throws
    /// The simulcast layers the frames come in (``EncodedFrame/simulcastLayer``); 1, the
    /// default, for a source without simulcast.
    var simulcastLayers: Int { get }
    /// How many of those are sent now (the rest paused for want of bitrate); all by default.
    var simulcastLayersSent: Int { get }
    /// Whether a device paces the frames (see ``AudioFrameSource/pacedByDevice``): they are sent
    /// as ``waitUntilReady()`` returns them, not on the wall clock. False by default.
    var pacedByDevice: Bool { get }
}

extension EncodedFrameSource {
    public func waitUntilReady() async throws {}

    public var pacedByDevice: Bool { false }

    public var simulcastLayers: Int { 1 }

    public var simulcastLayersSent: Int { simulcastLayers }

    /// Hands every frame to `deliver` at its due time on the media clock until the source ends or
    /// the task is cancelled.
    public func run(pacer: MediaPacer, deliver: (EncodedFrame) async throws -> Void) async throws {
        var pacer = pacer
        while !Task.isCancelled {
            try await waitUntilReady()
            guard let timed = try nextFrame() else { return }
            try await pacer.wait(until: timed.mediaTime)
            try await deliver(timed.frame)
        }
    }
}

/// Which video encoder to build for a codec.
public struct VideoEncoderSettings: Sendable, Hashable {
    /// VP8 or H264.
    public var codec: MediaCodec
    /// Picture width.
    public var width: Int
    /// Picture height.
    public var height: Int
    /// Frames per second.
    public var frameRate: Int
    /// Bits per second.
    public var bitrate: Int

    /// Creates settings.
    public init(codec: MediaCodec, width: Int = 640, height: Int = 480, frameRate: Int = 30, bitrate: Int = 1_000_000) {
        self.codec = codec
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.bitrate = bitrate
    }

    /// Builds the encoder.
    public func makeEncoder() throws -> any VideoEncoding {
        switch codec {
        case .vp8:
            return try VP8Encoder(
                configuration: VP8EncoderConfiguration(
                    width: width,
                    height: height,
                    frameRate: frameRate,
                    bitrate: bitrate
                )
            )
        case .h264:
            return try H264Encoder(
                configuration: H264EncoderConfiguration(
                    width: width,
                    height: height,
                    frameRate: frameRate,
                    bitrate: bitrate
                )
            )
        case .opus:
            throw MediaSourceError.codecMismatch(expected: "a video codec", actual: codec)
        }
    }
}

/// A media source that cannot be set up.
public enum MediaSourceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The codec asked for does not fit the source.
    case codecMismatch(expected: String, actual: MediaCodec)

    public var description: String {
        switch self {
        case .codecMismatch(let expected, let actual): "expected \(expected), got \(actual)"
        }
    }
}

/// Raw pictures through a video encoder, with keyframe requests and bitrate changes.
public final class EncodingVideoSource: EncodedFrameSource {
    public var codec: MediaCodec { encoder.codec }
    private let raw: any VideoFrameSource
    private let encoder: any VideoEncoding
    private var keyframeRequested = false
    private var index = 0
    private var queue: [TimedFrame] = []

    /// Encodes `raw` with `encoder`.
    public init(raw: any VideoFrameSource, encoder: any VideoEncoding) {
        self.raw = raw
        self.encoder = encoder
    }

    public func requestKeyframe() { keyframeRequested = true }

    public func setBitrate(_ bitsPerSecond: Int) throws { try encoder.setBitrate(bitsPerSecond) }

    public func waitUntilReady() async throws {
        if queue.isEmpty { try await raw.waitUntilReady() }
    }

    public func nextFrame() throws -> TimedFrame? {
        while queue.isEmpty {
            guard let picture = try raw.nextFrame() else { return nil }
            let due = raw.timeline.mediaTime(forFrame: index)
            index += 1
            let force = keyframeRequested
            keyframeRequested = false
            queue = try encoder.encode(picture, forceKeyframe: force).map { TimedFrame(frame: $0, mediaTime: due) }
        }
        return queue.removeFirst()
    }
}

/// Raw PCM through the Opus encoder. DTX-suppressed packets are skipped (the RTP timestamps of
/// the following packets still advance, as WebRTC does).
///
/// Skipping means asking the raw source for another block. ``waitUntilReady()`` does that
/// asking, awaiting the raw source before each block, and keeps the first packet for
/// ``nextFrame()``: a live source (a microphone) is never asked for a block it does not have
/// yet, however long a silence DTX suppresses. Called without waiting, ``nextFrame()`` loops
/// over the raw source itself, as files and generators allow.
public final class EncodingAudioSource: EncodedFrameSource {
    public var codec: MediaCodec { .opus }
    private let raw: any AudioFrameSource
    private let encoder: OpusAudioEncoder
    private var index = 0
    /// The packet ``waitUntilReady()`` encoded, handed out by the next ``nextFrame()``.
    private var ready: TimedFrame?
    /// The raw source ended while ``waitUntilReady()`` read it.
    private var ended = false

    /// Encodes `raw` with `encoder`.
    public init(raw: any AudioFrameSource, encoder: OpusAudioEncoder) {
        self.raw = raw
        self.encoder = encoder
    }

    public func requestKeyframe() {}

    public func setBitrate(_ bitsPerSecond: Int) throws { try encoder.setBitrate(bitsPerSecond) }

    public var pacedByDevice: Bool { raw.pacedByDevice }

    public func waitUntilReady() async throws {
        while ready == nil && !ended {
            try await raw.waitUntilReady()
            guard let block = try raw.nextFrame() else {
                ended = true
                return
            }
            ready = try encode(block)
        }
    }

    public func nextFrame() throws -> TimedFrame? {
        if let packet = ready {
            ready = nil
            return packet
        }
        if ended { return nil }
        while let block = try raw.nextFrame() {
            if let packet = try encode(block) { return packet }
        }
        return nil
    }

    /// The packet for `block`, or nil when DTX suppressed it; the timeline advances either way.
    private func encode(_ block: AudioFrame) throws -> TimedFrame? {
        let due = raw.timeline.mediaTime(forFrame: index)
        index += 1
        return try encoder.encode(block).map { TimedFrame(frame: $0, mediaTime: due) }
    }
}

/// Media from a file: passed through untouched when the file's codec is the one wanted, otherwise
/// decoded with libavcodec and re-encoded with Conclave's encoders. Optionally loops.
///
/// RTP timestamps are the file's presentation times on the codec's clock, offset by
/// `initialTimestamp`; on each loop the timeline continues where the previous pass ended.
public final class FileMediaSource: EncodedFrameSource {
    public let codec: MediaCodec
    /// The file.
    public let path: String
    /// Whether frames are copied (true) or transcoded (false).
    public let isPassThrough: Bool
    private let demuxer: MediaDemuxer
    private let stream: MediaStreamInfo
    private let loop: Bool
    private let initialTimestamp: UInt32
    private var decoder: MediaStreamDecoder?
    private var videoEncoder: (any VideoEncoding)?
    private var audioEncoder: OpusAudioEncoder?
    private var converter: AudioConverter?
    private var audioBlocks = 0
    private var loopOffset: Duration = .zero
    private var lastTime: Duration = .zero
    private var frameSpacing: Duration = .milliseconds(20)
    private var keyframeRequested = false
    private var queue: [TimedFrame] = []
    private var draining = false
    private var lastTicks: Int64?

    /// Opens `path` and picks its first stream of `codec`'s kind.
    ///
    /// - Parameters:
    ///   - video: encoder settings used when the file must be transcoded to a video codec
    ///     (the file's own size is used when it is even-sized).
    ///   - audio: Opus settings used when transcoding audio.
    public init(
        path: String,
        codec: MediaCodec,
        loop: Bool = false,
        initialTimestamp: UInt32 = 0,
        video: VideoEncoderSettings? = nil,
        audio: OpusEncoderConfiguration = OpusEncoderConfiguration()
    ) throws {
        let demuxer = try MediaDemuxer(path: path)
        guard let stream = demuxer.firstStream(of: codec.kind) else {
            let found = demuxer.streams.map(\.codecName).joined(separator: ", ")
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "no \(codec.kind.rawValue) stream (found: \(found.isEmpty ? "nothing" : found))"
            )
        }
        self.demuxer = demuxer
        self.stream = stream
        self.codec = codec
        self.path = path
        self.loop = loop
        self.initialTimestamp = initialTimestamp
        self.isPassThrough = stream.codec == codec
        if let rate = stream.frameRate {
            frameSpacing = .nanoseconds(Int64(1_000_000_000) * Int64(rate.denominator) / Int64(max(1, rate.numerator)))
        }
        guard !isPassThrough else { return }
        decoder = try MediaStreamDecoder(demuxer: demuxer, stream: stream)
        if codec.kind == .video {
            guard stream.width % 2 == 0, stream.height % 2 == 0, stream.width > 0, stream.height > 0 else {
                throw MediaFileError(
                    path: path,
                    kind: .unsupported,
                    reason: "odd resolution \(stream.width)x\(stream.height): I420 needs even sizes"
                )
            }
            var settings = video ?? VideoEncoderSettings(codec: codec)
            settings.codec = codec
            settings.width = stream.width
            settings.height = stream.height
            if let rate = stream.frameRate, video == nil {
                settings.frameRate = max(1, rate.numerator / max(1, rate.denominator))
            }
            videoEncoder = try settings.makeEncoder()
        } else {
            audioEncoder = try OpusAudioEncoder(configuration: audio)
            converter = AudioConverter(channels: audio.channels)
        }
    }

    public func requestKeyframe() { keyframeRequested = true }

    public func setBitrate(_ bitsPerSecond: Int) throws {
        try videoEncoder?.setBitrate(bitsPerSecond)
        try audioEncoder?.setBitrate(bitsPerSecond)
    }

    public func nextFrame() throws -> TimedFrame? {
        while queue.isEmpty {
            guard try fill() else { return nil }
        }
        let next = queue.removeFirst()
        lastTime = next.mediaTime
        return next
    }

    /// Reads (and transcodes) until something is queued; false at the real end.
    private func fill() throws -> Bool {
        if draining {
            draining = false
            if let decoder { try handle(decoder.decode(nil)) }
            if !loop, var converter {
                // The end of the file: emit the last partial 20 ms block, padded with silence.
                let tail = converter.flush()
                self.converter = converter
                try encodeAudio(tail)
            }
            guard loop else { return !queue.isEmpty }
            decoder?.reset()
            try demuxer.rewind()
            // Frames drained from the decoder may still be queued: continue after the latest one.
            loopOffset = (queue.last?.mediaTime ?? lastTime) + frameSpacing
            return true
        }
        guard let packet = try demuxer.readPacket() else {
            draining = true
            return true
        }
        guard packet.streamIndex == stream.index else { return true }
        let due = loopOffset + packet.presentationTime
        if isPassThrough {
            let frame = EncodedFrame(
                codec: codec,
                data: packet.data,
                rtpTimestamp: snappedTimestamp(for: due),
                isKeyframe: packet.isKeyframe
            )
            queue.append(TimedFrame(frame: frame, mediaTime: due))
        } else if let decoder {
            try handle(decoder.decode(packet))
        }
        return true
    }

    /// Containers such as WebM store milliseconds, which would make 30 fps video step 2970, 3060,
    /// 2970... ticks. For constant-rate video the time is snapped to the nearest frame instant, so
    /// the RTP clock advances by exactly one frame duration; timestamps never repeat or go back.
    private func snappedTimestamp(for time: Duration) -> UInt32 {
        var ticks = time.ticks(clockRate: Int(codec.clockRate))
        if codec.kind == .video, let rate = stream.frameRate, rate.numerator > 0, rate.denominator > 0 {
            let nanoseconds = time.ticks(clockRate: 1_000_000_000)
            let frames =
                (nanoseconds * Int64(rate.numerator) + Int64(rate.denominator) * 500_000_000)
                / (Int64(rate.denominator) * 1_000_000_000)
            ticks = frames * Int64(codec.clockRate) * Int64(rate.denominator) / Int64(rate.numerator)
        }
        if let lastTicks, ticks <= lastTicks { ticks = lastTicks + 1 }
        lastTicks = ticks
        return initialTimestamp &+ UInt32(truncatingIfNeeded: ticks)
    }

    private func timestamp(for time: Duration) -> UInt32 {
        initialTimestamp &+ UInt32(truncatingIfNeeded: time.ticks(clockRate: Int(codec.clockRate)))
    }

    private func handle(_ outputs: [MediaStreamDecoder.Output]) throws {
        for output in outputs {
            switch output {
            case .video(var picture, let time):
                guard let encoder = videoEncoder else { continue }
                let due = loopOffset + time
                picture.rtpTimestamp = snappedTimestamp(for: due)
                let force = keyframeRequested
                keyframeRequested = false
                for frame in try encoder.encode(picture, forceKeyframe: force) {
                    queue.append(TimedFrame(frame: frame, mediaTime: due))
                }
            case .audio(let samples, let channels, let sampleRate):
                guard var converter else { continue }
                let blocks = converter.push(samples: samples, channels: channels, sampleRate: sampleRate)
                self.converter = converter
                try encodeAudio(blocks)
            }
        }
    }

    private func encodeAudio(_ blocks: [[Int16]]) throws {
        guard let encoder = audioEncoder else { return }
        for block in blocks {
            let due = Duration.milliseconds(20 * audioBlocks)
            audioBlocks += 1
            let frame = try AudioFrame(
                channels: encoder.configuration.channels,
                samples: block,
                rtpTimestamp: timestamp(for: due)
            )
            if let packet = try encoder.encode(frame) { queue.append(TimedFrame(frame: packet, mediaTime: due)) }
        }
    }
}
