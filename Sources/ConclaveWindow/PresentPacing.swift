/// When the window presents: at most once per display refresh.
///
/// Every received picture marks the window dirty, so three peers at 30 fps would otherwise
/// present up to 90 times a second, each present redrawing (and with the software renderer,
/// rescaling and blitting) the whole window. Changes that arrive within one refresh are drawn
/// together in the next present; nothing is lost, the newest picture of each tile is shown.
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

    /// The shortest time between two presents, in milliseconds (at least 1).
    let interval: UInt64
    private var lastPresent: UInt64?

    /// Pacing for a display of `refreshRate` Hz (0 or less: unknown, 60 Hz).
    init(refreshRate: Int) {
        let rate = refreshRate > 0 ? refreshRate : Self.defaultRefreshRate
        interval = UInt64(max(1, 1_000 / rate))
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
