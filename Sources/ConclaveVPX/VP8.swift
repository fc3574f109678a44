internal import CVPX
internal import CVPXShims
public import ConclaveCore

/// A libvpx failure, with the operation and libvpx's reason (including its detail string if any).
public struct VPXCodecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What we were doing.
    public var operation: String
    /// Why it failed.
    public var reason: String

    public init(_ operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    init(_ operation: String, code: vpx_codec_err_t, context: UnsafeMutablePointer<vpx_codec_ctx_t>?) {
        var reason = String(cString: vpx_codec_err_to_string(code))
        if let context, let detail = vpx_codec_error_detail(context) {
            reason += " (\(String(cString: detail)))"
        }
        self.init(operation, reason: reason)
    }

    public var description: String { "VP8 \(operation) failed: \(reason)" }
}

/// Settings for a real-time VP8 encoder.
public struct VP8EncoderConfiguration: Sendable, Hashable {
    /// Picture width (even).
    public var width: Int
    /// Picture height (even).
    public var height: Int
    /// Frames per second the source delivers; also sets the rate control's frame budget.
    public var frameRate: Int
    /// Target bitrate in bits per second.
    public var bitrate: Int
    /// libvpx `cpu-used` for real-time mode: negative values are "at most this slow", higher
    /// absolute values are faster. WebRTC uses -6 on desktops.
    public var speed: Int
    /// Encoder threads.
    public var threads: Int
    /// Frames between automatic keyframes; keyframes are otherwise only made on request.
    public var keyframeInterval: Int

    /// Creates a configuration.
    public init(
        width: Int = 640,
        height: Int = 480,
        frameRate: Int = 30,
        bitrate: Int = 1_000_000,
        speed: Int = -6,
        threads: Int = 1,
        keyframeInterval: Int = 3_000
    ) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.bitrate = bitrate
        self.speed = speed
        self.threads = threads
        self.keyframeInterval = keyframeInterval
    }
}

/// A real-time, error-resilient VP8 encoder (libvpx), as WebRTC configures it: constant bitrate, no
/// lookahead, keyframes on request, bitrate changes between frames.
///
/// Not thread-safe: one task owns an encoder.
public final class VP8Encoder: VideoEncoding {
    public var codec: MediaCodec { .vp8 }
    /// The settings in force.
    public private(set) var configuration: VP8EncoderConfiguration

    /// libvpx keeps pointers into the context and config, so both live at stable heap addresses.
    private let context = UnsafeMutablePointer<vpx_codec_ctx_t>.allocate(capacity: 1)
    private let settings = UnsafeMutablePointer<vpx_codec_enc_cfg_t>.allocate(capacity: 1)
    private let image = UnsafeMutablePointer<vpx_image_t>.allocate(capacity: 1)
    private var timestamps = TimestampUnwrapper()
    private var isOpen = false

