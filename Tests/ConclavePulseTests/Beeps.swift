import ConclavePulse
import ConclaveTestSupport
import Foundation
import Synchronization

/// A renderer that plays the beep track forever, on the pulse thread.
final class BeepRenderer: PlaybackRenderer {
    private let position = Atomic<Int>(0)

    func render(into buffer: UnsafeMutableBufferPointer<Int16>) {
        let start = position.load(ordering: .relaxed)
        for offset in buffer.indices { buffer[offset] = Beeps.sample(start + offset) }
        position.store(start + buffer.count, ordering: .relaxed)
    }
}

/// The beep track, with the pulse thread blocked once for `stall` after `samples` samples were
/// rendered: a machine that stalls longer than the speaker's buffer lasts.
final class StallingRenderer: PlaybackRenderer {
    private let beeps = BeepRenderer()
    private let stallAfter: Int
    private let stall: Duration
    private let rendered = Atomic<Int>(0)
    private let hasStalled = Atomic<Bool>(false)

    init(after samples: Int, for stall: Duration) {
        stallAfter = samples
        self.stall = stall
    }

    /// Whether the stall happened.
    var stalled: Bool { hasStalled.load(ordering: .relaxed) }

    func render(into buffer: UnsafeMutableBufferPointer<Int16>) {
        beeps.render(into: buffer)
        let total = rendered.add(buffer.count, ordering: .relaxed).newValue
        if total >= stallAfter, !hasStalled.exchange(true, ordering: .relaxed) {
            let (seconds, attoseconds) = stall.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }
}
