import ConclaveTestSupport
import Foundation
import Synchronization
import Testing

@testable import ConclaveICE

/// Receive batching (recorders): datagrams wait in the socket and are read several per wakeup,
/// and none is lost when the rate jumps.
@Suite("Receive batching over loopback", .serialized)
struct ReceiveBatchingTests {
    /// What the batching side's handler saw: each datagram and when (monotonic nanoseconds).
    final class Arrivals: Sendable {
        let state = Mutex<[(datagram: [UInt8], at: UInt64)]>([])

        func record(_ bytes: UnsafeRawBufferPointer) {
            let now = DispatchTime.now().uptimeNanoseconds
            state.withLock { $0.append((Array(bytes), now)) }
        }

        var count: Int { state.withLock { $0.count } }
        var datagrams: [[UInt8]] { state.withLock { $0.map(\.datagram) } }

        /// Groups of datagrams read together: a new group starts after a pause of over 2 ms.
        var batches: Int {
            state.withLock { arrivals in
                zip(arrivals.dropFirst(), arrivals).filter { $0.0.at - $0.1.at > 2_000_000 }.count
                    + (arrivals.isEmpty ? 0 : 1)
            }
        }

        func reset() { state.withLock { $0.removeAll() } }
    }

    /// Sends until the first datagram is through (the controlled side may select its pair a
    /// moment after connecting), then forgets it.
    private func warmUp(_ pair: ConnectedPair, _ arrivals: Arrivals) async throws {
        try await withDeadline("first datagram through") {
            while arrivals.count == 0 {
                pair.controlling.send([0x80, 0x00])
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        arrivals.reset()
    }

    private static func datagram(_ index: Int, size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index &* 31), count: size)
        withUnsafeBytes(of: UInt32(index).bigEndian) { bytes.replaceSubrange(0..<4, with: $0) }
        return bytes
    }

    @Test("datagrams sent 5 ms apart are read in batches, every one, in order")
    func readsInBatches() async throws {
        let arrivals = Arrivals()
        let pair = try await ConnectedPair.connect(
            controlledHandler: { arrivals.record($0) },
            controlledBatching: ReceiveBatching(maximumDelay: .milliseconds(40))
        )
        try await warmUp(pair, arrivals)
        let sent = (0..<200).map { Self.datagram($0, size: 200) }
        for datagram in sent {
            #expect(pair.controlling.send(datagram))
            try await Task.sleep(for: .milliseconds(5))
        }
        try await withDeadline("every datagram (a lost one never comes)", seconds: 5) {
            while arrivals.count < sent.count { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(arrivals.datagrams == sent)
        // Read one by one, 200 datagrams make about 200 groups. Batched, a second's worth makes
        // about 25 (a wakeup every 40 ms), or about 50 while libnice's own 20 ms check timer
        // still runs, in the first seconds after connecting.
        let batches = arrivals.batches
        #expect(batches <= 100, "datagrams were read in \(batches) wakeups")
        await pair.close()
    }

    @Test("a jump to 6000 full-size datagrams a second loses none: the buffer is grown, the delay shrinks")
    func highRateLosesNothing() async throws {
        let arrivals = Arrivals()
        let pair = try await ConnectedPair.connect(
            controlledHandler: { arrivals.record($0) },
            controlledBatching: ReceiveBatching(maximumDelay: .milliseconds(40))
        )
        try await warmUp(pair, arrivals)
        // Quiet for over a window: the thread then waits the full 40 ms before reading.
        try await Task.sleep(for: .milliseconds(600))
        let sent = (0..<6000).map { Self.datagram($0, size: 1200) }
        for burst in stride(from: 0, to: sent.count, by: 60) {
            for datagram in sent[burst..<burst + 60] { #expect(pair.controlling.send(datagram)) }
            try await Task.sleep(for: .milliseconds(10))
        }
        try await withDeadline("every datagram (a lost one never comes)", seconds: 5) {
            while arrivals.count < sent.count { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(arrivals.datagrams == sent)
        await pair.close()
    }
}
