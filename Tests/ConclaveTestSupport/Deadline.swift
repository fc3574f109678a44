/// Runs `body` in a task that is cancelled when `limit` passes, and returns what it returned.
///
/// For loops over frame streams that end on a count: cancellation ends the `for await`, so a
/// stream that stalls gives the test what arrived so far to assert on instead of hanging it.
public func withDeadline<T: Sendable>(
    _ limit: Duration,
    _ body: @escaping @Sendable () async -> T
) async -> T {
    let work = Task { await body() }
    let deadline = Task {
        try await Task.sleep(for: limit)
        work.cancel()
    }
    let result = await work.value
    deadline.cancel()
    return result
}

/// Returns `operation`'s result, or nil when `limit` passes first, without waiting for an
/// operation that ignores cancellation (a connection stuck before its handshake): the operation
/// is cancelled and left to finish on its own, so a stall fails the test instead of hanging it.
public func firstWithin<T: Sendable>(
    _ limit: Duration,
    _ operation: @escaping @Sendable () async -> T
) async -> T? {
    // The first of the two to yield wins; the stream ends there, so the other's yield is dropped.
    let (results, continuation) = AsyncStream.makeStream(of: T?.self)
    let work = Task {
        continuation.yield(await operation())
        continuation.finish()
    }
    let timer = Task {
        try? await Task.sleep(for: limit)
        continuation.yield(nil)
        continuation.finish()
    }
    var iterator = results.makeAsyncIterator()
    let first = await iterator.next()
    work.cancel()
    timer.cancel()
    return first ?? nil
}
