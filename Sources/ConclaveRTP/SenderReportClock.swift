/// Maps a stream's RTP timestamps to the sender's wall clock using its latest RTCP sender report.
///
/// The recorder aligns audio and video from different SSRCs with this: both streams' SRs place
/// their RTP clocks on the one NTP clock of the sender (RFC 3550 §6.4.1). Timestamps up to 2^31
/// ticks either side of the SR's are mapped (about 6.6 hours at 90 kHz).
public struct SenderReportClock: Sendable, Hashable {
    /// The stream's RTP clock rate in Hz.
    public let clockRate: UInt32
    /// The NTP time of the latest sender report, nil before the first.
    public private(set) var referenceNTP: NTPTimestamp?
    /// The RTP timestamp of the latest sender report.
    public private(set) var referenceRTP: UInt32 = 0

    /// Creates a clock for a stream with `clockRate` (48000 for Opus, 90000 for video).
    public init(clockRate: UInt32) {
        self.clockRate = min(max(clockRate, 1), 1 << 30)
    }

    /// Whether a sender report has been seen.
    public var isSynchronized: Bool { referenceNTP != nil }

    /// Takes the mapping from a sender report.
    public mutating func update(with report: RTCPSenderReport) {
        update(ntp: report.ntpTimestamp, rtpTimestamp: report.rtpTimestamp)
    }

    /// Takes the mapping `ntp ↔ rtpTimestamp`.
    public mutating func update(ntp: NTPTimestamp, rtpTimestamp: UInt32) {
        referenceNTP = ntp
        referenceRTP = rtpTimestamp
    }

    /// The sender's wall-clock time, in microseconds since the Unix epoch, at which `rtpTimestamp`
    /// was sampled; nil before the first sender report.
    public func unixMicroseconds(forRTPTimestamp rtpTimestamp: UInt32) -> Int64? {
        guard let referenceNTP else { return nil }
        let ticks = Int64(Int32(bitPattern: rtpTimestamp &- referenceRTP))
        return referenceNTP.unixMicroseconds + ticks * 1_000_000 / Int64(clockRate)
    }

    /// The sender's NTP time at which `rtpTimestamp` was sampled; nil before the first report.
    public func ntpTimestamp(forRTPTimestamp rtpTimestamp: UInt32) -> NTPTimestamp? {
        guard let referenceNTP else { return nil }
        let ticks = Int64(Int32(bitPattern: rtpTimestamp &- referenceRTP))
        let rate = Int64(clockRate)
        let delta = (ticks / rate) << 32 + ((ticks % rate) << 32) / rate
        return NTPTimestamp(rawValue: UInt64(bitPattern: Int64(bitPattern: referenceNTP.rawValue) &+ delta))
    }
}
