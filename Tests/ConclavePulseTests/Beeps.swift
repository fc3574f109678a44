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

/// The beep track, with the pulse thread blocked once for `stall` after ``arm()``: a machine that
/// stalls longer than the speaker's buffer lasts.
final class StallingRenderer: PlaybackRenderer {
    private let beeps = BeepRenderer()
    private let stall: Duration
    private let armed = Atomic<Bool>(false)
    private let hasStalled = Atomic<Bool>(false)

    init(for stall: Duration) {
        self.stall = stall
    }

    /// Makes the next render stall.
    func arm() { armed.store(true, ordering: .relaxed) }

    /// Whether the stall happened.
    var stalled: Bool { hasStalled.load(ordering: .relaxed) }

    func render(into buffer: UnsafeMutableBufferPointer<Int16>) {
        beeps.render(into: buffer)
        if armed.load(ordering: .relaxed), !hasStalled.exchange(true, ordering: .relaxed) {
            let (seconds, attoseconds) = stall.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }
}
