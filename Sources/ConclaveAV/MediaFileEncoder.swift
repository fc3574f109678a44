internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// Encodes raw pictures and PCM with libavcodec into an MP4, WebM or Matroska file: the output of
/// a composition, where the frames are made here rather than received already encoded (that is
/// `MediaFileWriter`'s job).
///
/// Pictures are I420 frames handed in one per output frame, in order; their time is their index
/// at the file's frame rate. Audio is 48 kHz stereo Float32 interleaved, in blocks of any length;
/// the writer cuts it into the codec's frames. One encoder thread (`thread_count` 1): a
/// composition runs on one thread and is measured against one core.
/// Not thread-safe: one task owns a writer.
public final class MediaFileEncoder {
    /// The file formats and the codecs each gets.
    public enum Format: String, Sendable, CaseIterable {
        /// MP4: H264 (libx264, else OpenH264) and AAC.
        case mp4
        /// WebM: VP8 and Opus.
        case webm
        /// Matroska: H264 and Opus.
        case matroska

        /// The format for a file name extension (`.mp4`/`.m4v`, `.webm`, `.mkv`), nil for others.
        public init?(pathExtension: String) {
            switch pathExtension.lowercased() {
            case "mp4", "m4v": self = .mp4
            case "webm": self = .webm
            case "mkv": self = .matroska
            default: return nil
            }
        }

        var muxerName: String { rawValue }
        var usesH264: Bool { self != .webm }
    }

    /// What the video is encoded as.
    public struct VideoSettings: Sendable, Hashable {
        public var width: Int
        public var height: Int
        public var frameRate: Int
        /// libx264's speed presets, fastest first.
        public static let x264Presets = [
            "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
        ]
        /// The fastest: a composition's target is several times real time on one core.
        public static let defaultX264Preset = "ultrafast"

        /// libx264's speed preset; the bench hands the same one to the `ffmpeg` program.
        public var x264Preset = defaultX264Preset
        /// libx264's constant rate factor.
        public var x264CRF = 23
        /// Target bitrate for the encoders without a quality mode (VP8, OpenH264).
        public var bitrate = 2_500_000

        public init(width: Int, height: Int, frameRate: Int) {
            self.width = width
            self.height = height
            self.frameRate = frameRate
        }
    }

    /// The audio's sample rate: what the mix is made at.
    public static let audioSampleRate = 48_000
    /// The audio's channels (interleaved).
    public static let audioChannels = 2

    /// The output path.
    public let path: String
    public let format: Format
    public let video: VideoSettings
    /// libavcodec's name of the video encoder in use (`libx264`, `libopenh264`, `libvpx`).
    public let videoEncoderName: String
    /// libavcodec's name of the audio encoder in use, nil for a file without audio.
    public let audioEncoderName: String?
    /// Pictures written so far.
    public private(set) var framesWritten = 0

    private let context: UnsafeMutablePointer<AVFormatContext>
    private let videoCodec: UnsafeMutablePointer<AVCodecContext>
    private let videoStream: UnsafeMutablePointer<AVStream>
    private let audioCodec: UnsafeMutablePointer<AVCodecContext>?
    private let audioStream: UnsafeMutablePointer<AVStream>?
    private let samples: UnsafeMutablePointer<AVFrame>?
    private let packet: UnsafeMutablePointer<AVPacket>
    /// Interleaved samples not yet a whole codec frame.
    private var pending: [Float] = []
    private var samplesWritten: Int64 = 0
    private var finished = false

