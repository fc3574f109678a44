extension Duration {
    /// This duration in ticks of a media clock (90 000 for video, 48 000 for audio), rounded down.
    ///
    /// Goes through nanoseconds so the multiplication cannot overflow for any realistic duration.
    public func ticks(clockRate: Int) -> Int64 {
        let (seconds, attoseconds) = components
        let nanoseconds = attoseconds / 1_000_000_000
        return seconds * Int64(clockRate) + nanoseconds * Int64(clockRate) / 1_000_000_000
    }
}
