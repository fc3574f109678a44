internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// Decodes the first audio stream of a file to Float32 PCM, each decoded frame with its own
/// position taken from its timestamp, for a mixer that places audio on a timeline.
///
/// Positions come from every frame's pts, never from counting samples since the start, so a lost
/// packet (a pts gap) is a gap and a long file cannot drift. The container's own semantics (Opus
/// pre-skip, the Matroska codec delay) are libavformat's and libavcodec's, as for any player.
/// Packets go from the demuxer to the decoder without a copy, and frames come out into the
/// caller's reusable buffer, so decoding allocates nothing per frame on the Swift side.
///
/// A packet the decoder refuses is skipped and counted (`packetsRejected`): a damaged packet
/// costs its own 20 ms, not the rest of the file. Not thread-safe: one task owns a reader.
public final class AudioTrackReader {
    /// The path given to `init`.
    public let path: String
    /// Channels of the decoded PCM (1 or 2; a file with more is read as its first two).
    public let channels: Int
    /// The decoded sample rate (always 48 kHz: other rates are refused at `init`).
    public let sampleRate: Int
    /// Packets the decoder refused (skipped, their time is a gap).
    public private(set) var packetsRejected = 0

    private let format: UnsafeMutablePointer<AVFormatContext>
    private let codec: UnsafeMutablePointer<AVCodecContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let streamIndex: Int32
    private let timeBase: AVRational
    private var draining = false
    private var finished = false

