internal import CPulse
public import ConclaveCore
public import ConclaveMedia
import Synchronization

/// Counters of a microphone.
public struct PulseMicrophoneStatistics: Sendable, Hashable {
    /// 20 ms blocks assembled from the server's fragments.
    public var captured = 0
    /// Blocks handed to the sender.
    public var delivered = 0
    /// Blocks dropped: the queue was full, or they were stale when the sender took a newer one.
    public var dropped = 0
    /// Blocks of silence handed out because none was queued (``PulseMicrophone/nextFrame()`` was
    /// called without waiting).
    public var underruns = 0
    /// Times the stream was recreated (server restarted, source removed).
    public var restarts = 0
}

/// A microphone: a PulseAudio record stream as an `AudioFrameSource` of exact 20 ms blocks
/// (960 samples, 48 kHz mono s16), whatever fragment sizes the server hands over.
///
/// The server delivers fragments of about 10 ms (low latency) on the pulse thread; they are cut
/// into 20 ms blocks and queued. The queue is bounded (``queueCapacity`` blocks): if the sender
/// stalls, the oldest blocks are dropped and counted, and when it takes a block, all but the
/// newest ``freshBlocks`` are dropped, so no backlog becomes a standing delay. The sender waits
/// in ``waitUntilReady()`` (a continuation resumed from the pulse thread) and then takes a block
/// with ``nextFrame()``, which never blocks: with nothing queued it hands out silence and counts
/// an underrun.
///
/// The device paces the sender (``pacedByDevice``): each block is encoded and sent as soon as it
/// is complete, not on the wall clock from the first one. A wall-clock pacer woke the sender a
/// second time for each block that came early, held it back until its slot, and left the
/// device's drift against the system clock to the stale-block drops below. The sender's first
/// wait, and its first wait after the queue overflowed (it was away for the whole queue: a call
/// that publishes again after losing its session), drops everything queued and waits for the
/// next block, so a call starts with a block just completed.
///
/// Muted, every block is zeros: the encoder still runs and packets keep flowing (silence, or
/// DTX), as a muted participant in a call does. The stream is recreated after a server restart,
/// and moves to the default source when its source disappears. ``stop()`` ends the source:
/// ``nextFrame()`` then returns nil.
public final class PulseMicrophone: PulseStream, AudioFrameSource, @unchecked Sendable {
    // @unchecked: `pending` and `pendingCount` are touched only on the pulse thread, `index` only
    // by the one sender; the queue is behind a mutex, mute is atomic.
    /// Samples in one 20 ms block.
    public static let samplesPerBlock = 960
    /// Blocks the queue holds before dropping the oldest (200 ms).
    public static let queueCapacity = 10
    /// Blocks that may wait when the sender takes one (40 ms); older ones are dropped then.
    ///
    /// A sender that fell behind (a stall of its thread) sends what is queued one block per
    /// wait, so a backlog would stay as a standing delay on every word, up to the whole queue
    /// (200 ms, measured by `bench/devices`). Dropping what is stale when taking a block keeps
    /// the microphone's part of the delay under this bound.
    public static let freshBlocks = 2

    public let timeline: FrameTimeline
    public var channels: Int { 1 }
    /// The device paces the blocks: a sender takes each one as ``waitUntilReady()`` returns it.
    public var pacedByDevice: Bool { true }
    private let muted = Atomic<Bool>(false)
    private let queue = Mutex(MicrophoneBlockQueue())
    private var pending = [Int16](repeating: 0, count: PulseMicrophone.samplesPerBlock)
    private var pendingCount = 0
    private var index = 0
    private let silence = [Int16](repeating: 0, count: PulseMicrophone.samplesPerBlock)

    /// Opens `source` (nil: the server's default) on `connection`. Capture starts at once (or when
    /// the server is connected).
    public init(connection: PulseConnection, source: String? = nil, initialTimestamp: UInt32 = 0) {
        timeline = .audio(initialTimestamp: initialTimestamp)
        super.init(connection: connection, device: source)
        startStream()
    }

