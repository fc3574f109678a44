internal import CFFmpegDevice
internal import CFFmpegDeviceShims
import ConclaveCore
import Foundation
import Logging
import Synchronization

/// What a capture opens: a libavdevice input format, its URL and options.
struct CaptureInput: Sendable {
    /// `camera` or `screen`: names the thread and the log lines.
    var role: String
    /// libavdevice's input format (`v4l2`, `x11grab`).
    var format: String
    /// The device path or display.
    var url: String
    /// Input options (`video_size`, `framerate`, `input_format`, ...), in order.
    var options: [(String, String)]
    /// The size pictures are sent at.
    var outputSize: CaptureOutputSize
    /// Turns libavformat's open failure into the user's error line.
    var openError: @Sendable (Int32) -> CaptureError
}

/// One running capture: a thread of its own (`conclave-capture-<role>`, `capture-<role>` for the
/// kernel) that opens the input,
/// reads packets, decodes them with libavcodec, converts them to I420 at the output size with
/// libswscale, and posts each picture to the mailbox, replacing the previous one.
///
/// libavdevice's reads block (V4L2 waits for the camera's next buffer, x11grab sleeps until its
/// next frame is due), which is why the capture has its own thread and never runs on the shared
/// pool. ``stop()`` does not wait: the thread sees it after its current read and closes the device
/// itself, so a camera that has stopped delivering keeps its thread until the process ends.
final class DeviceCapture: Sendable {
    /// The newest picture.
    let mailbox = PictureMailbox()
    /// The size pictures come out at.
    let size: VideoSize
    private let stopping = Atomic<Bool>(false)

    private init(size: VideoSize) { self.size = size }

    /// Starts the thread and returns once the device is open (or throws why it is not), without
    /// blocking the caller's thread.
    static func start(_ input: CaptureInput, logger: Logger) async throws(CaptureError) -> DeviceCapture {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<DeviceCapture, CaptureError>, Never>) in
            let thread = Thread {
                // The kernel keeps 15 bytes of a thread's name (what `top -H` and /proc show), too
                // few for Foundation's "conclave-capture-<role>", which it then does not set.
                _ = cshim_name_current_thread("capture-\(input.role)")
                let opened: OpenedInput
                do throws(CaptureError) {
                    opened = try OpenedInput(input)
                } catch {
                    continuation.resume(returning: .failure(error))
                    return
                }
                let capture = DeviceCapture(size: opened.outputSize)
                continuation.resume(returning: .success(capture))
                capture.run(opened, input: input, logger: logger)
            }
            thread.name = "conclave-capture-\(input.role)"
            thread.start()
        }
        return try result.get()
    }

    /// Asks the thread to close the device after its current read.
    func stop() { stopping.store(true, ordering: .relaxed) }

    private func run(_ opened: OpenedInput, input: CaptureInput, logger: Logger) {
        while !stopping.load(ordering: .relaxed) {
            do throws(CaptureError) {
                if let picture = try opened.nextPicture() { mailbox.post(picture) }
            } catch {
                guard !stopping.load(ordering: .relaxed) else { return }
                // The one line for a device lost mid-call; the source keeps sending its last picture.
                logger.warning("\(error.message); sending its last picture until the call ends")
                mailbox.end(error)
                return
            }
        }
    }
}

/// The open input, decoder and converter of one capture; confined to its capture thread.
final class OpenedInput {
    /// The size the device delivers.
    let inputSize: VideoSize
    /// The size pictures are converted to.
    let outputSize: VideoSize
    private let device: String
    private let role: String
    private var format: UnsafeMutablePointer<AVFormatContext>?
    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var scaler: OpaquePointer?
    private let streamIndex: Int32

    /// libavdevice's inputs are registered once per process; FFmpeg's log is silenced because
    /// every failure reaches the caller as a `CaptureError`.
    private static let registered: Void = {
        av_log_set_level(AV_LOG_QUIET)
        avdevice_register_all()
    }()

    /// Opens `input` and its decoder.
    init(_ input: CaptureInput) throws(CaptureError) {
        _ = Self.registered
        device = input.url
        role = input.role
        guard let inputFormat = av_find_input_format(input.format) else {
            throw CaptureError(.unsupported, device: input.url, "this libavdevice has no \(input.format) input")
        }
        var options: OpaquePointer?
        for (key, value) in input.options { av_dict_set(&options, key, value, 0) }
        var context: UnsafeMutablePointer<AVFormatContext>?
        let rc = avformat_open_input(&context, input.url, inputFormat, &options)
        av_dict_free(&options)
        guard rc >= 0, let context else { throw input.openError(rc) }
        format = context
        guard
            let index = (0..<Int(context.pointee.nb_streams)).first(where: { index in
                context.pointee.streams[index]?.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
            }), let stream = context.pointee.streams[index], let parameters = stream.pointee.codecpar
        else {
            avformat_close_input(&format)
            throw CaptureError(.unsupported, device: input.url, "\(input.url) gave no video stream")
        }
        streamIndex = Int32(index)
        guard let decoder = avcodec_find_decoder(parameters.pointee.codec_id) else {
            avformat_close_input(&format)
            throw CaptureError(.unsupported, device: input.url, "no decoder for what \(input.url) delivers")
        }
        codec = avcodec_alloc_context3(decoder)
        frame = av_frame_alloc()
        packet = av_packet_alloc()
        var opened: Int32 = -1
        if let codec, frame != nil, packet != nil, avcodec_parameters_to_context(codec, parameters) >= 0 {
            codec.pointee.thread_count = 1
            opened = avcodec_open2(codec, decoder, nil)
        }
        inputSize = VideoSize(width: Int(parameters.pointee.width), height: Int(parameters.pointee.height))
        outputSize = input.outputSize.resolve(width: inputSize.width, height: inputSize.height)
        guard opened >= 0 else {
            release()
            throw CaptureError(.unsupported, device: input.url, "cannot decode what \(input.url) delivers")
        }
    }

