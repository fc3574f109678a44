import ConclavePulse
import ConclaveTestSupport
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
