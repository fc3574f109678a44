internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// One stream of a file opened by `MediaDemuxer`.
public struct MediaStreamInfo: Sendable, Hashable {
    /// The stream's index in the file.
    public var index: Int
    /// Audio, video, or nil for anything else (subtitles, data).
    public var kind: MediaKind?
    /// The codec, when it is one Conclave sends as-is.
    public var codec: MediaCodec?
    /// FFmpeg's codec name (for messages about unsupported codecs).
    public var codecName: String
    /// Picture size (video).
    public var width: Int
    /// Picture size (video).
    public var height: Int
    /// Sample rate (audio).
    public var sampleRate: Int
    /// Channel count (audio).
    public var channels: Int
    /// Frame rate as a fraction, when the file states one (video).
    public var frameRate: (numerator: Int, denominator: Int)? {
        frameRateNumerator > 0 && frameRateDenominator > 0 ? (frameRateNumerator, frameRateDenominator) : nil
    }
    var frameRateNumerator: Int
    var frameRateDenominator: Int
    var timeBaseNumerator: Int32
    var timeBaseDenominator: Int32
}

/// One compressed packet read from a file.
public struct DemuxedPacket: Sendable, Hashable {
    /// The stream it belongs to.
    public var streamIndex: Int
    /// The compressed bytes; H264 is converted to Annex-B with 4-byte start codes.
    public var data: [UInt8]
    /// Presentation time from the start of the stream.
    public var presentationTime: Duration
    /// Whether a decoder can start here.
    public var isKeyframe: Bool
    /// The original timestamp in the stream's time base (for the libavcodec decoder).
    var rawPTS: Int64
}

/// Reads any file libavformat can open (WebM, Matroska, MP4, Ogg, IVF, raw Annex-B H264, ...) packet
/// by packet, without decoding.
///
/// Not thread-safe: one task owns a demuxer.
public final class MediaDemuxer {
    /// The path given to `init`.
    public let path: String
    /// The file's streams.
    public let streams: [MediaStreamInfo]
    /// Replaced by ``rewind()``, which opens the file again.
    private(set) var context: UnsafeMutablePointer<AVFormatContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var avccConfigurations: [Int: H264AVCC.DecoderConfiguration] = [:]
    private var firstPTS: [Int: Int64] = [:]

    /// Opens and probes a file; fails naming the file and FFmpeg's reason.
    public init(path: String) throws(MediaFileError) {
        FFmpegLogging.silenced
        self.path = path
        let opened = try Self.open(path)
        guard let packet = av_packet_alloc() else {
            var doomed: UnsafeMutablePointer<AVFormatContext>? = opened
            avformat_close_input(&doomed)
            throw MediaFileError(path: path, kind: .unreadable, reason: "out of memory")
        }
        self.context = opened
        self.packet = packet
        var streams: [MediaStreamInfo] = []
        for index in 0..<Int(opened.pointee.nb_streams) {
            guard let stream = opened.pointee.streams[index], let parameters = stream.pointee.codecpar else { continue }
            let kind: MediaKind? =
                switch parameters.pointee.codec_type {
                case AVMEDIA_TYPE_AUDIO: .audio
                case AVMEDIA_TYPE_VIDEO: .video
                default: nil
                }
            let codec = mediaCodec(for: parameters.pointee.codec_id)
            let name = avcodec_get_name(parameters.pointee.codec_id).map { String(cString: $0) } ?? "unknown"
            let rate =
                stream.pointee.avg_frame_rate.num > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate
            streams.append(
                MediaStreamInfo(
                    index: index,
                    kind: kind,
                    codec: codec,
                    codecName: name,
                    width: Int(parameters.pointee.width),
                    height: Int(parameters.pointee.height),
                    sampleRate: Int(parameters.pointee.sample_rate),
                    channels: Int(parameters.pointee.ch_layout.nb_channels),
                    frameRateNumerator: Int(rate.num),
                    frameRateDenominator: Int(rate.den),
                    timeBaseNumerator: stream.pointee.time_base.num,
                    timeBaseDenominator: stream.pointee.time_base.den
                )
            )
            if codec == .h264, let extradata = parameters.pointee.extradata, parameters.pointee.extradata_size > 0 {
                let bytes = Array(UnsafeBufferPointer(start: extradata, count: Int(parameters.pointee.extradata_size)))
                if let configuration = H264AVCC.DecoderConfiguration(extradata: bytes) {
                    avccConfigurations[index] = configuration
                }
            }
        }
        self.streams = streams
    }

