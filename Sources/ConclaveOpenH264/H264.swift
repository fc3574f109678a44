internal import COpenH264
internal import COpenH264Shims
public import ConclaveCore

/// An openh264 failure, with the operation and the library's return code.
public struct H264CodecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What we were doing.
    public var operation: String
    /// Why it failed.
    public var reason: String

    public init(_ operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "H264 \(operation) failed: \(reason)" }
}

/// Settings for the real-time H264 encoder.
public struct H264EncoderConfiguration: Sendable, Hashable {
    /// Picture width (even).
    public var width: Int
    /// Picture height (even).
    public var height: Int
    /// Frames per second (openh264 supports 1...30 for rate control; higher rates are clamped).
    public var frameRate: Int
    /// Target bitrate in bits per second.
    public var bitrate: Int
    /// Encoder threads (1 disables openh264's threading).
    public var threads: Int
    /// Frames between automatic IDRs; 0 makes IDRs only on request (and at the start).
    public var keyframeInterval: Int

    /// Creates a configuration.
    public init(
        width: Int = 640,
        height: Int = 480,
        frameRate: Int = 30,
        bitrate: Int = 1_000_000,
        threads: Int = 1,
        keyframeInterval: Int = 0
    ) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.bitrate = bitrate
        self.threads = threads
        self.keyframeInterval = keyframeInterval
    }
}

/// A constrained-baseline H264 encoder (openh264) whose output ECall iOS receivers can handle.
///
/// The settings that matter for interop (see the ECall interop notes, section 1.2):
/// - exactly one slice per picture, because the receiver's frame decryption only handles one slice
///   NAL unit per frame;
/// - slice_type written as 0 (P) or 2 (I), never the "+5" form, and `pic_parameter_set_id` 0, so
///   first_mb_in_slice, slice_type and pps_id fit in the one slice-header byte left in clear;
/// - constant SPS/PPS ids, repeated before every IDR, so a receiver can join at any keyframe;
/// - no frame skipping, so every input picture yields exactly one access unit;
/// - Annex-B output with 4-byte start codes.
///
/// Not thread-safe: one task owns an encoder.
public final class H264Encoder: VideoEncoding {
    public var codec: MediaCodec { .h264 }
    /// The settings in force.
    public private(set) var configuration: H264EncoderConfiguration
    private let encoder: UnsafeMutablePointer<ISVCEncoder?>
    private var timestamps = MillisecondClock()

    /// Creates an encoder; fails on an odd or out-of-range resolution or a rejected setting.
    public init(configuration: H264EncoderConfiguration) throws(H264CodecError) {
        do throws(RawMediaError) {
            try VideoFrame.validate(width: configuration.width, height: configuration.height)
        } catch {
            throw H264CodecError("configure encoder", reason: error.description)
        }
        guard configuration.frameRate > 0, configuration.frameRate <= 240 else {
            throw H264CodecError("configure encoder", reason: "frame rate \(configuration.frameRate) out of range")
        }
        guard configuration.bitrate >= 10_000 else {
            throw H264CodecError("configure encoder", reason: "bitrate \(configuration.bitrate) below 10 kbit/s")
        }
        var created: UnsafeMutablePointer<ISVCEncoder?>?
        guard WelsCreateSVCEncoder(&created) == 0, let created else {
            throw H264CodecError("create encoder", reason: "WelsCreateSVCEncoder returned no encoder")
        }
        self.encoder = created
        self.configuration = configuration

        var params = SEncParamExt()
        _ = cshim_openh264_encoder_get_default_params(created, &params)
        params.iUsageType = CAMERA_VIDEO_REAL_TIME
        params.iPicWidth = Int32(configuration.width)
        params.iPicHeight = Int32(configuration.height)
        params.iTargetBitrate = Int32(clamping: configuration.bitrate)
        params.iMaxBitrate = Int32(clamping: configuration.bitrate * 3 / 2)
        params.iRCMode = RC_BITRATE_MODE
        params.fMaxFrameRate = Float(configuration.frameRate)
        params.iTemporalLayerNum = 1
        params.iSpatialLayerNum = 1
        params.uiIntraPeriod = UInt32(max(0, configuration.keyframeInterval))
        params.iNumRefFrame = 1
        params.eSpsPpsIdStrategy = CONSTANT_ID
        params.bPrefixNalAddingCtrl = false
        params.bEnableSSEI = false
        params.bSimulcastAVC = false
        params.iPaddingFlag = 0
        params.iEntropyCodingModeFlag = 0
        params.bEnableFrameSkip = false
        params.bEnableLongTermReference = false
        params.iMultipleThreadIdc = UInt16(clamping: max(1, configuration.threads))
        params.bEnableDenoise = false
        params.bEnableBackgroundDetection = true
        params.bEnableAdaptiveQuant = true
        params.bEnableFrameCroppingFlag = true
        params.bEnableSceneChangeDetect = false
        params.sSpatialLayers.0.iVideoWidth = Int32(configuration.width)
        params.sSpatialLayers.0.iVideoHeight = Int32(configuration.height)
        params.sSpatialLayers.0.fFrameRate = Float(configuration.frameRate)
        params.sSpatialLayers.0.iSpatialBitrate = Int32(clamping: configuration.bitrate)
        params.sSpatialLayers.0.iMaxSpatialBitrate = Int32(clamping: configuration.bitrate * 3 / 2)
        params.sSpatialLayers.0.uiProfileIdc = PRO_BASELINE
        params.sSpatialLayers.0.uiLevelIdc = LEVEL_UNKNOWN
        params.sSpatialLayers.0.sSliceArgument.uiSliceMode = SM_SINGLE_SLICE
        params.sSpatialLayers.0.sSliceArgument.uiSliceNum = 1

        var quiet = Int32(WELS_LOG_QUIET)
        _ = cshim_openh264_encoder_set_option(created, ENCODER_OPTION_TRACE_LEVEL, &quiet)
        let rc = cshim_openh264_encoder_initialize_ext(created, &params)
        // A throw here runs deinit (the object is fully initialized), which destroys the encoder.
        guard rc == 0 else {
            throw H264CodecError("initialize encoder", reason: "openh264 rejected the parameters (code \(rc))")
        }
        var format = Int32(videoFormatI420.rawValue)
        _ = cshim_openh264_encoder_set_option(created, ENCODER_OPTION_DATAFORMAT, &format)
    }

