import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import Foundation
import Synchronization
import Testing

/// A live source (a microphone) behind the Opus encoder: while DTX suppresses silent blocks, the
/// encoder must wait for the source's next block, never ask for one the source does not have.
@Suite struct LiveAudioSourceTests {
    @Test func dtxSilenceWaitsForTheLiveSourceInsteadOfReadingItEmpty() async throws {
        let live = FakeLiveSource()
        let encoded = EncodingAudioSource(
            raw: live,
            encoder: try OpusAudioEncoder(configuration: OpusEncoderConfiguration(dtx: true))
        )
        let consumer = Task {
            var packets = 0
            while true {
                try await encoded.waitUntilReady()
                guard try encoded.nextFrame() != nil else { return packets }
                packets += 1
            }
        }
        // One block at a time, as a microphone delivers them: after each, the consumer waits
        // for the next instead of reading the source empty.
        var waits = live.emptyWaits.makeAsyncIterator()
        _ = await waits.next()
        for _ in 0..<60 {
            live.push(silent: true)
            _ = await waits.next()
        }
        #expect(live.emptyReads == 0, "nextFrame() was called on an empty live source")

        live.push(silent: false)
        _ = await waits.next()
        live.finish()
        let packets = try await consumer.value
        #expect(packets < 61, "DTX suppressed some silent blocks")
        #expect(packets > 0)
        #expect(live.emptyReads == 0)
    }

    /// A microphone's blocks go out as its device delivers them: through the encoder, the sender
    /// gets no wall-clock pacer for it (which held early blocks back and woke a second time for
    /// each), while a tone keeps its real-time pacer.
    @Test func aDevicePacedSourceIsSentWithoutAWallClockPacer() throws {
        let live = EncodingAudioSource(raw: FakeLiveSource(), encoder: try OpusAudioEncoder())
        #expect(live.pacedByDevice)
        #expect(MediaPacer(sending: live).mode == .unpaced)
        let tone = EncodingAudioSource(raw: try ToneSource(), encoder: try OpusAudioEncoder())
        #expect(!tone.pacedByDevice)
        #expect(MediaPacer(sending: tone).mode == .realTime)
    }
}

/// Blocks pushed by the test; `waitUntilReady()` suspends while none is queued and reports each
/// such wait on `emptyWaits`.
private final class FakeLiveSource: AudioFrameSource, @unchecked Sendable {
    // @unchecked: the state is behind a mutex.
    private struct State {
        var blocks: [[Int16]] = []
        var waiter: CheckedContinuation<Void, Never>?
        var ended = false
        var emptyReads = 0
    }

    let timeline = FrameTimeline.audio()
    var channels: Int { 1 }
    var pacedByDevice: Bool { true }
    let emptyWaits: AsyncStream<Void>
    private let emptyWaitContinuation: AsyncStream<Void>.Continuation
    private let state = Mutex(State())
    private var index = 0

    init() { (emptyWaits, emptyWaitContinuation) = AsyncStream.makeStream(of: Void.self) }

    var emptyReads: Int { state.withLock { $0.emptyReads } }

    func push(silent: Bool) {
        let block = (0..<960).map { silent ? Int16(0) : Int16(8_000 * sin(Double($0) / 7)) }
        let waiter = state.withLock { state in
            state.blocks.append(block)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func finish() {
        let waiter = state.withLock { state in
            state.ended = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func waitUntilReady() async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if !state.blocks.isEmpty || state.ended { return true }
                state.waiter = continuation
                return false
            }
            if now {
                continuation.resume()
            } else {
                emptyWaitContinuation.yield()
            }
        }
    }

    func nextFrame() throws -> AudioFrame? {
        let block = state.withLock { state -> [Int16]?? in
            if !state.blocks.isEmpty { return .some(state.blocks.removeFirst()) }
            if state.ended { return .none }
            state.emptyReads += 1
            return .some(nil)
        }
        guard let block else { return nil }
        let samples = block ?? [Int16](repeating: 0, count: 960)
        defer { index += 1 }
        return try AudioFrame(channels: 1, samples: samples, rtpTimestamp: timeline.rtpTimestamp(forFrame: index))
    }
}
