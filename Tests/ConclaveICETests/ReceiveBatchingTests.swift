import ConclaveCore
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
        private struct Log {
            var arrivals: [(datagram: [UInt8], at: UInt64)] = []
            /// The count a wait is for: the handler wakes it only on reaching it, not on every
            /// datagram of thousands.
            var awaited = Int.max
        }

        private let state = Mutex(Log())
        private let reached = ChangeSignal()

        func record(_ bytes: UnsafeRawBufferPointer) {
            let now = DispatchTime.now().uptimeNanoseconds
            let wake = state.withLock { log in
                log.arrivals.append((Array(bytes), now))
                return log.arrivals.count >= log.awaited
            }
            if wake { reached.notify() }
        }

        var count: Int { state.withLock { $0.arrivals.count } }
        var datagrams: [[UInt8]] { state.withLock { $0.arrivals.map(\.datagram) } }

        /// Groups of datagrams read together: a new group starts after a pause of over 2 ms.
        var batches: Int {
            state.withLock { log in
                let arrivals = log.arrivals
                return zip(arrivals.dropFirst(), arrivals).filter { $0.0.at - $0.1.at > 2_000_000 }.count
                    + (arrivals.isEmpty ? 0 : 1)
            }
        }

        func reset() { state.withLock { $0.arrivals.removeAll() } }

        /// Waits until `count` datagrams have arrived (true), or `limit` passes (false). Woken by
        /// the handler, so it ends the moment the last one is in.
        func wait(forCount count: Int, within limit: Duration) async throws -> Bool {
            let deadline = ContinuousClock.now + limit
            defer { state.withLock { $0.awaited = Int.max } }
            while true {
                let generation = reached.generation
                // Set and checked under the handler's lock: an arrival after this sees the target.
                let done = state.withLock { log in
                    log.awaited = count
                    return log.arrivals.count >= count
                }
                if done { return true }
                guard try await reached.wait(after: generation, until: deadline) else {
                    return self.count >= count
                }
            }
        }
    }

    /// A datagram the warm-up sends, and the one that ends it.
    private static let probe: [UInt8] = [0x80, 0x00]
    private static let marker: [UInt8] = [0x80, 0x01]

    /// Sends until the first datagram is through (the controlled side may select its pair a
    /// moment after connecting), then forgets it.
    private func warmUp(_ pair: ConnectedPair, _ arrivals: Arrivals) async throws {
        try await withDeadline("first datagram through") {
            // Each probe waits up to 20 ms for an arrival before the next goes out.
            while arrivals.count == 0 {
                pair.controlling.send(Self.probe)
                _ = try await arrivals.wait(forCount: 1, within: .milliseconds(20))
            }
            // Probes still on their way would be taken for the test's datagrams. Datagrams on the
            // one loopback pair arrive in order: once a marker sent now is in, so is every probe.
            pair.controlling.send(Self.marker)
            while !arrivals.datagrams.contains(Self.marker) {
                _ = try await arrivals.wait(forCount: arrivals.count + 1, within: .seconds(20))
            }
        }
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
            try await Task.sleep(for: .milliseconds(5))  // the scenario: one datagram every 5 ms
        }
        try #require(
            try await arrivals.wait(forCount: sent.count, within: .seconds(5)),
            "every datagram (a lost one never comes)"
        )
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
        // The scenario: quiet for over a window, so the thread then waits the full 40 ms before
        // reading.
        try await Task.sleep(for: .milliseconds(600))
        let sent = (0..<6000).map { Self.datagram($0, size: 1200) }
        for burst in stride(from: 0, to: sent.count, by: 60) {
            for datagram in sent[burst..<burst + 60] { #expect(pair.controlling.send(datagram)) }
            try await Task.sleep(for: .milliseconds(10))  // the scenario: 60 datagrams every 10 ms
        }
        try #require(
            try await arrivals.wait(forCount: sent.count, within: .seconds(5)),
            "every datagram (a lost one never comes)"
        )
        #expect(arrivals.datagrams == sent)
        await pair.close()
    }
}
