internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// Encodes 48 kHz Float32 PCM into an audio file: Opus in Ogg, FLAC, or 16-bit WAV.
///
/// The caller hands interleaved samples in blocks of any size; the encoder cuts them into the
/// codec's frames (20 ms for Opus, 4608 samples for FLAC) and times each by the samples written
/// before it, which for an output file is the definition of its timeline. The output path is
/// opened by libavformat as given: a caller that wants the file private and atomic creates it
/// first (a file libavformat truncates keeps its mode) and renames it after `close()`.
/// Not thread-safe: one task owns an encoder.
public final class AudioFileEncoder {
    /// The file formats written.
    public enum Format: String, Sendable, CaseIterable {
        /// Opus (libopus, 96 kbit/s stereo or 48 mono) in Ogg.
        case opus
        /// FLAC, 16 bit.
        case flac
        /// RIFF WAVE, 16-bit little-endian PCM.
        case wav

        /// The format for a file name extension: `.opus`/`.ogg`/`.oga`, `.flac`, `.wav`.
        public init?(pathExtension: String) {
            switch pathExtension.lowercased() {
            case "opus", "ogg", "oga": self = .opus
            case "flac": self = .flac
            case "wav": self = .wav
            default: return nil
            }
        }

        var muxerName: String {
            switch self {
            case .opus: "ogg"
            case .flac: "flac"
            case .wav: "wav"
            }
        }
    }

    public let path: String
    public let format: Format
    public let channels: Int
    /// Samples per channel written so far.
    public private(set) var framesWritten: Int64 = 0

    private let context: UnsafeMutablePointer<AVFormatContext>
    private let codec: UnsafeMutablePointer<AVCodecContext>
    private let stream: UnsafeMutablePointer<AVStream>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    /// Samples per channel in one encoder frame.
    private let frameSize: Int
    private let sampleFormat: AVSampleFormat
    /// Interleaved samples waiting for a whole encoder frame.
    private var pending: [Float] = []
    private var pendingFrames = 0
    private var state = State.writing

    private enum State { case writing, closed }

