import Testing

@testable import ConclavePulse

/// The microphone's block queue on its own: which blocks the sender gets, without a server.
@Suite struct MicrophoneBlockQueueTests {
    private static func block(_ value: Int16) -> [Int16] { [Int16](repeating: value, count: 4) }

    @Test func theFirstWaitDropsWhatWasQueuedBeforeIt() {
        var queue = MicrophoneBlockQueue()
        for value in 1...4 { queue.push(Self.block(Int16(value)), capacity: 10) }
        queue.dropIfStale()
        #expect(queue.blocks.isEmpty)
        #expect(queue.statistics.dropped == 4)

        // Blocks captured after it are handed out, and later waits drop nothing.
        queue.push(Self.block(5), capacity: 10)
        queue.dropIfStale()
        #expect(queue.pop(keepingAtMost: 2) == Self.block(5))
        queue.push(Self.block(6), capacity: 10)
        queue.push(Self.block(7), capacity: 10)
        queue.dropIfStale()
        #expect(queue.pop(keepingAtMost: 2) == Self.block(6))
        #expect(queue.statistics.dropped == 4)
        #expect(queue.statistics.delivered == 2)
    }

    @Test func anOverflowMakesTheQueueStaleAgain() {
        var queue = MicrophoneBlockQueue()
        queue.dropIfStale()
        for value in 1...3 { queue.push(Self.block(Int16(value)), capacity: 3) }
        queue.dropIfStale()
        #expect(queue.blocks.count == 3, "a full queue that did not overflow is kept")
        queue.push(Self.block(4), capacity: 3)
        #expect(queue.statistics.dropped == 1)
        queue.dropIfStale()
        #expect(queue.blocks.isEmpty)
        #expect(queue.statistics.dropped == 4)
        queue.push(Self.block(5), capacity: 3)
        #expect(queue.pop(keepingAtMost: 2) == Self.block(5))
    }

    @Test func takingABlockStillDropsAllButTheNewestTwo() {
        var queue = MicrophoneBlockQueue()
        queue.dropIfStale()
        for value in 1...5 { queue.push(Self.block(Int16(value)), capacity: 10) }
        #expect(queue.pop(keepingAtMost: 2) == Self.block(4))
        #expect(queue.statistics.dropped == 3)
        #expect(queue.pop(keepingAtMost: 2) == Self.block(5))
        #expect(queue.pop(keepingAtMost: 2) == nil)
    }
}
