/// An instant on the caller's monotonic clock, in microseconds since an arbitrary origin.
///
/// Every state machine in this module takes the current time as a parameter instead of reading a
/// clock, so tests can drive time explicitly and the media thread reads the clock once per event.
public struct MonotonicTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since the caller's origin.
    public var microseconds: Int64

    /// Creates an instant from microseconds since the caller's origin.
    public init(microseconds: Int64) {
        self.microseconds = microseconds
    }

    /// Creates an instant from milliseconds since the caller's origin.
    public static func milliseconds(_ value: Int64) -> MonotonicTime {
        MonotonicTime(microseconds: value * 1000)
    }

    /// The caller's origin.
    public static let zero = MonotonicTime(microseconds: 0)

    /// Creates an instant from seconds since the caller's origin.
    public static func seconds(_ value: Int64) -> MonotonicTime {
        MonotonicTime(microseconds: value * 1_000_000)
    }

    /// The instant `duration` later.
    public func advanced(by duration: Duration) -> MonotonicTime {
        MonotonicTime(microseconds: microseconds + duration.microseconds)
    }

    /// The time from `earlier` to `self` (negative if `earlier` is later).
    public func since(_ earlier: MonotonicTime) -> Duration {
        .microseconds(microseconds - earlier.microseconds)
    }

    public static func < (lhs: MonotonicTime, rhs: MonotonicTime) -> Bool {
        lhs.microseconds < rhs.microseconds
    }

    public var description: String { "\(microseconds)µs" }
}

extension Duration {
    /// The duration in whole microseconds, truncated toward zero.
    var microseconds: Int64 {
        let parts = components
        return parts.seconds &* 1_000_000 &+ parts.attoseconds / 1_000_000_000_000
    }
}