    /// Whether blocks are silenced.
    public var isMuted: Bool { muted.load(ordering: .relaxed) }

    /// Silences (or not) the blocks handed out from now on.
    public func setMuted(_ value: Bool) { muted.store(value, ordering: .relaxed) }

    /// Flips mute and returns the new state.
    @discardableResult
    public func toggleMute() -> Bool {
        var current = muted.load(ordering: .relaxed)
        while true {
            let (exchanged, original) = muted.compareExchange(expected: current, desired: !current, ordering: .relaxed)
            if exchanged { return !current }
            current = original
        }
    }

    /// The counters so far.
    public var statistics: PulseMicrophoneStatistics {
        var figures = queue.withLock { $0.statistics }
        figures.restarts = restarts
        return figures
    }

    public func waitUntilReady() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now = queue.withLock { queue -> Bool in
                    queue.dropIfStale()
                    if !queue.blocks.isEmpty || queue.ended { return true }
                    queue.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            queue.withLock { $0.takeWaiter() }?.resume(throwing: CancellationError())
        }
    }

    public func nextFrame() throws -> AudioFrame? {
        let taken = queue.withLock { queue -> [Int16]?? in
            if let block = queue.pop(keepingAtMost: Self.freshBlocks) { return .some(block) }
            if queue.ended { return .none }
            queue.statistics.underruns += 1
            return .some(nil)
        }
        guard let taken else { return nil }
        // Silence shares one buffer (copy-on-write): no allocation per muted block.
        let samples = muted.load(ordering: .relaxed) ? silence : (taken ?? silence)
        let frame = try AudioFrame(channels: 1, samples: samples, rtpTimestamp: timeline.rtpTimestamp(forFrame: index))
        index += 1
        return frame
    }

    override var streamDescription: String { "microphone stream" }

    override func didStop() {
        queue.withLock { queue in
            queue.ended = true
            return queue.takeWaiter()
        }?.resume()
    }

    override func makeStream(_ context: OpaquePointer, device: String?) -> OpaquePointer? {
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(AudioFrame.sampleRate), channels: 1)
        guard let stream = pa_stream_new(context, "Conclave microphone", &spec, nil) else { return nil }
        pa_stream_set_read_callback(stream, microphoneReadable, Unmanaged.passUnretained(self).toOpaque())
        // About 10 ms fragments: low latency without waking the thread too often.
        let fragment = UInt32(AudioFrame.sampleRate / 100 * 2)
        var attributes = pa_buffer_attr(
            maxlength: UInt32.max,
            tlength: UInt32.max,
            prebuf: UInt32.max,
            minreq: UInt32.max,
            fragsize: fragment
        )
        guard pa_stream_connect_record(stream, device, &attributes, PA_STREAM_ADJUST_LATENCY) == 0 else {
            pa_stream_unref(stream)
            return nil
        }
        return stream
    }

    /// Reads what the server has; pulse thread.
    fileprivate func readAvailable(_ stream: OpaquePointer) {
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(stream, &data, &bytes) == 0, bytes > 0 else { return }
            let count = bytes / 2
            if let data {
                let samples = UnsafeBufferPointer(start: data.assumingMemoryBound(to: Int16.self), count: count)
                append(samples)
            } else {
                // A hole in the stream (lost fragments): silence of its length keeps the timing.
                appendSilence(count)
            }
            pa_stream_drop(stream)
        }
    }

    private func append(_ samples: UnsafeBufferPointer<Int16>) {
        var offset = 0
        while offset < samples.count {
            let take = min(Self.samplesPerBlock - pendingCount, samples.count - offset)
            pending.withUnsafeMutableBufferPointer { block in
                for position in 0..<take { block[pendingCount + position] = samples[offset + position] }
            }
            pendingCount += take
            offset += take
            if pendingCount == Self.samplesPerBlock { completeBlock() }
        }
    }

    private func appendSilence(_ count: Int) {
        var remaining = count
        while remaining > 0 {
            let take = min(Self.samplesPerBlock - pendingCount, remaining)
            for position in 0..<take { pending[pendingCount + position] = 0 }
            pendingCount += take
            remaining -= take
            if pendingCount == Self.samplesPerBlock { completeBlock() }
        }
    }

    private func completeBlock() {
        let block = pending
        pendingCount = 0
        queue.withLock { queue in
            queue.push(block, capacity: Self.queueCapacity)
            return queue.takeWaiter()
        }?.resume()
    }
}