    /// Creates `path` (truncating it) and writes the header.
    ///
    /// - Throws: `MediaFileError` naming the file: no encoder or muxer for `format`, or the file
    ///   cannot be created.
    public init(path: String, format: Format, channels: Int) throws(MediaFileError) {
        FFmpegLogging.silenced
        guard channels == 1 || channels == 2 else {
            throw MediaFileError(path: path, kind: .unsupported, reason: "\(channels) channels; only 1 or 2")
        }
        self.path = path
        self.format = format
        self.channels = channels
        let encoder: UnsafePointer<AVCodec>?
        switch format {
        case .opus:
            encoder = avcodec_find_encoder_by_name("libopus")
            sampleFormat = AV_SAMPLE_FMT_FLT
        case .flac:
            encoder = avcodec_find_encoder(AV_CODEC_ID_FLAC)
            sampleFormat = AV_SAMPLE_FMT_S16
        case .wav:
            encoder = avcodec_find_encoder(AV_CODEC_ID_PCM_S16LE)
            sampleFormat = AV_SAMPLE_FMT_S16
        }
        var created: UnsafeMutablePointer<AVFormatContext>?
        var rc = avformat_alloc_output_context2(&created, nil, format.muxerName, path)
        guard let encoder, rc >= 0, let created else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "no \(format.rawValue) encoder or muxer in this FFmpeg"
            )
        }
        guard let codec = avcodec_alloc_context3(encoder), let frame = av_frame_alloc(), let packet = av_packet_alloc(),
            let stream = avformat_new_stream(created, nil)
        else {
            avformat_free_context(created)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        // From here deinit frees everything, so every later failure just throws.
        self.context = created
        self.codec = codec
        self.frame = frame
        self.packet = packet
        self.stream = stream
        codec.pointee.sample_rate = 48_000
        codec.pointee.sample_fmt = sampleFormat
        codec.pointee.time_base = AVRational(num: 1, den: 48_000)
        av_channel_layout_default(&codec.pointee.ch_layout, Int32(channels))
        if format == .opus { codec.pointee.bit_rate = channels == 2 ? 96_000 : 48_000 }
        if created.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0 {
            codec.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
        }
        rc = avcodec_open2(codec, encoder, nil)
        if rc >= 0 { rc = avcodec_parameters_from_context(stream.pointee.codecpar, codec) }
        guard rc >= 0 else {
            frameSize = 0
            state = .closed
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "cannot open the \(format.rawValue) encoder: \(averrorText(rc))"
            )
        }
        stream.pointee.time_base = AVRational(num: 1, den: 48_000)
        frameSize = codec.pointee.frame_size > 0 ? Int(codec.pointee.frame_size) : 1_024
        pending.reserveCapacity(frameSize * channels * 2)
        rc = avio_open(&created.pointee.pb, path, AVIO_FLAG_WRITE)
        if rc >= 0 { rc = avformat_write_header(created, nil) }
        guard rc >= 0 else {
            state = .closed
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot create the file: \(averrorText(rc))")
        }
    }

    deinit {
        if state == .writing { _ = av_write_trailer(context) }
        if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        var codec: UnsafeMutablePointer<AVCodecContext>? = self.codec
        avcodec_free_context(&codec)
        avformat_free_context(context)
    }

    /// Appends interleaved samples (`channels` per sample frame, nominally in -1...1; beyond is
    /// clipped for the 16-bit formats).
    public func write(_ samples: UnsafeBufferPointer<Float>) throws(MediaFileError) {
        guard state == .writing else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "the encoder is closed")
        }
        var offset = 0
        let total = samples.count - samples.count % channels
        while offset < total {
            let room = (frameSize - pendingFrames) * channels
            let take = min(room, total - offset)
            pending.append(contentsOf: UnsafeBufferPointer(rebasing: samples[offset..<(offset + take)]))
            pendingFrames += take / channels
            offset += take
            if pendingFrames == frameSize { try encodePending() }
        }
    }

    /// Appends interleaved samples from an array.
    public func write(_ samples: [Float]) throws(MediaFileError) {
        var failure: MediaFileError?
        samples.withUnsafeBufferPointer { buffer in
            do throws(MediaFileError) { try write(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Encodes what is pending, drains the encoder, writes the trailer and closes the file.
    public func close() throws(MediaFileError) {
        guard state == .writing else { return }
        if pendingFrames > 0 { try encodePending() }
        try send(nil)
        state = .closed
        let trailer = av_write_trailer(context)
        let ioError = context.pointee.pb?.pointee.error ?? 0
        let closed = avio_closep(&context.pointee.pb)
        for rc in [trailer, ioError, closed] where rc < 0 {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot finish the file: \(averrorText(rc))")
        }
    }

    private func encodePending() throws(MediaFileError) {
        frame.pointee.nb_samples = Int32(pendingFrames)
        frame.pointee.format = sampleFormat.rawValue
        frame.pointee.sample_rate = 48_000
        av_channel_layout_default(&frame.pointee.ch_layout, Int32(channels))
        var rc = av_frame_get_buffer(frame, 0)
        if rc >= 0 { rc = av_frame_make_writable(frame) }
        guard rc >= 0, let data = frame.pointee.extended_data?[0] else {
            av_frame_unref(frame)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        let count = pendingFrames * channels
        pending.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress else { return }
            if sampleFormat == AV_SAMPLE_FMT_FLT {
                UnsafeMutableRawPointer(data).assumingMemoryBound(to: Float.self).update(from: base, count: count)
            } else {
                let out = UnsafeMutableRawPointer(data).assumingMemoryBound(to: Int16.self)
                for index in 0..<count {
                    let value = max(-1, min(1, source[index])) * 32_767
                    out[index] = Int16(value.rounded())
                }
            }
        }
        frame.pointee.pts = framesWritten
        framesWritten += Int64(pendingFrames)
        pending.removeAll(keepingCapacity: true)
        pendingFrames = 0
        defer { av_frame_unref(frame) }
        try send(frame)
    }

    /// Sends a frame (nil drains) and writes every packet that comes out.
    private func send(_ input: UnsafeMutablePointer<AVFrame>?) throws(MediaFileError) {
        var rc = avcodec_send_frame(codec, input)
        guard rc >= 0 || rc == cshim_AVERROR_EOF() else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "encoding failed: \(averrorText(rc))")
        }
        while true {
            rc = avcodec_receive_packet(codec, packet)
            if rc == cshim_AVERROR_EAGAIN() || rc == cshim_AVERROR_EOF() { return }
            guard rc >= 0 else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: "encoding failed: \(averrorText(rc))")
            }
            packet.pointee.stream_index = stream.pointee.index
            av_packet_rescale_ts(packet, codec.pointee.time_base, stream.pointee.time_base)
            rc = av_interleaved_write_frame(context, packet)
            av_packet_unref(packet)
            guard rc >= 0 else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(rc))
            }
        }
    }
}
