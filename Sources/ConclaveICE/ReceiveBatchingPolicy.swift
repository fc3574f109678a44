/// The rate-adaptive delay of ``ReceiveBatching``, without I/O: given the time and how many
/// datagrams the thread has read so far, how long the loop thread should sleep before it polls.
///
/// The thread wakes at most every `delay` after its last wakeup, so the datagrams of that span are
/// read in one wakeup instead of one each. `delay` is `budget / rate`, capped at the maximum, with
/// the rate estimated over a half-second window: long enough to average bursts, short enough to
/// follow participants joining and leaving. A sudden rise (media starting on many feeds at once)
/// shrinks the delay at the next wakeup rather than at the window's end. The sleep never outlasts
/// the timeout GLib polls with, so GLib timers still fire on time.
///
/// Times are microseconds of one monotonic clock (`g_get_monotonic_time` on the loop thread);
/// the datagram count only grows. All arithmetic is integer, so vectors give exact answers.
struct ReceiveBatchingPolicy: Sendable, Hashable {
    /// The window over which the datagram rate is estimated, in microseconds.
    static let window: Int64 = 500_000

    /// The longest a datagram waits, in microseconds.
    let maximumDelay: Int64
    /// About how many datagrams may wait at a time.
    let budget: Int64
    /// The current delay after a wakeup, in microseconds.
    private(set) var delay: Int64
    /// The window's start, and the datagram count then.
    private var windowStart: Int64
    private var windowDatagrams: Int64 = 0
    /// The last wakeup, and the datagram count then.
    private var lastWakeup: Int64
    private var wakeupDatagrams: Int64 = 0

    /// A policy started at `now`, waiting the full `maximumDelay` (microseconds) until it has
    /// seen a rate. `budget` is at least 1.
    init(maximumDelay: Int64, budget: Int64, now: Int64) {
        self.maximumDelay = maximumDelay
        self.budget = max(budget, 1)
        delay = maximumDelay
        windowStart = now
        lastWakeup = now
    }

    /// What the loop thread does before it polls.
    struct Wait: Sendable, Hashable {
        /// How long to sleep first, in microseconds (0: not at all).
        var sleep: Int64
        /// The timeout left for the poll itself, in milliseconds (-1: none), as GLib takes it.
        var timeout: Int32
    }

    /// What to do before polling at `now`, after `datagrams` datagrams in all, when GLib asks to
    /// poll with `timeout` (milliseconds, -1 for none).
    mutating func beforePoll(now: Int64, datagrams: Int64, timeout: Int32) -> Wait {
        let read = datagrams - wakeupDatagrams
        if read > 2 * budget {
            delay = delay * budget / read
        }
        if now - windowStart >= Self.window {
            let span = now - windowStart
            let seen = datagrams - windowDatagrams
            // delay = budget / rate, with rate = seen / span.
            let estimate = seen > 0 ? budget * span / seen : maximumDelay
            delay = min(estimate, maximumDelay)
            windowDatagrams = datagrams
            windowStart = now
        }
        var sleep = lastWakeup + delay - now
        guard timeout != 0, sleep > 0 else { return Wait(sleep: 0, timeout: timeout) }
        guard timeout > 0 else { return Wait(sleep: sleep, timeout: timeout) }
        sleep = min(sleep, Int64(timeout) * 1000)
        let left = Int64(timeout) - sleep / 1000
        return Wait(sleep: sleep, timeout: left > 0 ? Int32(left) : 0)
    }

    /// The poll returned at `now`, after `datagrams` datagrams in all: the next delay counts from
    /// here.
    mutating func woke(at now: Int64, datagrams: Int64) {
        lastWakeup = now
        wakeupDatagrams = datagrams
    }
}
