/// When the window presents: at most once per display refresh, and no faster than the fastest
/// participant's pictures come.
///
/// Every received picture marks the window dirty, so three peers at 30 fps would otherwise
/// present up to 90 times a second, each present redrawing (and with the software renderer,
/// rescaling and blitting) the whole window. Changes that arrive within one interval are drawn
/// together in the next present; nothing is lost, the newest picture of each tile is shown.
///
/// The display's refresh alone still allows 60 presents a second for 30 fps feeds that arrive
/// out of step, twice what any tile needs; so the interval also follows the pictures: each
/// second, the fastest tile's rate plus a quarter (room for network jitter, so that a tile's
/// pictures are not replaced unseen) sets it, never shorter than a refresh.
struct PresentPacing {
    /// What the window loop does next.
    enum Decision: Equatable {
        /// Draw and present now.
        case present
        /// Wait for events at most this many milliseconds, then decide again.
        case wait(milliseconds: Int32)
    }

    /// The refresh rate when the display does not report one (Xvfb reports 0).
    static let defaultRefreshRate = 60
    /// The wait when nothing is to be drawn: a guard only, every change arrives as an event.
    static let idleWait: Int32 = 1_000

    /// The display's refresh interval, in milliseconds (at least 1).
    let refreshInterval: UInt64
    /// The shortest time between two presents now, in milliseconds: the refresh interval, or
    /// longer when every tile's pictures come slower.
    private(set) var interval: UInt64
    private var lastPresent: UInt64?
    /// Pictures per participant since `countingSince`.
    private var counts: [UInt64: Int] = [:]
    private var countingSince: UInt64?

    /// Pacing for a display of `refreshRate` Hz (0 or less: unknown, 60 Hz).
    init(refreshRate: Int) {
        let rate = refreshRate > 0 ? refreshRate : Self.defaultRefreshRate
        refreshInterval = UInt64(max(1, 1_000 / rate))
        interval = refreshInterval
    }

    /// Notes pictures that arrived (per participant, replaced ones included) by `now`; once a
    /// second sets the interval from the fastest participant's rate.
    mutating func picturesArrived(_ arrived: [UInt64: Int], now: UInt64) {
        let since = countingSince ?? now
        countingSince = since
        for (id, count) in arrived { counts[id, default: 0] += count }
        guard now >= since else {  // the clock went back: start again
            (counts, countingSince) = ([:], now)
            return
        }
        let elapsed = now - since
        guard elapsed >= 1_000 else { return }
        let fastest = UInt64(counts.values.max() ?? 0) * 1_000 / elapsed
        // Rates of 4 or fewer pictures a second keep the refresh interval: a slide or a paused
        // camera must not make the window slow to show anything else.
        interval = fastest > 4 ? max(refreshInterval, 1_000 / (fastest + fastest / 4)) : refreshInterval
        (counts, countingSince) = ([:], now)
    }

    /// The decision at `now` (milliseconds on a monotonic clock) when the window is `dirty`.
    mutating func decide(dirty: Bool, now: UInt64) -> Decision {
        guard dirty else { return .wait(milliseconds: Self.idleWait) }
        if let lastPresent, now >= lastPresent, now - lastPresent < interval {
            return .wait(milliseconds: Int32(clamping: interval - (now - lastPresent)))
        }
        lastPresent = now
        return .present
    }
}
