/// One complete encoded frame: an Opus packet, a VP8 frame, or an H264 access unit in Annex-B form.
///
/// This is the unit that flows between encoder, E2EE stage, packetizer, depacketizer and recorder.
/// H264 access units always use Annex-B start codes (`00 00 00 01`), because that is the form the
/// ECall iOS frame encryption parses and the form libavformat muxes.
public struct EncodedFrame: Sendable, Hashable {
    /// The codec of `data`.
    public var codec: MediaCodec
    /// The encoded bytes.
    public var data: [UInt8]
    /// The RTP timestamp, in units of `codec.clockRate`.
    public var rtpTimestamp: UInt32
    /// Whether a decoder can start from this frame (VP8 keyframe, H264 IDR; always true for Opus).
    public var isKeyframe: Bool
    /// The simulcast layer the frame belongs to, 0 being the lowest (Janus's substream 0); always
    /// 0 for a stream sent without simulcast. The publisher sends each layer on an SSRC of its own.
    public var simulcastLayer: Int

    /// Creates a frame.
    public init(codec: MediaCodec, data: [UInt8], rtpTimestamp: UInt32, isKeyframe: Bool, simulcastLayer: Int = 0) {
        self.codec = codec
        self.data = data
        self.rtpTimestamp = rtpTimestamp
        self.isKeyframe = isKeyframe
        self.simulcastLayer = simulcastLayer
    }
}
