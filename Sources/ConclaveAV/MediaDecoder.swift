internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// Decodes one stream of a `MediaDemuxer` with libavcodec, for files whose codec differs from the
/// one negotiated (the decoded frames are then re-encoded with Conclave's own encoders).
///
/// Video comes out as I420 (the file must be 4:2:0, 8 bit, even-sized). Audio comes out as 16-bit
/// PCM at the file's own rate and channel count; `AudioConverter` brings it to 48 kHz.
/// Not thread-safe: one task owns a decoder.
public final class MediaStreamDecoder {
    /// The stream being decoded.
    public let stream: MediaStreamInfo
    private let path: String
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    /// When set, pictures larger than what fills this box are scaled down to it as they are taken
    /// out of the decoder (``PictureFit``): the copy out of libavcodec's buffers that happens
    /// anyway then writes the smaller picture. Nil: pictures keep their decoded size.
    public var downscaleBox: PictureSize?
    /// The size of the newest picture as libavcodec decoded it, before any scaling down.
    public private(set) var lastDecodedSize: PictureSize?

    /// A decoded item.
    public enum Output: Sendable {
        /// A picture and its presentation time from the stream start.
        case video(VideoFrame, Duration)
        /// PCM (interleaved Int16) at `sampleRate` with `channels` channels.
        case audio(samples: [Int16], channels: Int, sampleRate: Int)
    }

    /// Prepares a decoder for `stream` of `demuxer`.
    public init(demuxer: MediaDemuxer, stream: MediaStreamInfo) throws(MediaFileError) {
        self.stream = stream
        self.path = demuxer.path
        guard stream.index < Int(demuxer.context.pointee.nb_streams),
            let avStream = demuxer.context.pointee.streams[stream.index], let parameters = avStream.pointee.codecpar
        else { throw MediaFileError(path: demuxer.path, kind: .malformed, reason: "no stream \(stream.index)") }
        guard let codec = decoder(for: parameters.pointee.codec_id) else {
            throw MediaFileError(
                path: demuxer.path,
                kind: .unsupported,
                reason: "no decoder for codec \(stream.codecName)"
            )
        }
        guard let context = avcodec_alloc_context3(codec), let frame = av_frame_alloc(), let packet = av_packet_alloc()
        else { throw MediaFileError(path: demuxer.path, kind: .unreadable, reason: "out of memory") }
        self.context = context
        self.frame = frame
        self.packet = packet
        var rc = avcodec_parameters_to_context(context, parameters)
        if rc >= 0 {
            context.pointee.pkt_timebase = avStream.pointee.time_base
            context.pointee.thread_count = 1
            rc = avcodec_open2(context, codec, nil)
        }
        guard rc >= 0 else {
            throw MediaFileError(
                path: demuxer.path,
                kind: .unsupported,
                reason: "cannot open the \(stream.codecName) decoder: \(averrorText(rc))"
            )
        }
    }