    /// Opens `path` and reads its stream info.
    private static func open(_ path: String) throws(MediaFileError) -> UnsafeMutablePointer<AVFormatContext> {
        var opened: UnsafeMutablePointer<AVFormatContext>?
        var rc = avformat_open_input(&opened, path, nil, nil)
        guard rc >= 0, let opened else {
            let kind: MediaFileError.Kind = rc == cshim_AVERROR_INVALIDDATA() ? .malformed : .unreadable
            throw MediaFileError(path: path, kind: kind, reason: "cannot open: \(averrorText(rc))")
        }
        rc = avformat_find_stream_info(opened, nil)
        guard rc >= 0 else {
            var doomed: UnsafeMutablePointer<AVFormatContext>? = opened
            avformat_close_input(&doomed)
            throw MediaFileError(path: path, kind: .malformed, reason: "cannot read stream info: \(averrorText(rc))")
        }
        return opened
    }

    deinit {
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        var context: UnsafeMutablePointer<AVFormatContext>? = self.context
        avformat_close_input(&context)
    }

    /// The first stream of a kind, or nil.
    public func firstStream(of kind: MediaKind) -> MediaStreamInfo? { streams.first { $0.kind == kind } }

    /// Reads the next packet of any stream; nil at the end of the file.
    public func readPacket() throws(MediaFileError) -> DemuxedPacket? {
        while true {
            let rc = av_read_frame(context, packet)
            if rc == cshim_AVERROR_EOF() { return nil }
            guard rc >= 0 else {
                throw MediaFileError(
                    path: path,
                    kind: rc == cshim_AVERROR_INVALIDDATA() ? .malformed : .unreadable,
                    reason: "read failed: \(averrorText(rc))"
                )
            }
            defer { av_packet_unref(packet) }
            let index = Int(packet.pointee.stream_index)
            guard index >= 0, index < streams.count, let data = packet.pointee.data, packet.pointee.size > 0 else {
                continue
            }
            let stream = streams[index]
            var bytes = Array(UnsafeBufferPointer(start: data, count: Int(packet.pointee.size)))
            let isKey = packet.pointee.flags & AV_PKT_FLAG_KEY != 0
            if let configuration = avccConfigurations[index] {
                do {
                    bytes = try configuration.annexB(bytes, keyframe: isKey)
                } catch {
                    throw MediaFileError(
                        path: path,
                        kind: .malformed,
                        reason: "H264 sample with a bad NAL length: \(error)"
                    )
                }
            } else if stream.codec == .h264 {
                bytes = H264AnnexB.withFourByteStartCodes(bytes)
            }
            var pts = packet.pointee.pts
            if pts == cshim_AV_NOPTS_VALUE() { pts = packet.pointee.dts }
            if pts == cshim_AV_NOPTS_VALUE() { pts = 0 }
            let first = firstPTS[index] ?? pts
            firstPTS[index] = first
            // Both come from the file: a timestamp far from the first is held at the bounds, not a trap.
            let (sinceFirst, overflow) = pts.subtractingReportingOverflow(first)
            let nanoseconds = av_rescale_q(
                overflow ? (pts < first ? .min + 1 : .max) : sinceFirst,
                AVRational(num: stream.timeBaseNumerator, den: stream.timeBaseDenominator),
                AVRational(num: 1, den: 1_000_000_000)
            )
            return DemuxedPacket(
                streamIndex: index,
                data: bytes,
                presentationTime: .nanoseconds(nanoseconds),
                isKeyframe: isKey,
                rawPTS: pts
            )
        }
    }

    /// Goes back to the start of the file (for looping), by opening it again.
    ///
    /// A seek to the start is not the start: libavformat's Matroska demuxer seeks to the first
    /// video keyframe's cue and then drops every packet of other tracks stamped before it, so
    /// audio that starts a few milliseconds before the video (as a recording's first packets
    /// often do) was lost at each rewind; raw streams cannot seek by time at all.
    public func rewind() throws(MediaFileError) {
        let reopened = try Self.open(path)
        guard Int(reopened.pointee.nb_streams) == Int(context.pointee.nb_streams) else {
            var doomed: UnsafeMutablePointer<AVFormatContext>? = reopened
            avformat_close_input(&doomed)
            throw MediaFileError(path: path, kind: .malformed, reason: "the file's streams changed while it was read")
        }
        var old: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&old)
        context = reopened
        av_packet_unref(packet)
    }
}
