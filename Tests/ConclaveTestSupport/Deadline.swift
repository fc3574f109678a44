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