    deinit { release() }

    private func release() {
        sws_freeContext(scaler)
        scaler = nil
        av_packet_free(&packet)
        av_frame_free(&frame)
        avcodec_free_context(&codec)
        avformat_close_input(&format)
    }

    /// Reads one packet and returns the newest picture it decoded to, if any. A packet that does
    /// not decode (a camera's damaged JPEG) is skipped; a failed read ends the capture.
    func nextPicture() throws(CaptureError) -> VideoFrame? {
        guard let format, let codec, let frame, let packet else { return nil }
        let rc = av_read_frame(format, packet)
        if rc == cshim_device_AVERROR_EAGAIN() { return nil }
        guard rc >= 0 else {
            let reason = rc == cshim_device_AVERROR_EOF() ? "the input ended" : errorText(rc)
            throw CaptureError(.deviceLost, device: device, "\(role) \(device) stopped delivering: \(reason)")
        }
        defer { av_packet_unref(packet) }
        guard packet.pointee.stream_index == streamIndex, avcodec_send_packet(codec, packet) >= 0 else { return nil }
        var picture: VideoFrame?
        while avcodec_receive_frame(codec, frame) >= 0 {
            picture = convert(frame) ?? picture
            av_frame_unref(frame)
        }
        return picture
    }

    /// Converts a decoded picture of any format and size to I420 at the output size.
    private func convert(_ frame: UnsafeMutablePointer<AVFrame>) -> VideoFrame? {
        let width = Int(frame.pointee.width)
        let height = Int(frame.pointee.height)
        guard width > 0, height > 0 else { return nil }
        let outWidth = outputSize.width
        let outHeight = outputSize.height
        // Cached: the same converter is reused for as long as the input's format and size hold.
        scaler = sws_getCachedContext(
            scaler,
            Int32(width),
            Int32(height),
            AVPixelFormat(rawValue: frame.pointee.format),
            Int32(outWidth),
            Int32(outHeight),
            AVPixelFormat(rawValue: cshim_device_AV_PIX_FMT_YUV420P()),
            SWS_BILINEAR,
            nil,
            nil,
            nil
        )
        guard let scaler else { return nil }
        let lumaCount = outWidth * outHeight
        let chromaCount = (outWidth / 2) * (outHeight / 2)
        let count = VideoFrame.byteCount(width: outWidth, height: outHeight)
        var sources = frame.pointee.data
        var sourceStrides = frame.pointee.linesize
        var scaled: Int32 = 0
        // libswscale writes every byte of the three planes, so the buffer is not cleared first.
        let data = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            var planes:
                (
                    UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?,
                    UnsafeMutablePointer<UInt8>?
                ) =
                    (base, base + lumaCount, base + lumaCount + chromaCount, nil)
            var strides: (Int32, Int32, Int32, Int32) = (Int32(outWidth), Int32(outWidth / 2), Int32(outWidth / 2), 0)
            withUnsafeMutablePointer(to: &sources) { sources in
                sources.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { sources in
                    withUnsafeMutablePointer(to: &sourceStrides) { sourceStrides in
                        sourceStrides.withMemoryRebound(to: Int32.self, capacity: 8) { sourceStrides in
                            withUnsafeMutablePointer(to: &planes) { planes in
                                planes.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 4) { planes in
                                    withUnsafeMutablePointer(to: &strides) { strides in
                                        strides.withMemoryRebound(to: Int32.self, capacity: 4) { strides in
                                            scaled = sws_scale(
                                                scaler,
                                                sources,
                                                sourceStrides,
                                                0,
                                                Int32(height),
                                                planes,
                                                strides
                                            )
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if scaled <= 0 { base.initialize(repeating: 0, count: count) }
            initialized = count
        }
        guard scaled > 0 else { return nil }
        return try? VideoFrame(width: outWidth, height: outHeight, data: data, rtpTimestamp: 0)
    }
}

/// FFmpeg's text for an error code (`av_strerror`).
func errorText(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    _ = av_strerror(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
