public import ConclaveRTP

/// What the recorder keeps of an RTCP sender report: the sender's wall-clock (NTP) time at one RTP
/// timestamp of the stream, which places the stream on the call timeline.
///
/// One value from the receiver through the journal to the segment muxer, so the pair is never
/// taken apart and rebuilt on the way (the report's counters and reception blocks say nothing
/// about timing and are not kept).
public struct SenderReportTime: Sendable, Hashable {
    /// The sender's wall clock when it sampled `rtpTimestamp`.
    public var ntp: NTPTimestamp
    /// The stream's RTP timestamp at `ntp`.
    public var rtpTimestamp: UInt32

    public init(ntp: NTPTimestamp, rtpTimestamp: UInt32) {
        self.ntp = ntp
        self.rtpTimestamp = rtpTimestamp
    }

    /// The timing of a received sender report.
    public init(_ report: RTCPSenderReport) {
        self.init(ntp: report.ntpTimestamp, rtpTimestamp: report.rtpTimestamp)
    }
}