/// The microphone's queue of whole blocks, shared by the pulse thread and the sender.
struct MicrophoneBlockQueue {
    var blocks: [[Int16]] = []
    var waiter: CheckedContinuation<Void, any Error>?
    var ended = false
    var statistics = PulseMicrophoneStatistics()
    /// Whether what is queued is too old to start the sender's pacing from: true until the first
    /// wait, and again after an overflow.
    var stale = true

    init() { blocks.reserveCapacity(PulseMicrophone.queueCapacity + 1) }

    mutating func push(_ block: [Int16], capacity: Int) {
        statistics.captured += 1
        if blocks.count >= capacity {
            blocks.removeFirst()
            statistics.dropped += 1
            stale = true
        }
        blocks.append(block)
    }

    /// Drops every queued block (counted) when they are stale, so the sender's wait ends with the
    /// next block captured.
    mutating func dropIfStale() {
        guard stale else { return }
        stale = false
        statistics.dropped += blocks.count
        blocks.removeAll(keepingCapacity: true)
    }

    /// The oldest block that is not stale: with more than `limit` queued, the older ones are
    /// dropped (counted) first, and the block handed out fades in from the first one dropped.
    ///
    /// Why the fade: the first block dropped is what continues the sound already sent, and the
    /// block handed out starts wherever the sound was 20 ms or more later. Joined as they are,
    /// the two meet with a step (a click, which Opus spreads into a burst); faded over
    /// ``spliceSamples`` from the continuation, they meet as the playout's splices do.
    mutating func pop(keepingAtMost limit: Int) -> [Int16]? {
        guard !blocks.isEmpty else { return nil }
        var continuation: [Int16]?
        if blocks.count > limit {
            let stale = blocks.count - limit
            continuation = blocks[0]
            blocks.removeFirst(stale)
            statistics.dropped += stale
        }
        statistics.delivered += 1
        var block = blocks.removeFirst()
        if let continuation { Self.fade(&block, from: continuation) }
        return block
    }

    /// Samples over which a block handed out after a drop fades in from the dropped sound (5 ms).
    static let spliceSamples = 240

    /// Blends the start of `block` from `continuation`'s start (all of it at the first sample,
    /// none of it after ``spliceSamples``).
    static func fade(_ block: inout [Int16], from continuation: [Int16]) {
        let count = min(spliceSamples, block.count, continuation.count)
        for index in 0..<count {
            let weight = Int32(index + 1)
            let total = Int32(count + 1)
            let blended = (Int32(continuation[index]) * (total - weight) + Int32(block[index]) * weight) / total
            block[index] = Int16(clamping: blended)
        }
    }

    mutating func takeWaiter() -> CheckedContinuation<Void, any Error>? {
        defer { waiter = nil }
        return waiter
    }
}

/// `pa_stream_request_cb_t`: `void (*)(pa_stream *s, size_t nbytes, void *userdata)`; userdata is
/// the microphone, unretained (cleared before the stream is let go).
private func microphoneReadable(_ stream: OpaquePointer?, _ bytes: Int, _ userdata: UnsafeMutableRawPointer?) {
    guard let stream, let userdata else { return }
    Unmanaged<PulseMicrophone>.fromOpaque(userdata).takeUnretainedValue().readAvailable(stream)
}
