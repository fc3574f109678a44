/// The kind of media a stream carries.
public enum MediaKind: String, Sendable, Hashable, Codable, CaseIterable {
    case audio
    case video
}

/// The codecs Conclave sends, receives, encrypts and records.
///
/// These are the codecs Janus's VideoRoom and the ECall iOS app use: Opus for audio, VP8 and H264 for
/// video. The raw value is the lowercase name used on the command line and in manifests.
public enum MediaCodec: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case opus
    case vp8
    case h264

    /// Audio or video.
    public var kind: MediaKind {
        switch self {
        case .opus: .audio
        case .vp8, .h264: .video
        }
    }

    /// The RTP clock rate: 48 kHz for Opus (RFC 7587), 90 kHz for video.
    public var clockRate: UInt32 {
        switch self {
        case .opus: 48_000
        case .vp8, .h264: 90_000
        }
    }

    /// The name as it appears in SDP `a=rtpmap` lines (`opus`, `VP8`, `H264`).
    public var sdpName: String {
        switch self {
        case .opus: "opus"
        case .vp8: "VP8"
        case .h264: "H264"
        }
    }

    public var description: String { rawValue }

    /// Parses an SDP encoding name, case-insensitively.
    public init?(sdpName: String) {
        switch sdpName.lowercased() {
        case "opus": self = .opus
        case "vp8": self = .vp8
        case "h264": self = .h264
        default: return nil
        }
    }
}