    /// Opens `path` and the decoder of its first audio stream.
    ///
    /// - Throws: `MediaFileError` naming the file when it cannot be opened, has no audio, or its
    ///   audio is not at 48 kHz (Conclave's recordings are Opus, which always decodes at 48 kHz).
    public init(path: String) throws(MediaFileError) {
        FFmpegLogging.silenced
        self.path = path
        var opened: UnsafeMutablePointer<AVFormatContext>?
        var rc = avformat_open_input(&opened, path, nil, nil)
        guard rc >= 0, let opened else {
            let kind: MediaFileError.Kind = rc == cshim_AVERROR_INVALIDDATA() ? .malformed : .unreadable
            throw MediaFileError(path: path, kind: kind, reason: "cannot open: \(averrorText(rc))")
        }
        var owned: UnsafeMutablePointer<AVFormatContext>? = opened
        rc = avformat_find_stream_info(opened, nil)
        let index = rc >= 0 ? av_find_best_stream(opened, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0) : rc
        guard index >= 0, let stream = opened.pointee.streams[Int(index)], let parameters = stream.pointee.codecpar
        else {
            avformat_close_input(&owned)
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: rc < 0 ? "cannot read stream info: \(averrorText(rc))" : "no audio stream"
            )
        }
        guard let codec = decoder(for: parameters.pointee.codec_id),
            let context = avcodec_alloc_context3(codec)
        else {
            avformat_close_input(&owned)
            throw MediaFileError(path: path, kind: .unsupported, reason: "no decoder for the audio stream")
        }
        var contextOwner: UnsafeMutablePointer<AVCodecContext>? = context
        rc = avcodec_parameters_to_context(context, parameters)
        if rc >= 0 {
            context.pointee.pkt_timebase = stream.pointee.time_base
            context.pointee.thread_count = 1
            // Opus decodes at 48 kHz whatever the file says it was captured at.
            rc = avcodec_open2(context, codec, nil)
        }
        guard rc >= 0, context.pointee.sample_rate == 48_000, context.pointee.ch_layout.nb_channels > 0,
            let packet = av_packet_alloc(), let frame = av_frame_alloc()
        else {
            let rate = context.pointee.sample_rate
            avcodec_free_context(&contextOwner)
            avformat_close_input(&owned)
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: rc < 0
                    ? "cannot open the audio decoder: \(averrorText(rc))"
                    : "audio at \(rate) Hz; only 48 kHz is read"
            )
        }
        // Only the audio stream's packets are wanted; the demuxer skips the rest cheaply.
        for other in 0..<Int(opened.pointee.nb_streams) where other != Int(index) {
            opened.pointee.streams[other]?.pointee.discard = AVDISCARD_ALL
        }
        self.format = opened
        self.codec = context
        self.packet = packet
        self.frame = frame
        self.streamIndex = index
        self.timeBase = stream.pointee.time_base
        self.channels = min(2, Int(context.pointee.ch_layout.nb_channels))
        self.sampleRate = 48_000
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        var codec: UnsafeMutablePointer<AVCodecContext>? = self.codec
        avcodec_free_context(&codec)
        var format: UnsafeMutablePointer<AVFormatContext>? = self.format
        avformat_close_input(&format)
    }

    /// One decoded frame's place: `position` is its first sample's time in 48 kHz samples from
    /// the file's time zero (negative for audio before it), `frames` its samples per channel.
    public struct Block: Sendable, Hashable {
        public var position: Int64
        public var frames: Int
    }

    /// Decodes the next frame into `buffer` (interleaved, `channels` per sample frame; the buffer
    /// grows as needed and is meant to be reused) and says where it sits; nil at the end.
    ///
    /// - Throws: `MediaFileError` when the file cannot be read further (what was read stays valid).
    public func next(into buffer: inout [Float]) throws(MediaFileError) -> Block? {
        while !finished {
            let rc = avcodec_receive_frame(codec, frame)
            if rc >= 0 {
                defer { av_frame_unref(frame) }
                guard let block = copyFrame(into: &buffer) else { continue }
                return block
            }
            if rc == cshim_AVERROR_EOF() {
                finished = true
                break
            }
            if rc != cshim_AVERROR_EAGAIN() {
                // A frame the decoder could not produce: the same as a lost packet. The decoder
                // takes the next packet rather than being asked again (which could fail again).
                packetsRejected += 1
            }
            if draining {
                finished = true
                break
            }
            try feed()
        }
        return nil
    }

    /// Reads packets until one of the audio stream reaches the decoder (or the end drains it).
    private func feed() throws(MediaFileError) {
        while true {
            let rc = av_read_frame(format, packet)
            if rc == cshim_AVERROR_EOF() {
                draining = true
                _ = avcodec_send_packet(codec, nil)
                return
            }
            guard rc >= 0 else {
                draining = true
                _ = avcodec_send_packet(codec, nil)
                throw MediaFileError(
                    path: path,
                    kind: rc == cshim_AVERROR_INVALIDDATA() ? .malformed : .unreadable,
                    reason: "read failed: \(averrorText(rc))"
                )
            }
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == streamIndex else { continue }
            let sent = avcodec_send_packet(codec, packet)
            if sent >= 0 { return }
            packetsRejected += 1
        }
    }

    /// Converts the current frame (any common sample format, packed or planar) to interleaved
    /// Float32; nil for a frame without samples or without a timestamp.
    private func copyFrame(into buffer: inout [Float]) -> Block? {
        let count = Int(frame.pointee.nb_samples)
        let sourceChannels = Int(frame.pointee.ch_layout.nb_channels)
        var pts = frame.pointee.best_effort_timestamp
        if pts == cshim_AV_NOPTS_VALUE() { pts = frame.pointee.pts }
        guard count > 0, sourceChannels > 0, pts != cshim_AV_NOPTS_VALUE(), frame.pointee.sample_rate == 48_000
        else {
            packetsRejected += 1
            return nil
        }
        let position = av_rescale_q(pts, timeBase, AVRational(num: 1, den: 48_000))
        let needed = count * channels
        if buffer.count < needed { buffer += repeatElement(0, count: needed - buffer.count) }
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        let packed = av_get_packed_sample_fmt(format)
        let stride = planar ? 1 : sourceChannels
        buffer.withUnsafeMutableBufferPointer { out in
            guard let out = out.baseAddress else { return }
            for channel in 0..<channels {
                guard let plane = plane(planar ? channel : 0) else { continue }
                let first = planar ? 0 : channel
                let raw = UnsafeRawPointer(plane)
                switch packed {
                case AV_SAMPLE_FMT_FLT:
                    let source = raw.assumingMemoryBound(to: Float.self)
                    for index in 0..<count { out[index * channels + channel] = source[first + index * stride] }
                case AV_SAMPLE_FMT_S16:
                    let source = raw.assumingMemoryBound(to: Int16.self)
                    for index in 0..<count {
                        out[index * channels + channel] = Float(source[first + index * stride]) / 32_768
                    }
                case AV_SAMPLE_FMT_S32:
                    let source = raw.assumingMemoryBound(to: Int32.self)
                    for index in 0..<count {
                        out[index * channels + channel] = Float(source[first + index * stride]) / 2_147_483_648
                    }
                case AV_SAMPLE_FMT_DBL:
                    let source = raw.assumingMemoryBound(to: Double.self)
                    for index in 0..<count { out[index * channels + channel] = Float(source[first + index * stride]) }
                default:
                    for index in 0..<count { out[index * channels + channel] = 0 }
                }
            }
        }
        return Block(position: position, frames: count)
    }

    /// The frame's data pointer for `plane` (the extended list holds planes past the eighth).
    private func plane(_ index: Int) -> UnsafeMutablePointer<UInt8>? {
        if let extended = frame.pointee.extended_data { return extended[index] }
        guard index < 8 else { return nil }
        return withUnsafeBytes(of: frame.pointee.data) {
            $0.load(
                fromByteOffset: index * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                as: UnsafeMutablePointer<UInt8>?.self
            )
        }
    }
}
