internal import CNice
import Glibc

/// Receive batching on one GLib loop thread: a `GPollFunc` that sleeps before polling for as long
/// as ``ReceiveBatchingPolicy`` says, and the datagram count that feeds the policy's rate.
///
/// Owned by the loop thread: created with the agent, then touched only on that thread (the
/// receive callback counts, the poll function decides), so it needs no lock. The state sits
/// behind a pointer allocated once, so counting a datagram is a plain increment with no
/// exclusivity bookkeeping on the per-datagram path.
final class ReceiveBatchingPoll: @unchecked Sendable {
    // @unchecked: `state` is written only on the loop thread; `install` (which runs there) is the
    // first access after `init`, and the GSource that runs it orders the handoff.
    private let state: UnsafeMutablePointer<State>
    /// The settings it was made from (the receive buffer size is read when the pair is selected).
    let settings: ReceiveBatching

    private struct State {
        var policy: ReceiveBatchingPolicy
        var datagrams: Int64 = 0
    }

    init(_ settings: ReceiveBatching) {
        self.settings = settings
        state = .allocate(capacity: 1)
        state.initialize(to: State(policy: Self.policy(settings, now: 0)))
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Counts one datagram read on the loop thread.
    @inline(__always)
    func countDatagram() { state.pointee.datagrams &+= 1 }

    /// Starts the policy now and makes `context`'s poll function batch. Call on the loop thread
    /// that iterates `context`: `GPollFunc` takes no user data, so the poll function finds this
    /// object through the thread's slot, which holds a reference until the thread exits.
    func install(on context: OpaquePointer) {
        state.pointee.policy = Self.policy(settings, now: Int64(g_get_monotonic_time()))
        if let previous = pthread_getspecific(loopBatchingKey) {
            Unmanaged<ReceiveBatchingPoll>.fromOpaque(previous).release()
        }
        pthread_setspecific(loopBatchingKey, Unmanaged.passRetained(self).toOpaque())
        g_main_context_set_poll_func(context, pollAfterBatchingDelay)
    }

    /// Sleeps as the policy says, then polls; called by GLib on the loop thread.
    fileprivate func poll(_ descriptors: UnsafeMutablePointer<GPollFD>?, _ count: guint, _ timeout: gint) -> gint {
        let wait = state.pointee.policy.beforePoll(
            now: Int64(g_get_monotonic_time()),
            datagrams: state.pointee.datagrams,
            timeout: timeout
        )
        if wait.sleep > 0 { g_usleep(gulong(wait.sleep)) }
        let result = g_poll(descriptors, count, wait.timeout)
        state.pointee.policy.woke(at: Int64(g_get_monotonic_time()), datagrams: state.pointee.datagrams)
        return result
    }

    private static func policy(_ settings: ReceiveBatching, now: Int64) -> ReceiveBatchingPolicy {
        let maximum = settings.maximumDelay.components
        let microseconds = maximum.seconds * 1_000_000 + maximum.attoseconds / 1_000_000_000_000
        return ReceiveBatchingPolicy(
            maximumDelay: microseconds,
            budget: Int64(clamping: max(settings.datagramBudget, 1)),
            now: now
        )
    }
}

/// The loop thread's ``ReceiveBatchingPoll`` (retained), for the poll function; released when the
/// thread exits.
private let loopBatchingKey: pthread_key_t = {
    var key = pthread_key_t()
    let result = pthread_key_create(&key) { pointer in
        guard let pointer else { return }
        Unmanaged<ReceiveBatchingPoll>.fromOpaque(pointer).release()
    }
    precondition(result == 0, "pthread_key_create failed: \(result)")
    return key
}()

/// `GPollFunc`: `gint (*)(GPollFD *ufds, guint nfds, gint timeout)`. Installed only by
/// ``ReceiveBatchingPoll/install(on:)``, which sets the thread's slot first.
private func pollAfterBatchingDelay(_ descriptors: UnsafeMutablePointer<GPollFD>?, _ count: guint, _ timeout: gint)
    -> gint
{
    guard let slot = pthread_getspecific(loopBatchingKey) else { return g_poll(descriptors, count, timeout) }
    return Unmanaged<ReceiveBatchingPoll>.fromOpaque(slot).takeUnretainedValue().poll(descriptors, count, timeout)
}

/// Raises the receive buffer of the selected pair's UDP socket to at least `bytes`, as a margin for
/// a sudden rise in rate before the delay shrinks (the kernel caps it at net.core.rmem_max).
/// Returns the size now in force, or nil without a UDP socket.
func growReceiveBuffer(agent: OpaquePointer, stream: guint, component: guint, bytes: Int32) -> Int32? {
    guard let socket = nice_agent_get_selected_socket(agent, stream, component) else { return nil }
    defer { g_object_unref(socket) }
    let descriptor = g_socket_get_fd(socket)
    let size = socklen_t(MemoryLayout<Int32>.size)
    var current: Int32 = 0
    var length = size
    if getsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &current, &length) == 0, current < bytes {
        var wanted = bytes
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &wanted, size)
        length = size
        _ = getsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &current, &length)
    }
    return current
}