    deinit {
        _ = cshim_openh264_encoder_uninitialize(encoder)
        WelsDestroySVCEncoder(encoder)
    }

    /// Changes the target bitrate from the next frame on.
    public func setBitrate(_ bitsPerSecond: Int) throws(H264CodecError) {
        guard bitsPerSecond >= 10_000 else {
            throw H264CodecError("set bitrate", reason: "bitrate \(bitsPerSecond) below 10 kbit/s")
        }
        var maximum = SBitrateInfo(iLayer: SPATIAL_LAYER_ALL, iBitrate: Int32(clamping: bitsPerSecond * 3 / 2))
        var target = SBitrateInfo(iLayer: SPATIAL_LAYER_ALL, iBitrate: Int32(clamping: bitsPerSecond))
        // Raise the ceiling first when going up, so the target never exceeds the maximum.
        if bitsPerSecond > configuration.bitrate {
            _ = cshim_openh264_encoder_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &maximum)
        }
        let rc = cshim_openh264_encoder_set_option(encoder, ENCODER_OPTION_BITRATE, &target)
        guard rc == 0 else { throw H264CodecError("set bitrate", reason: "openh264 code \(rc)") }
        if bitsPerSecond <= configuration.bitrate {
            _ = cshim_openh264_encoder_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &maximum)
        }
        configuration.bitrate = bitsPerSecond
    }

    /// Encodes one picture into one Annex-B access unit (SPS and PPS first when it is an IDR).
    /// `forceKeyframe` makes this very picture an IDR.
    public func encode(_ frame: VideoFrame, forceKeyframe: Bool = false) throws(H264CodecError) -> [EncodedFrame] {
        guard frame.width == configuration.width, frame.height == configuration.height else {
            throw H264CodecError(
                "encode",
                reason:
                    "frame is \(frame.width)x\(frame.height), encoder \(configuration.width)x\(configuration.height)"
            )
        }
        if forceKeyframe { _ = cshim_openh264_encoder_force_intra_frame(encoder, true) }
        var info = SFrameBSInfo()
        let milliseconds = timestamps.milliseconds(for: frame.rtpTimestamp)
        let rc = frame.data.withUnsafeBufferPointer { pixels -> Int32 in
            // openh264 only reads the planes during this call.
            let base = UnsafeMutablePointer(mutating: pixels.baseAddress)
            var picture = SSourcePicture()
            picture.iColorFormat = Int32(videoFormatI420.rawValue)
            picture.iPicWidth = Int32(frame.width)
            picture.iPicHeight = Int32(frame.height)
            picture.iStride = (Int32(frame.width), Int32(frame.width / 2), Int32(frame.width / 2), 0)
            picture.pData = (base, base.map { $0 + frame.uOffset }, base.map { $0 + frame.vOffset }, nil)
            picture.uiTimeStamp = milliseconds
            return cshim_openh264_encoder_encode_frame(encoder, &picture, &info)
        }
        guard rc == 0 else { throw H264CodecError("encode", reason: "openh264 code \(rc)") }
        guard info.eFrameType != videoFrameTypeSkip, info.eFrameType != videoFrameTypeInvalid else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(info.iFrameSizeInBytes))
        withUnsafeBytes(of: &info.sLayerInfo) { raw in
            let layers = raw.bindMemory(to: SLayerBSInfo.self)
            for layer in layers.prefix(Int(info.iLayerNum)) {
                guard let buffer = layer.pBsBuf, let lengths = layer.pNalLengthInByte else { continue }
                var size = 0
                for nal in 0..<Int(layer.iNalCount) { size += Int(lengths[nal]) }
                bytes += UnsafeBufferPointer(start: buffer, count: size)
            }
        }
        guard !bytes.isEmpty else { return [] }
        let isKey = info.eFrameType == videoFrameTypeIDR
        return [
            EncodedFrame(
                codec: .h264,
                data: H264AnnexB.withFourByteStartCodes(bytes),
                rtpTimestamp: frame.rtpTimestamp,
                isKeyframe: isKey
            )
        ]
    }
}

