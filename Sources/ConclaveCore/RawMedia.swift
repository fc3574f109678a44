/// One uncompressed picture in planar I420 (YUV 4:2:0, 8 bit): the input of the video encoders and
/// the output of the video decoders.
///
/// The three planes are stored back to back without padding (Y is `width × height`, U and V are
/// `width/2 × height/2` each), which is the layout of a Y4M frame and of libvpx's and openh264's
/// tightly packed input, so frames move between files, generators and codecs without reshuffling.
/// Width and height are even: 4:2:0 chroma needs whole 2×2 blocks.
public struct VideoFrame: Sendable, Hashable {
    /// Luma width in pixels (even).
    ///
    /// Size and pixels are read-only so that `data.count` always matches the size: encoders hand
    /// the buffer to C code that reads exactly `width × height × 3/2` bytes.
    public private(set) var width: Int
    /// Luma height in pixels (even).
    public private(set) var height: Int
    /// The Y, U and V planes, back to back.
    public private(set) var data: [UInt8]
    /// Presentation time on the 90 kHz RTP video clock.
    public var rtpTimestamp: UInt32

    /// Bytes in the luma plane.
    public var lumaCount: Int { width * height }
    /// Bytes in each chroma plane.
    public var chromaCount: Int { (width / 2) * (height / 2) }
    /// Where the U plane starts in `data`.
    public var uOffset: Int { lumaCount }
    /// Where the V plane starts in `data`.
    public var vOffset: Int { lumaCount + chromaCount }

    /// The byte count of an I420 frame of the given size.
    public static func byteCount(width: Int, height: Int) -> Int {
        width * height + 2 * ((width / 2) * (height / 2))
    }

    /// Creates a frame from packed I420 bytes; fails when the size is odd, not positive, or does not
    /// match `data.count`.
    public init(width: Int, height: Int, data: [UInt8], rtpTimestamp: UInt32) throws(RawMediaError) {
        try VideoFrame.validate(width: width, height: height)
        let expected = VideoFrame.byteCount(width: width, height: height)
        guard data.count == expected else {
            throw .wrongBufferSize(expected: expected, actual: data.count)
        }
        self.width = width
        self.height = height
        self.data = data
        self.rtpTimestamp = rtpTimestamp
    }

    /// A mid-grey frame, handy as a blank canvas.
    public static func blank(width: Int, height: Int, rtpTimestamp: UInt32 = 0) throws(RawMediaError) -> VideoFrame {
        try validate(width: width, height: height)
        var data = [UInt8](repeating: 128, count: byteCount(width: width, height: height))
        for index in 0..<(width * height) { data[index] = 16 }
        return try VideoFrame(width: width, height: height, data: data, rtpTimestamp: rtpTimestamp)
    }

    /// Checks that a resolution can be carried as I420 and by our encoders.
    public static func validate(width: Int, height: Int) throws(RawMediaError) {
        guard width > 0, height > 0, width <= 8192, height <= 8192 else {
            throw .unsupportedResolution(width: width, height: height, reason: "must be between 2 and 8192 pixels")
        }
        guard width % 2 == 0, height % 2 == 0 else {
            throw .unsupportedResolution(
                width: width,
                height: height,
                reason: "I420 needs an even width and height"
            )
        }
    }
}

/// A block of interleaved signed 16-bit PCM at 48 kHz: the input of the Opus encoder and the output
/// of the Opus decoder. WebRTC's Opus always runs its RTP clock at 48 kHz, so nothing else is carried.
public struct AudioFrame: Sendable, Hashable {
    /// The only sample rate Conclave's audio path uses.
    public static let sampleRate = 48_000

    /// 1 (mono) or 2 (stereo, interleaved left/right).
    public private(set) var channels: Int
    /// Interleaved samples; `samples.count` is a multiple of `channels`.
    public private(set) var samples: [Int16]
    /// Time of the first sample on the 48 kHz RTP audio clock.
    public var rtpTimestamp: UInt32

    /// Samples per channel (960 for a 20 ms frame).
    public var samplesPerChannel: Int { channels > 0 ? samples.count / channels : 0 }

    /// Creates a frame; fails when the channel count is not 1 or 2 or the samples do not divide evenly.
    public init(channels: Int, samples: [Int16], rtpTimestamp: UInt32) throws(RawMediaError) {
        guard channels == 1 || channels == 2 else { throw .unsupportedChannelCount(channels) }
        guard samples.count % channels == 0 else {
            throw .wrongBufferSize(expected: samples.count - samples.count % channels, actual: samples.count)
        }
        self.channels = channels
        self.samples = samples
        self.rtpTimestamp = rtpTimestamp
    }
}

/// A raw frame that cannot be built as asked.
public enum RawMediaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The picture size cannot be used (odd, zero, too large).
    case unsupportedResolution(width: Int, height: Int, reason: String)
    /// Audio must be mono or stereo.
    case unsupportedChannelCount(Int)
    /// The buffer does not hold exactly one frame.
    case wrongBufferSize(expected: Int, actual: Int)

    public var description: String {
        switch self {
        case .unsupportedResolution(let width, let height, let reason):
            "unsupported resolution \(width)x\(height): \(reason)"
        case .unsupportedChannelCount(let count): "unsupported channel count \(count): only 1 or 2"
        case .wrongBufferSize(let expected, let actual): "frame buffer holds \(actual) values, expected \(expected)"
        }
    }
}

/// A video encoder: raw pictures in, encoded frames out, steerable by the transport.
///
/// Encoders are not thread-safe; one task owns each.
public protocol VideoEncoding: AnyObject {
    /// The codec this encoder produces.
    var codec: MediaCodec { get }
    /// Encodes one picture. Returns the encoded frames it produced (normally exactly one).
    /// `forceKeyframe` makes this picture a keyframe (VP8 key frame, H264 IDR with SPS/PPS).
    func encode(_ frame: VideoFrame, forceKeyframe: Bool) throws -> [EncodedFrame]
    /// Changes the target bitrate, in bits per second, from the next frame on (REMB feedback).
    func setBitrate(_ bitsPerSecond: Int) throws
}

/// A video decoder: encoded frames in, pictures out.
public protocol VideoDecoding: AnyObject {
    /// The codec this decoder accepts.
    var codec: MediaCodec { get }
    /// Decodes one frame. Returns nil when the decoder produced no picture for it.
    func decode(_ frame: EncodedFrame) throws -> VideoFrame?
}
