internal import CFFmpeg
internal import CFFmpegShims
public import ConclaveCore

/// Writes encoded frames (Opus, VP8, H264) into a container file without transcoding.
///
/// The writer decides no timing and no gating: the caller hands it packets already placed on the
/// file's timeline (a pts and dts in ticks of the track codec's clock, which is the time base it
/// declares for each stream) and writes them as given. Deciding where a frame belongs (unwrapping
/// RTP timestamps, what to do with a sender's jumps or repeats, which frames a decoder could use)
/// is the caller's, so that it is decided once; the recorder's `SegmentMuxer` does it. The writer
/// only refuses, with `MediaFileError.Kind.malformed` and without writing anything, what the
/// container could not hold: a timestamp that does not advance, an Opus packet a reader would
/// drop, a frame too large for libavcodec.
///
/// The file header is written once every H264 track has seen a keyframe carrying SPS and PPS (the
/// container needs them as codec private data); frames of other tracks that arrive earlier are
/// held back, and an H264 frame before them is refused.
///
/// Write failures (disk full, I/O errors) throw `MediaFileError.Kind.writeFailed` naming the file
/// and FFmpeg's reason. `close()` writes the trailer (cues, durations, final Ogg page) and reports
/// any failure; a writer dropped without `close()` writes the trailer best-effort, silently.
/// Not thread-safe: one task owns a writer.
public final class MediaFileWriter {
    /// The container formats the writer produces.
    public enum Container: String, Sendable, CaseIterable {
        /// WebM: VP8 and Opus.
        case webm
        /// Matroska: Opus, VP8 and H264.
        case matroska
        /// Ogg: Opus only.
        case ogg
        /// IVF: one VP8 track only.
        case ivf

        /// The container for a file name extension (`.webm`, `.mkv`, `.ogg`/`.opus`, `.ivf`).
        public init?(pathExtension: String) {
            switch pathExtension.lowercased() {
            case "webm": self = .webm
            case "mkv", "mka": self = .matroska
            case "ogg", "opus", "oga": self = .ogg
            case "ivf": self = .ivf
            default: return nil
            }
        }

        var muxerName: String { self == .ogg ? "ogg" : rawValue }

        func accepts(_ codec: MediaCodec) -> Bool {
            switch self {
            case .webm: codec != .h264
            case .matroska: true
            case .ogg: codec == .opus
            case .ivf: codec == .vp8
            }
        }
    }

    /// One track of the file.
    public struct Track: Sendable, Hashable {
        /// The codec of the frames written to this track.
        public var codec: MediaCodec
        /// Picture size (video); written into the container header.
        public var width: Int
        /// Picture size (video).
        public var height: Int
        /// Nominal frame rate (video), used for frame durations.
        public var frameRate: Int
        /// Channels (audio).
        public var channels: Int
        /// Opus pre-skip in 48 kHz samples (the encoder's lookahead; 312 for libopus at 48 kHz).
        public var opusPreSkip: Int

        /// A video track.
        public static func video(
            _ codec: MediaCodec,
            width: Int,
            height: Int,
            frameRate: Int = 30
        ) -> Track {
            Track(
                codec: codec,
                width: width,
                height: height,
                frameRate: frameRate,
                channels: 0,
                opusPreSkip: 0
            )
        }

        /// An Opus track.
        public static func opus(channels: Int, preSkip: Int = 312) -> Track {
            Track(
                codec: .opus,
                width: 0,
                height: 0,
                frameRate: 50,
                channels: channels,
                opusPreSkip: preSkip
            )
        }
    }

    private struct TrackState {
        var track: Track
        var stream: UnsafeMutablePointer<AVStream>
        /// The last written packet's dts, which the next one must pass.
        var lastDTS: Int64?
        var parameterSets: [UInt8]?
    }

    private struct HeldPacket {
        var frame: EncodedFrame
        var track: Int
        var pts: Int64
        var dts: Int64
    }

    private enum State {
        case waitingForParameterSets
        case writing
        case closed
    }

    /// The output path.
    public let path: String
    /// The container being written.
    public let container: Container
    private let context: UnsafeMutablePointer<AVFormatContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var tracks: [TrackState] = []
    private var state = State.waitingForParameterSets
    private var held: [HeldPacket] = []
    private let muxerOptions: [String: String]
    /// How many frames may wait for the header before the writer gives up.
    static let holdLimit = 2_000

