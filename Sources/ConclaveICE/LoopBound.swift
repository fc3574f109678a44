/// A value owned by one ICE agent's loop thread: read and changed there without a lock, and
/// reached from other threads only by posting work to that thread.
///
/// The loop thread is where received datagrams are handled and where the agent's timers fire, so
/// state used per received packet lives best there (as NIO's `NIOLoopBound` binds state to an
/// event loop). Code already running on the loop (the datagram handler, `repeatOnLoop` bodies,
/// work posted with ``execute(_:)`` or ``run(_:)``) calls ``withValue(_:)`` directly; anything
/// else posts. ``withValue(_:)`` checks the thread on every call, lock-free (a thread-id compare),
/// and stops the process when called from elsewhere: a data race found at once rather than a
/// corrupted jitter buffer found later.
///
/// After the agent closes, posted work runs one job at a time on a serial queue instead of the
/// exited thread (see ``execute(_:)``); it still counts as the owner there.
public final class LoopBound<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched by work the loop runs (its thread, or its after-exit
    // queue, which never runs while the thread does), which `withValue` checks on every access.
    // Inlinable with `withValue`, so that the per-packet call is specialized for the caller's
    // state like a `Mutex` is, instead of running generic code from another module.
    @usableFromInline var value: Value
    @usableFromInline let loop: GLibEventLoop

    /// Binds `value` to the loop thread of `agent`. The value is handed over (`sending`): from
    /// here on only the loop reaches it.
    public init(_ value: sending Value, on agent: ICEAgent) {
        self.value = value
        self.loop = agent.loop
    }

    /// True when the caller is the loop (its thread, or its work after the agent closed).
    public var isOnLoop: Bool { loop.isOwner }

    /// Runs `body` with the value, now, on the loop thread. Traps when called from any other
    /// thread; post with ``execute(_:)`` or ``run(_:)`` from there. Not reentrant: `body` must not
    /// reach the same box again (Swift's exclusivity check stops that too), so callers return
    /// what to hand on and call handlers after it.
    @inlinable
    public func withValue<Result: ~Copyable, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        precondition(loop.isOwner, "LoopBound value touched off its ICE loop thread")
        return try body(&value)
    }

    /// Posts `body` to the loop and returns at once; it runs at the loop's next iteration, never
    /// inline (also when called on the loop), in the order posted.
    public func execute(_ body: @escaping @Sendable (inout Value) -> Void) {
        loop.execute { [self] in withValue(body) }
    }

    /// Runs `body` on the loop and returns its result: for callers outside the loop that need an
    /// answer (negotiation, statistics). One thread hop each way; not for per-packet work.
    public func run<Result: Sendable>(_ body: @escaping @Sendable (inout Value) -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            execute { value in continuation.resume(returning: body(&value)) }
        }
    }
}