    /// Prepares a decoder for frames received in a call (no file around them): VP8 and H264
    /// pictures, Opus at 48 kHz stereo. Times are the frames' RTP timestamps at the codec's clock.
    ///
    /// - Parameter name: what errors name in place of a file path.
    public init(codec mediaCodec: MediaCodec, name: String) throws(MediaFileError) {
        let id: AVCodecID =
            switch mediaCodec {
            case .opus: AV_CODEC_ID_OPUS
            case .vp8: AV_CODEC_ID_VP8
            case .h264: AV_CODEC_ID_H264
            }
        self.path = name
        self.stream = MediaStreamInfo(
            index: 0,
            kind: mediaCodec.kind,
            codec: mediaCodec,
            codecName: mediaCodec.rawValue,
            width: 0,
            height: 0,
            sampleRate: mediaCodec == .opus ? 48_000 : 0,
            channels: mediaCodec == .opus ? 2 : 0,
            frameRateNumerator: 0,
            frameRateDenominator: 0,
            timeBaseNumerator: 1,
            timeBaseDenominator: Int32(mediaCodec.clockRate)
        )
        guard let codec = decoder(for: id) else {
            throw MediaFileError(path: name, kind: .unsupported, reason: "no \(mediaCodec) decoder in this libavcodec")
        }
        guard let context = avcodec_alloc_context3(codec), let frame = av_frame_alloc(), let packet = av_packet_alloc()
        else { throw MediaFileError(path: name, kind: .unreadable, reason: "out of memory") }
        self.context = context
        self.frame = frame
        self.packet = packet
        context.pointee.pkt_timebase = AVRational(num: 1, den: Int32(mediaCodec.clockRate))
        context.pointee.thread_count = 1
        if mediaCodec == .opus {
            context.pointee.sample_rate = 48_000
            av_channel_layout_default(&context.pointee.ch_layout, 2)
        }
        let rc = avcodec_open2(context, codec, nil)
        guard rc >= 0 else {
            throw MediaFileError(
                path: name,
                kind: .unsupported,
                reason: "cannot open the \(mediaCodec) decoder: \(averrorText(rc))"
            )
        }
    }

    /// Decodes one received frame (its RTP timestamp as the packet's time).
    public func decode(_ frame: EncodedFrame) throws(MediaFileError) -> [Output] {
        try decode(
            DemuxedPacket(
                streamIndex: 0,
                data: frame.data,
                presentationTime: .zero,
                isKeyframe: frame.isKeyframe,
                rawPTS: Int64(frame.rtpTimestamp)
            )
        )
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = self.context
        avcodec_free_context(&context)
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
    }

    /// Makes a drained decoder ready for new input (after a rewind).
    public func reset() { avcodec_flush_buffers(context) }

