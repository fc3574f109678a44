/// Extends 16-bit RTP sequence numbers to a monotonic 64-bit count.
///
/// Each value is placed at the distance closest to the previous one (at most 2^15 either way), so
/// wrap-around and moderate reordering both come out right. The first value maps to itself.
public struct SequenceNumberUnwrapper: Sendable, Hashable {
    private var last: Int64?

    /// Creates an unwrapper with no history.
    public init() {}

    /// The 64-bit form of `value`.
    public mutating func unwrap(_ value: UInt16) -> Int64 {
        guard let last else {
            self.last = Int64(value)
            return Int64(value)
        }
        let delta = Int16(bitPattern: value &- UInt16(truncatingIfNeeded: last))
        let result = last + Int64(delta)
        if result > last { self.last = result }
        return result
    }

    /// The 64-bit form of `value` without updating the reference (nil before the first value).
    public func peek(_ value: UInt16) -> Int64? {
        guard let last else { return nil }
        return last + Int64(Int16(bitPattern: value &- UInt16(truncatingIfNeeded: last)))
    }
}

/// Extends 32-bit RTP timestamps to 64 bits, as `SequenceNumberUnwrapper` does for sequence numbers.
public struct TimestampUnwrapper: Sendable, Hashable {
    private var last: Int64?

    /// Creates an unwrapper with no history.
    public init() {}

    /// The 64-bit form of `value`.
    public mutating func unwrap(_ value: UInt32) -> Int64 {
        guard let last else {
            self.last = Int64(value)
            return Int64(value)
        }
        let delta = Int32(bitPattern: value &- UInt32(truncatingIfNeeded: last))
        // A sender can move the timestamp by 2^31 with every packet; 2^32 such packets would
        // overflow, so the sum is held at the bound rather than trapping.
        let (sum, overflow) = last.addingReportingOverflow(Int64(delta))
        let result = overflow ? (delta > 0 ? Int64.max : Int64.min) : sum
        if result > last { self.last = result }
        return result
    }
}
