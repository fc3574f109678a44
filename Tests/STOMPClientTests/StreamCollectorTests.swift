import ConclaveTestSupport
import Testing

/// The collector the STOMP and recorder tests wait on. A wait whose deadline passes before its
/// waiter is registered must still end: armed first, the deadline found no waiter, and the test
/// process hung with no timer left (the recorder service tests' `within: .zero` hit it).
@Suite("Stream collector deadlines")
struct StreamCollectorTests {
    @Test func aDeadlineThatHasPassedAlreadyEndsEveryWait() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let collector = StreamCollector(stream)
        continuation.yield(1)
        let calls = 5_000
        // Bounded: before the fix, a few hundred such waits were enough for one never to end.
        let ended = await firstWithin(.seconds(60)) {
            var ended = 0
            for _ in 0..<calls where await collector.first(within: .zero, where: { $0 == 2 }) == nil {
                ended += 1
            }
            return ended
        }
        #expect(ended == calls)
        continuation.finish()
    }

    @Test func aWaitEndsWithTheFirstMatchSeenOrStillToCome() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let collector = StreamCollector(stream)
        continuation.yield(1)
        #expect(await collector.first(where: { $0 == 1 }) == 1)
        async let later = collector.first(where: { $0 == 3 })
        continuation.yield(2)
        continuation.yield(3)
        #expect(await later == 3)
        continuation.finish()
        #expect(await collector.first(where: { $0 == 4 }) == nil)
    }
}