    /// Decodes one packet (or drains the decoder when `packet` is nil) and returns what came out.
    ///
    /// H264 packets are in Annex-B form here; FFmpeg's H264 decoder accepts that whatever the
    /// container's extradata says.
    public func decode(_ input: DemuxedPacket?) throws(MediaFileError) -> [Output] {
        var rc: Int32
        if let input {
            guard input.data.count <= Int(Int32.max) - Int(AV_INPUT_BUFFER_PADDING_SIZE) else {
                throw MediaFileError(
                    path: path,
                    kind: .malformed,
                    reason: "a packet of \(input.data.count) bytes is too large"
                )
            }
            guard av_new_packet(packet, Int32(input.data.count)) >= 0, let destination = packet.pointee.data else {
                throw MediaFileError(path: path, kind: .unreadable, reason: "out of memory")
            }
            input.data.withUnsafeBufferPointer { source in
                guard let base = source.baseAddress else { return }
                destination.update(from: base, count: source.count)
            }
            packet.pointee.pts = input.rawPTS
            packet.pointee.dts = cshim_AV_NOPTS_VALUE()
            if input.isKeyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
            rc = avcodec_send_packet(context, packet)
            av_packet_unref(packet)
        } else {
            rc = avcodec_send_packet(context, nil)
        }
        guard rc >= 0 || rc == cshim_AVERROR_EOF() || rc == cshim_AVERROR_EAGAIN() else {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "\(stream.codecName) decoding failed: \(averrorText(rc))"
            )
        }
        var outputs: [Output] = []
        while true {
            rc = avcodec_receive_frame(context, frame)
            if rc == cshim_AVERROR_EAGAIN() || rc == cshim_AVERROR_EOF() { break }
            guard rc >= 0 else {
                throw MediaFileError(
                    path: path,
                    kind: .malformed,
                    reason: "\(stream.codecName) decoding failed: \(averrorText(rc))"
                )
            }
            defer { av_frame_unref(frame) }
            outputs.append(try convert())
        }
        return outputs
    }

    private func convert() throws(MediaFileError) -> Output {
        let width = Int(frame.pointee.width)
        let height = Int(frame.pointee.height)
        if stream.kind == .video {
            let format = AVPixelFormat(rawValue: frame.pointee.format)
            guard format == AV_PIX_FMT_YUV420P || format == AV_PIX_FMT_YUVJ420P else {
                let name = av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "\(frame.pointee.format)"
                throw MediaFileError(
                    path: path,
                    kind: .unsupported,
                    reason: "pixel format \(name); only 8-bit 4:2:0 (yuv420p) is supported"
                )
            }
            guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else {
                throw MediaFileError(
                    path: path,
                    kind: .unsupported,
                    reason: "odd resolution \(width)x\(height): I420 needs even sizes"
                )
            }
            lastDecodedSize = PictureSize(width: width, height: height)
            let size =
                downscaleBox.flatMap { PictureFit.downscaledSize(width: width, height: height, for: $0) }
                ?? PictureSize(width: width, height: height)
            // Every byte is written below (a missing plane as zeros), so the buffer is not cleared
            // first: at composite rates that clearing was a memset per decoded picture.
            let count = VideoFrame.byteCount(width: size.width, height: size.height)
            let planes = (0..<3).map { plane -> (base: UnsafePointer<UInt8>, stride: Int)? in
                let stride = withUnsafeBytes(of: frame.pointee.linesize) {
                    $0.load(fromByteOffset: plane * 4, as: Int32.self)
                }
                let source = withUnsafeBytes(of: frame.pointee.data) {
                    $0.load(
                        fromByteOffset: plane * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                        as: UnsafeMutablePointer<UInt8>?.self
                    )
                }
                return source.map { (UnsafePointer($0), Int(stride)) }
            }
            let data = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
                initialized = count
                guard let base = out.baseAddress else { return }
                PictureFit.scalePicture(planes, width: width, height: height, into: base, size: size)
            }
            var pts = frame.pointee.best_effort_timestamp
            if pts == cshim_AV_NOPTS_VALUE() { pts = 0 }
            let nanoseconds = av_rescale_q(
                pts,
                AVRational(num: stream.timeBaseNumerator, den: stream.timeBaseDenominator),
                AVRational(num: 1, den: 1_000_000_000)
            )
            do throws(RawMediaError) {
                let picture = try VideoFrame(width: size.width, height: size.height, data: data, rtpTimestamp: 0)
                return .video(picture, .nanoseconds(nanoseconds))
            } catch {
                throw MediaFileError(path: path, kind: .unsupported, reason: error.description)
            }
        }
        return .audio(
            samples: try interleavedPCM(),
            channels: Int(frame.pointee.ch_layout.nb_channels),
            sampleRate: Int(frame.pointee.sample_rate)
        )
    }

    /// Converts any of FFmpeg's common sample formats, packed or planar, to interleaved Int16.
    private func interleavedPCM() throws(MediaFileError) -> [Int16] {
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        let count = Int(frame.pointee.nb_samples)
        guard channels > 0, count >= 0 else { return [] }
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        let packed = av_get_packed_sample_fmt(format)
        var output = [Int16](repeating: 0, count: channels * count)
        func pointer(_ plane: Int) -> UnsafeMutablePointer<UInt8>? {
            if plane < 8 {
                return withUnsafeBytes(of: frame.pointee.data) {
                    $0.load(
                        fromByteOffset: plane * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                        as: UnsafeMutablePointer<UInt8>?.self
                    )
                }
            }
            return frame.pointee.extended_data?[plane]
        }
        for channel in 0..<channels {
            guard let base = pointer(planar ? channel : 0) else { continue }
            for index in 0..<count {
                let position = planar ? index : index * channels + channel
                let value: Double
                switch packed {
                case AV_SAMPLE_FMT_S16:
                    value = Double(UnsafeRawPointer(base).load(fromByteOffset: position * 2, as: Int16.self)) / 32_768
                case AV_SAMPLE_FMT_S32:
                    value =
                        Double(UnsafeRawPointer(base).load(fromByteOffset: position * 4, as: Int32.self))
                        / 2_147_483_648
                case AV_SAMPLE_FMT_FLT:
                    value = Double(UnsafeRawPointer(base).load(fromByteOffset: position * 4, as: Float.self))
                case AV_SAMPLE_FMT_DBL:
                    value = UnsafeRawPointer(base).load(fromByteOffset: position * 8, as: Double.self)
                case AV_SAMPLE_FMT_U8:
                    value = (Double(base[position]) - 128) / 128
                default:
                    let name = av_get_sample_fmt_name(format).map { String(cString: $0) } ?? "\(frame.pointee.format)"
                    throw MediaFileError(path: path, kind: .unsupported, reason: "sample format \(name)")
                }
                output[index * channels + channel] = Int16(max(-32_768, min(32_767, (value * 32_768).rounded())))
            }
        }
        return output
    }
}

