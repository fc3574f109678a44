/// The URIs of the RTP header extensions Conclave negotiates in SDP (`a=extmap`) and reads in RTP.
///
/// Shared by the SDP negotiation (which maps a URI to the id the peer chose) and the RTP layer
/// (which reads or writes the element with that id). Unknown URIs are carried as plain strings.
public enum RTPHeaderExtensionURI {
    /// The media identification (`a=mid`) of the stream, RFC 8843. Janus uses it to route BUNDLEd streams.
    public static let mid = "urn:ietf:params:rtp-hdrext:sdes:mid"
    /// Client-to-mixer audio level, RFC 6464.
    public static let audioLevel = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"
    /// Absolute send time (6.18 fixed-point seconds), used by REMB bandwidth estimation.
    public static let absSendTime = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    /// Transport-wide sequence number, used by transport-cc feedback.
    public static let transportWideCC =
        "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"

    /// Every URI Conclave understands, in the order an offer lists them.
    public static let supported: [String] = [mid, audioLevel, absSendTime, transportWideCC]
}