    /// Creates an encoder; fails on an odd or out-of-range resolution or a rejected setting.
    public init(configuration: VP8EncoderConfiguration) throws(VPXCodecError) {
        do throws(RawMediaError) {
            try VideoFrame.validate(width: configuration.width, height: configuration.height)
        } catch {
            throw VPXCodecError("configure encoder", reason: error.description)
        }
        guard configuration.frameRate > 0, configuration.frameRate <= 240 else {
            throw VPXCodecError("configure encoder", reason: "frame rate \(configuration.frameRate) out of range")
        }
        guard configuration.bitrate >= 10_000 else {
            throw VPXCodecError("configure encoder", reason: "bitrate \(configuration.bitrate) below 10 kbit/s")
        }
        guard (-16...16).contains(configuration.speed) else {
            throw VPXCodecError("configure encoder", reason: "speed \(configuration.speed) outside -16...16")
        }
        self.configuration = configuration
        context.initialize(to: vpx_codec_ctx_t())
        settings.initialize(to: vpx_codec_enc_cfg_t())
        image.initialize(to: vpx_image_t())
        // From here on the object is fully initialized: a throw runs deinit, which releases
        // everything (and destroys the codec only once it was opened).
        var rc = vpx_codec_enc_config_default(vpx_codec_vp8_cx(), settings, 0)
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("default configuration", code: rc, context: nil) }
        settings.pointee.g_w = UInt32(configuration.width)
        settings.pointee.g_h = UInt32(configuration.height)
        settings.pointee.g_timebase = vpx_rational(num: 1, den: 90_000)
        settings.pointee.g_threads = UInt32(max(1, configuration.threads))
        settings.pointee.g_lag_in_frames = 0
        settings.pointee.g_error_resilient = vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT)
        settings.pointee.g_pass = VPX_RC_ONE_PASS
        settings.pointee.rc_end_usage = VPX_CBR
        settings.pointee.rc_target_bitrate = UInt32(configuration.bitrate / 1_000)
        settings.pointee.rc_min_quantizer = 2
        settings.pointee.rc_max_quantizer = 56
        settings.pointee.rc_undershoot_pct = 100
        settings.pointee.rc_overshoot_pct = 15
        settings.pointee.rc_buf_initial_sz = 500
        settings.pointee.rc_buf_optimal_sz = 600
        settings.pointee.rc_buf_sz = 1_000
        settings.pointee.rc_dropframe_thresh = 0
        settings.pointee.kf_mode = VPX_KF_AUTO
        settings.pointee.kf_min_dist = 0
        settings.pointee.kf_max_dist = UInt32(max(1, configuration.keyframeInterval))
        rc = cshim_vpx_codec_enc_init(context, vpx_codec_vp8_cx(), settings, 0)
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("initialize encoder", code: rc, context: context) }
        isOpen = true
        for (control, value) in [
            (Int32(VP8E_SET_CPUUSED.rawValue), Int32(configuration.speed)),
            (Int32(VP8E_SET_STATIC_THRESHOLD.rawValue), 1),
            (Int32(VP8E_SET_NOISE_SENSITIVITY.rawValue), 0),
            (Int32(VP8E_SET_TOKEN_PARTITIONS.rawValue), 0),
        ] {
            rc = cshim_vpx_codec_control_int(context, control, value)
            guard rc == VPX_CODEC_OK else { throw VPXCodecError("set control \(control)", code: rc, context: context) }
        }
    }

    deinit {
        if isOpen { vpx_codec_destroy(context) }
        context.deallocate()
        settings.deallocate()
        image.deallocate()
    }

    /// Changes the target bitrate from the next frame on, without a keyframe.
    public func setBitrate(_ bitsPerSecond: Int) throws(VPXCodecError) {
        guard bitsPerSecond >= 10_000 else {
            throw VPXCodecError("set bitrate", reason: "bitrate \(bitsPerSecond) below 10 kbit/s")
        }
        settings.pointee.rc_target_bitrate = UInt32(clamping: bitsPerSecond / 1_000)
        let rc = vpx_codec_enc_config_set(context, settings)
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("set bitrate", code: rc, context: context) }
        configuration.bitrate = bitsPerSecond
    }

    /// Encodes one picture (which must have the configured size).
    public func encode(_ frame: VideoFrame, forceKeyframe: Bool = false) throws(VPXCodecError) -> [EncodedFrame] {
        guard frame.width == configuration.width, frame.height == configuration.height else {
            throw VPXCodecError(
                "encode",
                reason:
                    "frame is \(frame.width)x\(frame.height), encoder \(configuration.width)x\(configuration.height)"
            )
        }
        let pts = timestamps.unwrap(frame.rtpTimestamp)
        let duration = UInt(90_000 / configuration.frameRate)
        let flags: vpx_enc_frame_flags_t = forceKeyframe ? vpx_enc_frame_flags_t(VPX_EFLAG_FORCE_KF) : 0
        let rc = frame.data.withUnsafeBufferPointer { pixels -> vpx_codec_err_t in
            // libvpx only reads the planes during this call, so wrapping the array's storage is safe.
            let base = UnsafeMutablePointer(mutating: pixels.baseAddress)
            guard
                vpx_img_wrap(image, VPX_IMG_FMT_I420, UInt32(frame.width), UInt32(frame.height), 1, base) != nil
            else { return VPX_CODEC_INVALID_PARAM }
            return vpx_codec_encode(context, image, pts, duration, flags, UInt(VPX_DL_REALTIME))
        }
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("encode", code: rc, context: context) }
        var frames: [EncodedFrame] = []
        var iterator: vpx_codec_iter_t? = nil
        while let packet = vpx_codec_get_cx_data(context, &iterator) {
            guard packet.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let compressed = packet.pointee.data.frame
            guard let buffer = compressed.buf, compressed.sz > 0 else { continue }
            let bytes = Array(UnsafeRawBufferPointer(start: buffer, count: compressed.sz))
            let isKey = compressed.flags & vpx_codec_frame_flags_t(VPX_FRAME_IS_KEY) != 0
            frames.append(EncodedFrame(codec: .vp8, data: bytes, rtpTimestamp: frame.rtpTimestamp, isKeyframe: isKey))
        }
        return frames
    }
}