/// Brings decoded PCM of any rate and channel count to 48 kHz mono or stereo in 20 ms blocks.
///
/// Resampling is linear interpolation: good enough for test material and re-encoding to Opus at
/// call bitrates, and it keeps Conclave free of a resampling library.
public struct AudioConverter: Sendable {
    /// Output channels (1 or 2).
    public let channels: Int
    private var inputRate = 0
    /// Fractional read position into `history`, in input samples.
    private var position = 0.0
    /// Input frames (already mapped to `channels`) not yet consumed.
    private var history: [[Int16]] = []
    private var output: [Int16] = []

    /// Creates a converter producing `channels` channels.
    public init(channels: Int) { self.channels = channels }

    /// Adds PCM and returns every complete 20 ms block (960 samples per channel) now available.
    public mutating func push(samples: [Int16], channels inputChannels: Int, sampleRate: Int) -> [[Int16]] {
        guard inputChannels > 0, sampleRate > 0 else { return [] }
        if inputRate != sampleRate {
            inputRate = sampleRate
            position = 0
            history.removeAll()
        }
        let frames = samples.count / inputChannels
        for index in 0..<frames {
            var mapped: [Int16] = []
            for channel in 0..<channels {
                if channel < inputChannels {
                    mapped.append(samples[index * inputChannels + channel])
                } else {
                    mapped.append(samples[index * inputChannels])
                }
            }
            if channels == 1 && inputChannels > 1 {
                var sum = 0
                for channel in 0..<inputChannels { sum += Int(samples[index * inputChannels + channel]) }
                mapped[0] = Int16(sum / inputChannels)
            }
            history.append(mapped)
        }
        let step = Double(inputRate) / 48_000
        while position + 1 < Double(history.count) {
            let base = Int(position)
            let fraction = position - Double(base)
            for channel in 0..<channels {
                let a = Double(history[base][channel])
                let b = Double(history[base + 1][channel])
                output.append(Int16((a + (b - a) * fraction).rounded()))
            }
            position += step
        }
        let consumed = min(Int(position), history.count)
        history.removeFirst(consumed)
        position -= Double(consumed)
        return takeBlocks()
    }

    /// Emits what is left (the last input sample included) as one block padded with silence; empty
    /// when nothing is left.
    public mutating func flush() -> [[Int16]] {
        if let last = history.last, Double(history.count) > position {
            output += last
        }
        history.removeAll()
        position = 0
        guard !output.isEmpty else { return [] }
        let blockSize = 960 * channels
        output += [Int16](repeating: 0, count: (blockSize - output.count % blockSize) % blockSize)
        return takeBlocks()
    }

    private mutating func takeBlocks() -> [[Int16]] {
        var blocks: [[Int16]] = []
        let blockSize = 960 * channels
        while output.count >= blockSize {
            blocks.append(Array(output.prefix(blockSize)))
            output.removeFirst(blockSize)
        }
        return blocks
    }
}
