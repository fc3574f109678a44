import Synchronization

/// A monotonic time source for key retention and key-request rate limits.
///
/// Times are durations since an arbitrary origin fixed by the source. Tests inject `ManualTimeSource`
/// so retention windows and cooldowns can be checked without sleeping.
public protocol MonotonicTimeSource: Sendable {
    /// The time now, as a duration since this source's origin.
    func now() -> Duration
}

/// The system's monotonic clock (`ContinuousClock`), with its origin at creation.
public struct SystemTimeSource: MonotonicTimeSource {
    private let origin = ContinuousClock.now

    public init() {}

    public func now() -> Duration { ContinuousClock.now - origin }
}

/// A clock that only moves when told to.
public final class ManualTimeSource: MonotonicTimeSource {
    private let current: Mutex<Duration>

    public init(_ start: Duration = .zero) { current = Mutex(start) }

    public func now() -> Duration { current.withLock { $0 } }

    /// Moves the clock forward by `step`.
    public func advance(by step: Duration) { current.withLock { $0 += step } }
}