    /// Creates the file and opens the encoders.
    ///
    /// - Parameters:
    ///   - audio: whether the file gets an audio track.
    ///   - muxerOptions: libavformat muxer options (a live composite's Matroska
    ///     `cluster_time_limit`, so a killed writer leaves clusters of at most that length behind).
    public init(
        path: String,
        format: Format,
        video: VideoSettings,
        audio: Bool,
        muxerOptions: [String: String] = [:]
    ) throws(MediaFileError) {
        FFmpegLogging.silenced
        self.path = path
        self.format = format
        self.video = video
        guard video.width >= 16, video.height >= 16, video.width % 2 == 0, video.height % 2 == 0,
            video.width <= 7_680, video.height <= 4_320, (1...120).contains(video.frameRate)
        else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "cannot encode \(video.width)x\(video.height) at \(video.frameRate) fps"
            )
        }
        var created: UnsafeMutablePointer<AVFormatContext>?
        var rc = avformat_alloc_output_context2(&created, nil, format.muxerName, path)
        guard rc >= 0, let created else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "no \(format.rawValue) muxer: \(averrorText(rc))"
            )
        }
        self.context = created
        guard let packet = av_packet_alloc() else {
            avformat_free_context(created)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        self.packet = packet
        let globalHeader = created.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0

        // Video.
        let videoCandidates = format.usesH264 ? ["libx264", "libopenh264"] : ["libvpx"]
        var opened: (UnsafeMutablePointer<AVCodecContext>, String)?
        var failure = "none of \(videoCandidates.joined(separator: ", ")) is in this libavcodec"
        for name in videoCandidates {
            guard let codec = avcodec_find_encoder_by_name(name), let codecContext = avcodec_alloc_context3(codec)
            else { continue }
            codecContext.pointee.width = Int32(video.width)
            codecContext.pointee.height = Int32(video.height)
            codecContext.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            codecContext.pointee.time_base = AVRational(num: 1, den: Int32(video.frameRate))
            codecContext.pointee.framerate = AVRational(num: Int32(video.frameRate), den: 1)
            codecContext.pointee.gop_size = Int32(video.frameRate * 2)
            codecContext.pointee.thread_count = 1
            if globalHeader { codecContext.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
            var options: OpaquePointer?
            switch name {
            case "libx264":
                av_dict_set(&options, "preset", video.x264Preset, 0)
                av_dict_set(&options, "crf", "\(video.x264CRF)", 0)
            case "libvpx":
                codecContext.pointee.bit_rate = Int64(video.bitrate)
                av_dict_set(&options, "deadline", "realtime", 0)
                av_dict_set(&options, "cpu-used", "8", 0)
            default:
                codecContext.pointee.bit_rate = Int64(video.bitrate)
            }
            rc = avcodec_open2(codecContext, codec, &options)
            av_dict_free(&options)
            if rc >= 0 {
                opened = (codecContext, name)
                break
            }
            failure = "cannot open \(name): \(averrorText(rc))"
            var doomed: UnsafeMutablePointer<AVCodecContext>? = codecContext
            avcodec_free_context(&doomed)
        }
        guard let (videoCodec, videoName) = opened else {
            Self.release(created, packet)
            throw MediaFileError(path: path, kind: .unsupported, reason: "no video encoder: \(failure)")
        }
        self.videoCodec = videoCodec
        self.videoEncoderName = videoName
        guard let videoStream = avformat_new_stream(created, nil),
            avcodec_parameters_from_context(videoStream.pointee.codecpar, videoCodec) >= 0
        else {
            var doomed: UnsafeMutablePointer<AVCodecContext>? = videoCodec
            avcodec_free_context(&doomed)
            Self.release(created, packet)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        videoStream.pointee.time_base = videoCodec.pointee.time_base
        videoStream.pointee.avg_frame_rate = videoCodec.pointee.framerate
        self.videoStream = videoStream

        // Audio.
        var audioCodec: UnsafeMutablePointer<AVCodecContext>?
        var audioName: String?
        var audioFailure: String?
        if audio {
            let name = format == .mp4 ? "aac" : "libopus"
            if let codec = avcodec_find_encoder_by_name(name), let codecContext = avcodec_alloc_context3(codec) {
                codecContext.pointee.sample_rate = Int32(Self.audioSampleRate)
                av_channel_layout_default(&codecContext.pointee.ch_layout, Int32(Self.audioChannels))
                codecContext.pointee.sample_fmt = Self.sampleFormat(for: codec)
                codecContext.pointee.bit_rate = 128_000
                codecContext.pointee.time_base = AVRational(num: 1, den: Int32(Self.audioSampleRate))
                codecContext.pointee.thread_count = 1
                if globalHeader { codecContext.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
                rc = avcodec_open2(codecContext, codec, nil)
                if rc >= 0 {
                    audioCodec = codecContext
                    audioName = name
                } else {
                    audioFailure = "cannot open \(name): \(averrorText(rc))"
                    var doomed: UnsafeMutablePointer<AVCodecContext>? = codecContext
                    avcodec_free_context(&doomed)
                }
            } else {
                audioFailure = "no \(name) encoder in this libavcodec"
            }
        }
        var audioStream: UnsafeMutablePointer<AVStream>?
        var samples: UnsafeMutablePointer<AVFrame>?
        if let audioCodec {
            audioStream = avformat_new_stream(created, nil)
            samples = av_frame_alloc()
            if let audioStream, avcodec_parameters_from_context(audioStream.pointee.codecpar, audioCodec) >= 0 {
                audioStream.pointee.time_base = audioCodec.pointee.time_base
            } else {
                audioFailure = "out of memory"
            }
        }
        self.audioCodec = audioCodec
        self.audioStream = audioStream
        self.samples = samples
        self.audioEncoderName = audioName
        if let audioFailure {
            closeEverything(writeTrailer: false)
            throw MediaFileError(path: path, kind: .unsupported, reason: "no audio encoder: \(audioFailure)")
        }

        rc = avio_open(&created.pointee.pb, path, AVIO_FLAG_WRITE)
        guard rc >= 0 else {
            closeEverything(writeTrailer: false)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot create: \(averrorText(rc))")
        }
        var headerOptions: OpaquePointer?
        for (key, value) in muxerOptions { av_dict_set(&headerOptions, key, value, 0) }
        rc = avformat_write_header(created, &headerOptions)
        av_dict_free(&headerOptions)
        guard rc >= 0 else {
            closeEverything(writeTrailer: false)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot write the header: \(averrorText(rc))")
        }
    }

    deinit { if !finished { closeEverything(writeTrailer: false) } }

    /// Encodes the next picture straight from a libavutil `AVFrame` (I420 at the file's size),
    /// without copying it: the composite's pictures come out of libavfilter, whose owner
    /// (ConclaveCompose) hands the frame over as a raw pointer since the C type is not part of
    /// this module's interface. The encoder takes its own reference; the caller keeps and
    /// unreferences its own.
    public func writePicture(avFrame: UnsafeMutableRawPointer) throws(MediaFileError) {
        guard !finished else { throw MediaFileError(path: path, kind: .writeFailed, reason: "the file is finished") }
        let frame = avFrame.assumingMemoryBound(to: AVFrame.self)
        guard frame.pointee.width == Int32(video.width), frame.pointee.height == Int32(video.height),
            frame.pointee.format == AV_PIX_FMT_YUV420P.rawValue
        else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason:
                    "a \(frame.pointee.width)x\(frame.pointee.height) picture for a \(video.width)x\(video.height) file"
            )
        }
        frame.pointee.pts = Int64(framesWritten)
        frame.pointee.pict_type = AV_PICTURE_TYPE_NONE
        framesWritten += 1
        let rc = avcodec_send_frame(videoCodec, frame)
        guard rc >= 0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "video encoding failed: \(averrorText(rc))")
        }
        try drain(videoCodec, videoStream)
    }

    /// Adds interleaved stereo samples at 48 kHz; whole codec frames are encoded at once.
    public func writeAudio(_ interleaved: [Float]) throws(MediaFileError) {
        guard let audioCodec, let audioStream else { return }
        guard !finished else { throw MediaFileError(path: path, kind: .writeFailed, reason: "the file is finished") }
        pending += interleaved
        let frameSize = max(1, Int(audioCodec.pointee.frame_size)) * Self.audioChannels
        var start = 0
        while pending.count - start >= frameSize {
            try encodeAudio(pending[start..<(start + frameSize)], audioCodec, audioStream)
            start += frameSize
        }
        pending.removeFirst(start)
    }

    /// Pushes the muxer's buffered bytes to the file now (a live composite calls this so a
    /// crash loses at most the cluster being filled), surfacing any pending write error.
    public func flush() throws(MediaFileError) {
        guard !finished, let io = context.pointee.pb else { return }
        avio_flush(io)
        if io.pointee.error < 0 {
            throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(io.pointee.error))
        }
    }

    /// Encodes what is left, writes the trailer and closes the file.
    public func finish() throws(MediaFileError) {
        guard !finished else { return }
        if let audioCodec, let audioStream {
            if !pending.isEmpty {
                let frameSize = max(1, Int(audioCodec.pointee.frame_size)) * Self.audioChannels
                let padded = pending + [Float](repeating: 0, count: (frameSize - pending.count % frameSize) % frameSize)
                pending = []
                try encodeAudio(padded[...], audioCodec, audioStream)
            }
            guard avcodec_send_frame(audioCodec, nil) >= 0 else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot drain the audio encoder")
            }
            try drain(audioCodec, audioStream)
        }
        guard avcodec_send_frame(videoCodec, nil) >= 0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot drain the video encoder")
        }
        try drain(videoCodec, videoStream)
        let rc = av_write_trailer(context)
        closeEverything(writeTrailer: false)
        guard rc >= 0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot write the trailer: \(averrorText(rc))")
        }
    }

    private func encodeAudio(
        _ block: ArraySlice<Float>,
        _ codec: UnsafeMutablePointer<AVCodecContext>,
        _ stream: UnsafeMutablePointer<AVStream>
    ) throws(MediaFileError) {
        guard let samples else { return }
        let count = block.count / Self.audioChannels
        samples.pointee.nb_samples = Int32(count)
        samples.pointee.format = codec.pointee.sample_fmt.rawValue
        samples.pointee.sample_rate = codec.pointee.sample_rate
        var rc = av_channel_layout_copy(&samples.pointee.ch_layout, &codec.pointee.ch_layout)
        if rc >= 0 { rc = av_frame_get_buffer(samples, 0) }
        guard rc >= 0, let first = samples.pointee.data.0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        defer { av_frame_unref(samples) }
        let channels = Self.audioChannels
        block.withUnsafeBufferPointer { source in
            switch codec.pointee.sample_fmt {
            case AV_SAMPLE_FMT_FLTP:
                let second = samples.pointee.data.1 ?? first
                let left = UnsafeMutableRawPointer(first).assumingMemoryBound(to: Float.self)
                let right = UnsafeMutableRawPointer(second).assumingMemoryBound(to: Float.self)
                for index in 0..<count {
                    left[index] = source[index * channels]
                    right[index] = source[index * channels + 1]
                }
            case AV_SAMPLE_FMT_S16:
                let out = UnsafeMutableRawPointer(first).assumingMemoryBound(to: Int16.self)
                for index in 0..<(count * channels) {
                    out[index] = Int16(max(-32_768, min(32_767, (source[index] * 32_768).rounded())))
                }
            default:
                let out = UnsafeMutableRawPointer(first).assumingMemoryBound(to: Float.self)
                for index in 0..<(count * channels) { out[index] = source[index] }
            }
        }
        samples.pointee.pts = samplesWritten
        samplesWritten += Int64(count)
        rc = avcodec_send_frame(codec, samples)
        guard rc >= 0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "audio encoding failed: \(averrorText(rc))")
        }
        try drain(codec, stream)
    }

    /// Writes every packet the encoder has ready.
    private func drain(
        _ codec: UnsafeMutablePointer<AVCodecContext>,
        _ stream: UnsafeMutablePointer<AVStream>
    ) throws(MediaFileError) {
        while true {
            var rc = avcodec_receive_packet(codec, packet)
            if rc == cshim_AVERROR_EAGAIN() || rc == cshim_AVERROR_EOF() { return }
            guard rc >= 0 else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: "encoding failed: \(averrorText(rc))")
            }
            av_packet_rescale_ts(packet, codec.pointee.time_base, stream.pointee.time_base)
            packet.pointee.stream_index = stream.pointee.index
            rc = av_interleaved_write_frame(context, packet)
            av_packet_unref(packet)
            guard rc >= 0 else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: "write failed: \(averrorText(rc))")
            }
        }
    }

    private func closeEverything(writeTrailer: Bool) {
        finished = true
        if writeTrailer { _ = av_write_trailer(context) }
        var video: UnsafeMutablePointer<AVCodecContext>? = videoCodec
        avcodec_free_context(&video)
        var audio = audioCodec
        if audio != nil { avcodec_free_context(&audio) }
        var samples = self.samples
        if samples != nil { av_frame_free(&samples) }
        if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
        Self.release(context, packet)
    }

    private static func release(
        _ context: UnsafeMutablePointer<AVFormatContext>,
        _ packet: UnsafeMutablePointer<AVPacket>
    ) {
        var packet: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&packet)
        avformat_free_context(context)
    }

    /// The encoder's preferred sample format among those this writer fills.
    private static func sampleFormat(for codec: UnsafePointer<AVCodec>) -> AVSampleFormat {
        guard var formats = codec.pointee.sample_fmts else { return AV_SAMPLE_FMT_FLT }
        var found: [AVSampleFormat] = []
        while formats.pointee != AV_SAMPLE_FMT_NONE {
            found.append(formats.pointee)
            formats += 1
        }
        for wanted in [AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_S16] where found.contains(wanted) {
            return wanted
        }
        return found.first ?? AV_SAMPLE_FMT_FLT
    }
}
