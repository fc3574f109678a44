/// Why `join` left the call (the `reason` it logs).
enum CallEnd: String, Sendable, Hashable, CustomStringConvertible {
    /// SIGINT (Ctrl-C).
    case interrupt
    /// SIGTERM.
    case terminate
    /// `--duration` passed.
    case duration

    var description: String { rawValue }
}
