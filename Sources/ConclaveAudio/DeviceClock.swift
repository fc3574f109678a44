/// The instant an output device will play each sample it asks for, from the samples it has asked
/// for so far, steadied against the jitter of its callbacks.
///
/// A device's callback runs when its thread gets the CPU, which on a loaded machine can be tens
/// of milliseconds late, and the calls after a late one come early to refill the device's buffer.
/// Stamping each block with the callback's wall-clock time would show a `PlayoutBuffer` delays
/// that swing by as much: it drops frames while the callback is late and conceals new ones when
/// the calls catch up, and each moves everything after it by 20 ms. The device itself plays at a
/// steady rate, so the samples it has taken, counted from an anchor, are the better clock.
///
/// The anchor follows the wall clock slowly (1/64 of the difference per call, a time constant of
/// about a second at 100 calls a second): that absorbs the device's crystal drifting from the
/// system's and the extra samples asked for when a stream starts, not single late callbacks. A
/// difference beyond `resetThreshold` is no jitter: the device stalled or underran and skipped
/// time, or was restarted, and the clock starts afresh from that call.
///
/// Pure arithmetic on the caller's instants; not thread-safe (the device's thread owns it).
public struct DeviceClock: Sendable {
    /// A callback this far from the steady line (150 ms) starts a new line.
    public static let resetThreshold: Duration = .milliseconds(150)
    /// The share of the difference the anchor moves at each call: 1/64.
    static let slewDivisor: Int64 = 64

    private let sampleRate: Int64
    /// The instant of sample `position`'s playing, nil before the first call.
    private var anchor: ContinuousClock.Instant?
    /// Samples asked for since the anchor.
    private var position: Int64 = 0

    /// A clock for a device playing `sampleRate` samples a second.
    public init(sampleRate: Int) {
        self.sampleRate = Int64(max(1, sampleRate))
    }

    /// The instant the first of `samples` samples asked for in a callback at `now` will be heard.
    public mutating func instant(forCallAt now: ContinuousClock.Instant, samples: Int) -> ContinuousClock.Instant {
        defer { position = position &+ Int64(max(0, samples)) }
        guard let anchor else {
            return restart(at: now)
        }
        let steady = anchor + offset(of: position)
        let difference = now - steady
        guard difference <= Self.resetThreshold, difference >= .zero - Self.resetThreshold else {
            return restart(at: now)
        }
        let moved = anchor + difference / Self.slewDivisor
        self.anchor = moved
        return moved + offset(of: position)
    }

    private mutating func restart(at now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        anchor = now
        position = 0
        return now
    }

    /// The time `samples` samples take to play.
    private func offset(of samples: Int64) -> Duration {
        .seconds(samples / sampleRate) + .nanoseconds(samples % sampleRate * 1_000_000_000 / sampleRate)
    }
}
