import Foundation
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
        for value in 1...5 { queue.push(Self.block(Int16(value * 100)), capacity: 10) }
        // Block 4, faded in from block 1 (what followed the sound already sent): 100 → 400.
        #expect(queue.pop(keepingAtMost: 2) == [160, 220, 280, 340])
        #expect(queue.statistics.dropped == 3)
        #expect(queue.pop(keepingAtMost: 2) == Self.block(500), "no drop, no fade")
        #expect(queue.pop(keepingAtMost: 2) == nil)
    }

    /// A tone with 40 ms dropped joins without a click: its own largest step (1,010 Hz at 8000)
    /// is 8000 · 2π · 1010/48000 ≈ 1058; joined raw, 40.4 periods apart, the step is about 14,000.
    @Test func aDropInASoundIsSplicedWithoutAStep() {
        func tone(_ index: Int) -> Int16 {
            Int16((8_000 * sin(2 * .pi * 1_010 * Double(index) / 48_000)).rounded())
        }
        var queue = MicrophoneBlockQueue()
        queue.dropIfStale()
        for block in 0..<4 { queue.push((0..<960).map { tone(block * 960 + $0) }, capacity: 10) }
        let first = queue.pop(keepingAtMost: 4) ?? []
        let later = queue.pop(keepingAtMost: 1) ?? []
        #expect(queue.statistics.dropped == 2)
        let joined = first + later
        let steps = zip(joined, joined.dropFirst()).map { abs(Int($1) - Int($0)) }
        #expect(steps.max() ?? .max <= 1_200, "largest step \(steps.max() ?? -1)")
    }
}
