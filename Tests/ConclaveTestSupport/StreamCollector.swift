import Synchronization

/// Collects a stream's elements so that a test can wait for one that matches, with a deadline.
public final class StreamCollector<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var finished = false
        var waiters:
            [(id: Int, predicate: @Sendable (Element) -> Bool, continuation: CheckedContinuation<Element?, Never>)] = []
        var nextID = 0
    }

    private let state = Mutex(State())
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    public init(_ stream: AsyncStream<Element>) {
        let consumer = Task { [weak self] in
            for await item in stream { self?.append(item) }
            self?.finish()
        }
        task.withLock { $0 = consumer }
    }

    deinit { task.withLock { $0?.cancel() } }

    public var items: [Element] { state.withLock { $0.items } }

    private func append(_ item: Element) {
        let ready = state.withLock { state in
            state.items.append(item)
            let matching = state.waiters.filter { $0.predicate(item) }
            state.waiters.removeAll { $0.predicate(item) }
            return matching.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: item) }
    }

    private func finish() {
        let waiting = state.withLock { state in
            state.finished = true
            defer { state.waiters.removeAll() }
            return state.waiters.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(returning: nil) }
    }

    /// The first `count` elements that match, waiting for them up to the deadline; fewer when the
    /// deadline passes or the stream ends first. Streams are consumed by separate tasks, so an
    /// element seen on one stream says nothing about whether another collector has caught up.
    public func matching(
        count: Int,
        within limit: Duration = .seconds(30),
        where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
    ) async -> [Element] {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while true {
            let (seen, found) = state.withLock { ($0.items.count, $0.items.filter(predicate)) }
            let remaining = ContinuousClock.now.duration(to: deadline)
            if found.count >= count || remaining <= .zero { return Array(found.prefix(count)) }
            if await first(after: seen, within: remaining, where: predicate) == nil {
                return state.withLock { Array($0.items.filter(predicate).prefix(count)) }
            }
        }
    }

    /// The first element, recorded after the `after`-th one, that matches; nil at the deadline,
    /// when the stream ended without one, or when the waiting task is cancelled (a task group that
    /// races two collectors and cancels the loser would otherwise wait out the loser's deadline).
    public func first(
        after skip: Int = 0,
        within limit: Duration = .seconds(30),
        where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
    ) async -> Element? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        // The deadline is armed only once the waiter is registered. Armed before, a deadline that
        // passed at once (a short `limit`, a loaded machine) could look for the waiter before it
        // was there, find nothing, and leave it waiting forever with no timer left to end it.
        var timeout: Task<Void, Never>?
        let found = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let found = state.withLock { state -> Element?? in
                    if let item = state.items.dropFirst(skip).first(where: predicate) { return .some(item) }
                    if state.finished { return .some(nil) }
                    state.waiters.append((id, predicate, continuation))
                    return nil
                }
                if let found {
                    continuation.resume(returning: found)
                    return
                }
                // Cancelled before the waiter was there: the handler found nothing to end.
                if Task.isCancelled {
                    giveUp(waiter: id)
                    return
                }
                timeout = Task {
                    try? await Task.sleep(for: limit)
                    self.giveUp(waiter: id)
                }
            }
        } onCancel: {
            giveUp(waiter: id)
        }
        timeout?.cancel()
        return found
    }

    /// Ends waiter `id` with nil, if it still waits.
    private func giveUp(waiter id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        waiter?.resume(returning: nil)
    }
}
