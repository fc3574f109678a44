import ConclaveRTP
import Foundation

/// The monotonic clock the media plane runs on, as the RTP modules count time.
public enum MediaClock {
    private static let origin = ContinuousClock.now

    /// Now, in microseconds since the process's media clock started.
    public static func now() -> MonotonicTime {
        let elapsed = ContinuousClock.now - origin
        return MonotonicTime(
            microseconds: elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        )
    }

    /// The wall clock as an NTP timestamp, for sender reports.
    public static func wallClock() -> NTPTimestamp {
        NTPTimestamp(unixMicroseconds: Int64(Date().timeIntervalSince1970 * 1_000_000))
    }
}