/// A VP8 decoder (libvpx).
///
/// Not thread-safe: one task owns a decoder.
public final class VP8Decoder: VideoDecoding {
    public var codec: MediaCodec { .vp8 }
    private let context = UnsafeMutablePointer<vpx_codec_ctx_t>.allocate(capacity: 1)

    /// Creates a decoder.
    public init(threads: Int = 1) throws(VPXCodecError) {
        context.initialize(to: vpx_codec_ctx_t())
        var settings = vpx_codec_dec_cfg_t(threads: UInt32(max(1, threads)), w: 0, h: 0)
        let rc = cshim_vpx_codec_dec_init(context, vpx_codec_vp8_dx(), &settings, 0)
        // A throw here still runs deinit (the object is fully initialized), which frees the context.
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("initialize decoder", code: rc, context: nil) }
        isOpen = true
    }

    private var isOpen = false

    deinit {
        if isOpen { vpx_codec_destroy(context) }
        context.deallocate()
    }

    /// Decodes one frame; returns the picture it shows, if any.
    public func decode(_ frame: EncodedFrame) throws(VPXCodecError) -> VideoFrame? {
        guard !frame.data.isEmpty else { throw VPXCodecError("decode", reason: "empty frame") }
        let rc = vpx_codec_decode(context, frame.data, UInt32(frame.data.count), nil, 0)
        guard rc == VPX_CODEC_OK else { throw VPXCodecError("decode", code: rc, context: context) }
        var iterator: vpx_codec_iter_t? = nil
        var picture: VideoFrame?
        while let image = vpx_codec_get_frame(context, &iterator) {
            picture = try Self.copy(image, timestamp: frame.rtpTimestamp)
        }
        return picture
    }

    /// Copies a decoded image into a packed I420 frame, honouring libvpx's plane strides.
    private static func copy(_ image: UnsafeMutablePointer<vpx_image_t>, timestamp: UInt32) throws(VPXCodecError)
        -> VideoFrame
    {
        let width = Int(image.pointee.d_w)
        let height = Int(image.pointee.d_h)
        guard image.pointee.fmt == VPX_IMG_FMT_I420, width % 2 == 0, height % 2 == 0 else {
            throw VPXCodecError("decode", reason: "picture \(width)x\(height) is not even-sized I420")
        }
        var data = [UInt8](repeating: 0, count: VideoFrame.byteCount(width: width, height: height))
        let planes = (image.pointee.planes.0, image.pointee.planes.1, image.pointee.planes.2)
        let strides = (Int(image.pointee.stride.0), Int(image.pointee.stride.1), Int(image.pointee.stride.2))
        data.withUnsafeMutableBufferPointer { out in
            guard let base = out.baseAddress else { return }
            copyPlane(from: planes.0, stride: strides.0, to: base, width: width, height: height)
            copyPlane(
                from: planes.1,
                stride: strides.1,
                to: base + width * height,
                width: width / 2,
                height: height / 2
            )
            copyPlane(
                from: planes.2,
                stride: strides.2,
                to: base + width * height + (width / 2) * (height / 2),
                width: width / 2,
                height: height / 2
            )
        }
        do throws(RawMediaError) {
            return try VideoFrame(width: width, height: height, data: data, rtpTimestamp: timestamp)
        } catch {
            throw VPXCodecError("decode", reason: error.description)
        }
    }
}

/// Copies `height` rows of `width` bytes from a strided plane into a packed one.
func copyPlane(
    from source: UnsafeMutablePointer<UInt8>?,
    stride: Int,
    to destination: UnsafeMutablePointer<UInt8>,
    width: Int,
    height: Int
) {
    guard let source else { return }
    for row in 0..<height {
        (destination + row * width).update(from: source + row * stride, count: width)
    }
}

/// Extends 32-bit RTP timestamps into a monotonic 64-bit count, so encoders see increasing time even
/// when the RTP clock wraps.
struct TimestampUnwrapper {
    private var last: UInt32?
    private var extended: Int64 = 0

    mutating func unwrap(_ timestamp: UInt32) -> Int64 {
        guard let last else {
            self.last = timestamp
            extended = 0
            return 0
        }
        extended += Int64(Int32(bitPattern: timestamp &- last))
        self.last = timestamp
        return extended
    }
}
