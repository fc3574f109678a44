/// How much audio a speaker keeps queued on the server: small for a conversation, larger after the
/// machine showed it can stall for longer than the queue lasts.
///
/// A playback stream underruns when its thread does not get the CPU before the server has played
/// everything queued: 40 ms is enough on a quiet machine, but a loaded one (a build, a browser, the
/// call's own video) can stall every thread for longer, and each stall is then a gap of digital
/// silence. PulseAudio's own ALSA sinks answer an underrun the same way: a bigger watermark at
/// once, a smaller one only after a long calm. Here each underrun adds ``step`` up to ``ceiling``
/// (a second underrun within ``settling`` of a growth is the same stall and adds nothing), and
/// each ``calm`` without one takes ``shrinkStep`` back, down to the size asked for: a stall costs
/// latency for a while, not for the rest of the call.
///
/// Pure arithmetic on the caller's instants; the playback's pulse thread owns it.
public struct PlaybackBufferSize: Sendable, Hashable {
    /// What an underrun adds (20 ms).
    public static let step: Duration = .milliseconds(20)
    /// What each calm period takes back (10 ms).
    public static let shrinkStep: Duration = .milliseconds(10)
    /// The time without an underrun after which the buffer shrinks by ``shrinkStep`` (2 minutes).
    public static let calm: Duration = .seconds(120)
    /// Underruns this soon after a growth are the stall that caused it, or the server still
    /// applying it (2 s).
    public static let settling: Duration = .seconds(2)

    /// The size asked for, and the smallest the buffer gets.
    public let floor: Duration
    /// The largest the buffer grows: a conversation's delay matters more than a rare gap.
    public let ceiling: Duration
    /// The size now.
    public private(set) var current: Duration
    /// Times the buffer grew.
    public private(set) var growths = 0
    /// When the buffer last changed, or an underrun last happened, whichever is later.
    private var lastEvent: ContinuousClock.Instant?
    private var lastGrowth: ContinuousClock.Instant?

    /// A buffer of `floor`, growing to at most `ceiling` (at least `floor`).
    public init(floor: Duration, ceiling: Duration) {
        self.floor = floor
        self.ceiling = max(floor, ceiling)
        current = floor
    }

    /// The server ran out of samples at `now`: the new size when the buffer grows, else nil.
    public mutating func underrun(at now: ContinuousClock.Instant) -> Duration? {
        defer { lastEvent = now }
        if let lastGrowth, now - lastGrowth < Self.settling { return nil }
        guard current < ceiling else { return nil }
        current = min(ceiling, current + Self.step)
        growths += 1
        lastGrowth = now
        return current
    }

    /// Time passed to `now` (called with each write): the new size when a calm period ended,
    /// else nil.
    public mutating func elapsed(to now: ContinuousClock.Instant) -> Duration? {
        guard current > floor else { return nil }
        guard let lastEvent else {
            self.lastEvent = now
            return nil
        }
        guard now - lastEvent >= Self.calm else { return nil }
        current = max(floor, current - Self.shrinkStep)
        self.lastEvent = now
        return current
    }
}