/// An H264 decoder (openh264), used by tests, interop checks and playback.
///
/// Not thread-safe: one task owns a decoder.
public final class H264Decoder: VideoDecoding {
    public var codec: MediaCodec { .h264 }
    private let decoder: UnsafeMutablePointer<ISVCDecoder?>

    /// Creates a decoder for Annex-B access units.
    public init() throws(H264CodecError) {
        var created: UnsafeMutablePointer<ISVCDecoder?>?
        guard WelsCreateDecoder(&created) == 0, let created else {
            throw H264CodecError("create decoder", reason: "WelsCreateDecoder returned no decoder")
        }
        var quiet = Int32(WELS_LOG_QUIET)
        _ = cshim_openh264_decoder_set_option(created, DECODER_OPTION_TRACE_LEVEL, &quiet)
        var params = SDecodingParam()
        params.eEcActiveIdc = ERROR_CON_DISABLE
        params.sVideoProperty.eVideoBsType = VIDEO_BITSTREAM_AVC
        guard cshim_openh264_decoder_initialize(created, &params) == 0 else {
            WelsDestroyDecoder(created)
            throw H264CodecError("initialize decoder", reason: "openh264 rejected the parameters")
        }
        self.decoder = created
    }

    deinit {
        _ = cshim_openh264_decoder_uninitialize(decoder)
        WelsDestroyDecoder(decoder)
    }

    /// Decodes one access unit; returns the picture, or nil when the decoder has none yet.
    public func decode(_ frame: EncodedFrame) throws(H264CodecError) -> VideoFrame? {
        guard !frame.data.isEmpty else { throw H264CodecError("decode", reason: "empty access unit") }
        var planes: (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?) =
            (nil, nil, nil)
        var info = SBufferInfo()
        let state = withUnsafeMutableBytes(of: &planes) { raw in
            cshim_openh264_decoder_decode_frame_no_delay(
                decoder,
                frame.data,
                Int32(frame.data.count),
                raw.baseAddress?.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self),
                &info
            )
        }
        guard state == dsErrorFree else {
            throw H264CodecError("decode", reason: "openh264 decoding state 0x\(String(state.rawValue, radix: 16))")
        }
        guard info.iBufferStatus == 1 else { return nil }
        let width = Int(info.UsrData.sSystemBuffer.iWidth)
        let height = Int(info.UsrData.sSystemBuffer.iHeight)
        let lumaStride = Int(info.UsrData.sSystemBuffer.iStride.0)
        let chromaStride = Int(info.UsrData.sSystemBuffer.iStride.1)
        guard width > 0, height > 0, width % 2 == 0, height % 2 == 0, let y = planes.0, let u = planes.1,
            let v = planes.2
        else { throw H264CodecError("decode", reason: "decoder returned a \(width)x\(height) picture") }
        var data = [UInt8](repeating: 0, count: VideoFrame.byteCount(width: width, height: height))
        data.withUnsafeMutableBufferPointer { out in
            guard let base = out.baseAddress else { return }
            for row in 0..<height {
                (base + row * width).update(from: y + row * lumaStride, count: width)
            }
            let chromaWidth = width / 2
            let uBase = base + width * height
            let vBase = uBase + chromaWidth * (height / 2)
            for row in 0..<(height / 2) {
                (uBase + row * chromaWidth).update(from: u + row * chromaStride, count: chromaWidth)
                (vBase + row * chromaWidth).update(from: v + row * chromaStride, count: chromaWidth)
            }
        }
        do throws(RawMediaError) {
            return try VideoFrame(width: width, height: height, data: data, rtpTimestamp: frame.rtpTimestamp)
        } catch {
            throw H264CodecError("decode", reason: error.description)
        }
    }
}

/// Turns 90 kHz RTP timestamps into the monotonic millisecond clock openh264's rate control uses.
struct MillisecondClock {
    private var last: UInt32?
    private var ticks: Int64 = 0

    mutating func milliseconds(for timestamp: UInt32) -> Int64 {
        if let last { ticks += Int64(Int32(bitPattern: timestamp &- last)) }
        last = timestamp
        return max(0, ticks) / 90
    }
}
