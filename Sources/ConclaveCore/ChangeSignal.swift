import Synchronization

/// Wakes the tasks waiting for something to change, so that they re-check their condition when
/// it may have become true instead of polling on a timer: a change is seen the moment it happens,
/// and an idle wait costs no wakeups.
///
/// Usage, free of lost wakeups: read ``generation``, check the condition, and if it does not hold
/// yet, ``wait(after:until:)`` with the generation read before the check; a change between the
/// check and the wait ends the wait at once.
package final class ChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Counts the changes so far.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Records a change and wakes every waiting task. Callable from any thread, including a
    /// libnice callback on the loop thread: it only takes a lock and resumes continuations.
    package func notify() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Waits until a change after `generation` (true), or until `deadline` (false).
    ///
    /// Throws `CancellationError` when the task is cancelled, as the sleep of a polling
    /// loop would.
    package func wait(after generation: UInt64, until deadline: ContinuousClock.Instant) async throws -> Bool {
        let id = state.withLock { state in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        // The deadline itself: a timer that ends this one wait (cancelled as soon as it ends).
        let timer = Task { [self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            release(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked under the lock that `notify` and `release` take: a change, the deadline
                // or a cancellation that came before this point ends the wait here, and one that
                // comes later finds the continuation registered.
                let waiting = state.withLock { state -> Bool in
                    guard state.generation == generation, ContinuousClock.now < deadline, !Task.isCancelled else {
                        return false
                    }
                    state.waiters[id] = continuation
                    return true
                }
                if !waiting { continuation.resume() }
            }
        } onCancel: {
            release(id)
        }
        try Task.checkCancellation()
        return state.withLock { $0.generation != generation }
    }

    /// Ends one wait without a change (its deadline passed, or its task was cancelled).
    private func release(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}