    /// Creates the file and checks the tracks against the container.
    ///
    /// - Parameters:
    ///   - container: the format; nil picks it from the path's extension.
    ///   - muxerOptions: libavformat muxer options (for example Matroska's `cluster_time_limit`,
    ///     in milliseconds), applied when the header is written; an option the muxer does not
    ///     know is an error.
    public init(
        path: String,
        container: Container? = nil,
        tracks: [Track],
        muxerOptions: [String: String] = [:]
    ) throws(MediaFileError) {
        FFmpegLogging.silenced
        self.path = path
        self.muxerOptions = muxerOptions
        let fileExtension = path.split(separator: ".").last.map(String.init) ?? ""
        guard let container = container ?? Container(pathExtension: fileExtension) else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason:
                    "cannot tell the container from the extension \".\(fileExtension)\" (use .webm, .mkv, .ogg or .ivf)"
            )
        }
        self.container = container
        guard !tracks.isEmpty else {
            throw MediaFileError(path: path, kind: .unsupported, reason: "no tracks to write")
        }
        for track in tracks where !container.accepts(track.codec) {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "\(container.rawValue) cannot hold \(track.codec)"
            )
        }
        if container == .ivf || container == .ogg, tracks.count > 1 {
            throw MediaFileError(path: path, kind: .unsupported, reason: "\(container.rawValue) holds a single track")
        }
        for track in tracks {
            if track.codec.kind == .video {
                do throws(RawMediaError) { try VideoFrame.validate(width: track.width, height: track.height) } catch {
                    throw MediaFileError(path: path, kind: .unsupported, reason: error.description)
                }
            } else if track.channels != 1 && track.channels != 2 {
                throw MediaFileError(
                    path: path,
                    kind: .unsupported,
                    reason: "\(track.channels) audio channels; only 1 or 2"
                )
            }
        }

        var created: UnsafeMutablePointer<AVFormatContext>?
        var rc = avformat_alloc_output_context2(&created, nil, container.muxerName, path)
        guard rc >= 0, let created else {
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "no \(container.rawValue) muxer: \(averrorText(rc))"
            )
        }
        guard let packet = av_packet_alloc() else {
            avformat_free_context(created)
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        context = created
        self.packet = packet
        for track in tracks {
            guard let stream = avformat_new_stream(created, nil), let parameters = stream.pointee.codecpar else {
                throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
            }
            parameters.pointee.codec_id = avCodecID(for: track.codec)
            stream.pointee.time_base = AVRational(num: 1, den: Int32(track.codec.clockRate))
            if track.codec.kind == .video {
                parameters.pointee.codec_type = AVMEDIA_TYPE_VIDEO
                parameters.pointee.width = Int32(track.width)
                parameters.pointee.height = Int32(track.height)
                parameters.pointee.format = AV_PIX_FMT_YUV420P.rawValue
                stream.pointee.avg_frame_rate = AVRational(num: Int32(max(1, track.frameRate)), den: 1)
            } else {
                parameters.pointee.codec_type = AVMEDIA_TYPE_AUDIO
                parameters.pointee.sample_rate = 48_000
                av_channel_layout_default(&parameters.pointee.ch_layout, Int32(track.channels))
                parameters.pointee.initial_padding = Int32(clamping: track.opusPreSkip)
                try Self.setExtradata(Self.opusHead(track), on: parameters, path: path)
            }
            self.tracks.append(TrackState(track: track, stream: stream))
        }
        if created.pointee.oformat.pointee.flags & AVFMT_NOFILE == 0 {
            rc = avio_open(&created.pointee.pb, path, AVIO_FLAG_WRITE)
            guard rc >= 0 else {
                throw MediaFileError(
                    path: path,
                    kind: .writeFailed,
                    reason: "cannot create the file: \(averrorText(rc))"
                )
            }
        }
        if !self.tracks.contains(where: { $0.track.codec == .h264 }) { try writeHeader() }
    }

    deinit {
        // A writer dropped without close() still finishes its file as well as it can; errors have
        // nowhere to go here, which is why close() exists.
        if state == .writing { _ = av_write_trailer(context) }
        if state != .closed, context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        avformat_free_context(context)
    }

    /// The Ogg/Matroska Opus identification header (RFC 7845 section 5.1).
    static func opusHead(_ track: Track) -> [UInt8] {
        let preSkip = UInt16(clamping: track.opusPreSkip)
        return Array("OpusHead".utf8) + [1, UInt8(track.channels), UInt8(preSkip & 0xFF), UInt8(preSkip >> 8)]
            + [0x80, 0xBB, 0x00, 0x00] + [0, 0, 0]
    }

    private static func setExtradata(
        _ bytes: [UInt8],
        on parameters: UnsafeMutablePointer<AVCodecParameters>,
        path: String
    ) throws(MediaFileError) {
        av_freep(&parameters.pointee.extradata)
        guard let buffer = av_mallocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        let typed = buffer.assumingMemoryBound(to: UInt8.self)
        bytes.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress else { return }
            typed.update(from: base, count: bytes.count)
        }
        parameters.pointee.extradata = typed
        parameters.pointee.extradata_size = Int32(bytes.count)
    }

    private func writeHeader() throws(MediaFileError) {
        for index in tracks.indices where tracks[index].track.codec == .h264 {
            guard let sets = tracks[index].parameterSets, let parameters = tracks[index].stream.pointee.codecpar else {
                continue
            }
            try Self.setExtradata(sets, on: parameters, path: path)
        }
        var options: OpaquePointer?
        for (key, value) in muxerOptions { av_dict_set(&options, key, value, 0) }
        let rc = avformat_write_header(context, &options)
        let unknown = av_dict_count(options)
        av_dict_free(&options)
        guard rc >= 0 else {
            state = .closed
            throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot write the header: \(averrorText(rc))")
        }
        state = .writing
        guard unknown == 0 else {
            try? close()
            throw MediaFileError(
                path: path,
                kind: .unsupported,
                reason: "the \(container.rawValue) muxer does not take the options \(muxerOptions.keys.sorted())"
            )
        }
    }

    /// Writes one frame to track `track` (an index into the `tracks` given to `init`) at `pts`
    /// and `dts` (`pts` when nil), in ticks of the track codec's clock.
    ///
    /// The frame's RTP timestamp is not looked at. Throws `.malformed`, writing nothing, when the
    /// dts does not pass the track's previous one or the pts is before the dts (libavformat would
    /// refuse both), for an H264 frame before the track's first SPS and PPS, and for a frame the
    /// container cannot hold; other errors are write failures.
    public func write(_ frame: EncodedFrame, track index: Int, pts: Int64, dts: Int64? = nil) throws(MediaFileError) {
        guard index >= 0, index < tracks.count else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "no track \(index)")
        }
        guard frame.codec == tracks[index].track.codec else {
            throw MediaFileError(
                path: path,
                kind: .writeFailed,
                reason: "\(frame.codec) frame for a \(tracks[index].track.codec) track"
            )
        }
        let dts = dts ?? pts
        // Checked before a frame is held, so every held frame can be written.
        try validate(frame, track: index, pts: pts, dts: dts)
        switch state {
        case .closed:
            throw MediaFileError(path: path, kind: .writeFailed, reason: "the writer is closed")
        case .waitingForParameterSets:
            if frame.codec == .h264, tracks[index].parameterSets == nil {
                guard frame.isKeyframe, let sets = H264AnnexB.parameterSets(in: frame.data) else {
                    throw MediaFileError(
                        path: path,
                        kind: .malformed,
                        reason: "track \(index) H264 frame before the first keyframe with SPS and PPS"
                    )
                }
                tracks[index].parameterSets = sets
            }
            tracks[index].lastDTS = dts
            held.append(HeldPacket(frame: frame, track: index, pts: pts, dts: dts))
            guard held.count <= Self.holdLimit else {
                throw MediaFileError(
                    path: path,
                    kind: .writeFailed,
                    reason: "no H264 keyframe with SPS/PPS in the first \(Self.holdLimit) frames"
                )
            }
            guard !tracks.contains(where: { $0.track.codec == .h264 && $0.parameterSets == nil }) else { return }
            try writeHeader()
            let pending = held
            held.removeAll()
            for packet in pending { try mux(packet.frame, track: packet.track, pts: packet.pts, dts: packet.dts) }
        case .writing:
            tracks[index].lastDTS = dts
            try mux(frame, track: index, pts: pts, dts: dts)
        }
    }

    /// Refuses what a reader or libavformat would not take.
    private func validate(_ frame: EncodedFrame, track index: Int, pts: Int64, dts: Int64) throws(MediaFileError) {
        // A reader drops an Opus packet whose stated frame lengths do not fit it, so the file
        // would not hold what was written; such a packet decodes to nothing anyway.
        if frame.codec == .opus, !OpusPacketTiming.isWellFormed(frame.data) {
            throw MediaFileError(path: path, kind: .malformed, reason: "track \(index) Opus packet is malformed")
        }
        // The packet size goes to libavcodec as an Int32 (with its padding).
        guard frame.data.count <= Int(Int32.max) - Int(AV_INPUT_BUFFER_PADDING_SIZE) else {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "track \(index) frame of \(frame.data.count) bytes is too large"
            )
        }
        if let last = tracks[index].lastDTS, dts <= last {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "track \(index) timestamp \(dts) does not advance past \(last) (out of order or duplicate)"
            )
        }
        guard pts >= dts else {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "track \(index) presentation time \(pts) is before its decoding time \(dts)"
            )
        }
    }

    private func mux(_ frame: EncodedFrame, track index: Int, pts: Int64, dts: Int64) throws(MediaFileError) {
        let state = tracks[index]
        let clockRate = Int64(state.track.codec.clockRate)
        let duration: Int64
        if frame.codec == .opus {
            duration = Int64(OpusPacketTiming.sampleCount(of: frame.data) ?? 960)
        } else {
            duration = 90_000 / Int64(max(1, state.track.frameRate))
        }
        guard av_new_packet(packet, Int32(frame.data.count)) >= 0, let destination = packet.pointee.data else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "out of memory")
        }
        frame.data.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress else { return }
            destination.update(from: base, count: source.count)
        }
        let source = AVRational(num: 1, den: Int32(clockRate))
        let target = state.stream.pointee.time_base
        packet.pointee.stream_index = state.stream.pointee.index
        packet.pointee.pts = av_rescale_q(pts, source, target)
        packet.pointee.dts = av_rescale_q(dts, source, target)
        packet.pointee.duration = av_rescale_q(duration, source, target)
        if frame.isKeyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
        // av_interleaved_write_frame takes the packet's data and leaves the packet blank.
        let rc = av_interleaved_write_frame(context, packet)
        av_packet_unref(packet)
        guard rc >= 0 else {
            throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(rc))
        }
        if let io = context.pointee.pb, io.pointee.error < 0 {
            throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(io.pointee.error))
        }
    }

    /// Pushes buffered bytes to the file now (a recorder calls this periodically so a crash loses
    /// little), surfacing any pending write error.
    public func flush() throws(MediaFileError) {
        guard state == .writing, let io = context.pointee.pb else { return }
        avio_flush(io)
        if io.pointee.error < 0 {
            throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(io.pointee.error))
        }
    }

    /// Writes the trailer and closes the file. Calling it twice is harmless.
    ///
    /// If the header was never written (an H264 track never got a keyframe), the held frames are
    /// discarded and the error says so.
    public func close() throws(MediaFileError) {
        switch state {
        case .closed:
            return
        case .waitingForParameterSets:
            state = .closed
            if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
            throw MediaFileError(
                path: path,
                kind: .writeFailed,
                reason: "no H264 keyframe with SPS/PPS arrived; the file has no content"
            )
        case .writing:
            state = .closed
            let trailer = av_write_trailer(context)
            var ioError: Int32 = 0
            if let io = context.pointee.pb {
                avio_flush(io)
                ioError = io.pointee.error
            }
            let closed = context.pointee.pb != nil ? avio_closep(&context.pointee.pb) : 0
            if trailer < 0 {
                throw MediaFileError(
                    path: path,
                    kind: .writeFailed,
                    reason: "cannot write the trailer: \(averrorText(trailer))"
                )
            }
            if ioError < 0 { throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(ioError)) }
            if closed < 0 { throw MediaFileError(path: path, kind: .writeFailed, reason: averrorText(closed)) }
        }
    }
}
