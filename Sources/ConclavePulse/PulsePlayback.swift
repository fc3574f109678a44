internal import CPulse
internal import ConclaveCore
import Synchronization

/// What fills the speaker: asked on the pulse thread for exactly the samples the server wants.
///
/// `render(into:)` runs on the `conclave-pulse` thread with the mainloop locked, so it must not
/// block, wait for a lock held across I/O, or call back into ConclavePulse: a mixer reads what its
/// receive side already queued and fills the rest with concealment or silence. The buffer holds
/// interleaved 48 kHz s16 samples of ``PulsePlayback/channels`` channels; every sample must be
/// written.
public protocol PlaybackRenderer: AnyObject, Sendable {
    /// Fills `buffer` completely.
    func render(into buffer: UnsafeMutableBufferPointer<Int16>)
}

/// Counters of a playback stream.
public struct PulsePlaybackStatistics: Sendable, Hashable {
    /// Samples (per channel) rendered and written.
    public var rendered = 0
    /// Times the server ran out of data (a renderer too slow, the thread starved).
    public var underruns = 0
    /// Times the stream was recreated (server restarted, sink removed).
    public var restarts = 0
    /// The latency asked of the server, as it last accepted it: 40 ms, grown after underruns (see
    /// ``PlaybackBufferSize``).
    public var buffer: Duration = .zero
    /// The part of ``buffer`` the server queues for the stream (`tlength` as granted; the rest is
    /// the sink's own buffer, PulseAudio splits the latency between the two). Zero before the
    /// stream first ran.
    public var serverQueue: Duration = .zero
    /// Times the buffer grew after an underrun.
    public var bufferGrowths = 0
    /// The longest a request of the server took to render and write: a slow renderer.
    public var longestRender: Duration = .zero
    /// The longest time between two requests of the server (about 10 ms when all is well): a
    /// longer one with short renders is the pulse thread or the server kept from running.
    public var longestWait: Duration = .zero
}

/// A speaker: a PulseAudio playback stream at 48 kHz s16 that pulls its audio from a
/// ``PlaybackRenderer``.
///
/// Pull model: when the server wants data, the stream's write callback asks the renderer for
/// exactly that much, on the pulse thread; nothing is buffered here. The target latency starts at
/// 40 ms (`tlength`), small enough for a conversation and large enough to ride out a scheduling
/// hiccup. Underruns are counted, and each grows the buffer by 20 ms up to `maximumLatency`
/// (``PlaybackBufferSize``): a machine that stalls for longer than the buffer would otherwise
/// stall into silence again. When the server is killed and comes back, the stream is recreated
/// (with the buffer grown so far); when its sink disappears, it goes on on the default sink.
public final class PulsePlayback: PulseStream, @unchecked Sendable {
    // @unchecked: see PulseStream; counters are atomic.
    /// Channels of the samples the renderer writes (1 or 2).
    public let channels: Int
    /// The buffer a speaker starts with (40 ms).
    public static let defaultLatency: Duration = .milliseconds(40)
    /// The largest a speaker's buffer grows after underruns (80 ms): mouth-to-ear on a quiet
    /// machine is about 80 ms, and a conversation suffers past about 150.
    public static let defaultMaximumLatency: Duration = .milliseconds(80)
    /// The server's target buffer, as asked, and the smallest it gets.
    public let targetLatency: Duration
    private let renderer: any PlaybackRenderer
    private let renderedSamples = Atomic<Int>(0)
    private let underrunCount = Atomic<Int>(0)
    /// The buffer's size; pulse thread only.
    private var bufferSize: PlaybackBufferSize
    /// The latency the server accepted and the queue it granted, in microseconds, and
    /// `bufferSize.growths`, for other threads.
    private let bufferMicroseconds = Atomic<Int>(0)
    private let queueMicroseconds = Atomic<Int>(0)
    private let growthCount = Atomic<Int>(0)
    /// When the server last asked for data; pulse thread only.
    private var lastRequest: ContinuousClock.Instant?
    /// From when waits between requests count: a second after the server started playing the
    /// stream, since in that second it fills its own buffers and wakes the sink (waits of up to
    /// 1.8 s were seen there with nothing to hear). Nil until it starts; pulse thread only.
    private var waitsCountFrom: ContinuousClock.Instant?
    private let longestRenderMicroseconds = Atomic<Int>(0)
    private let longestWaitMicroseconds = Atomic<Int>(0)

    /// Plays `renderer` on `sink` (nil: the server's default). Playback starts at once (or when the
    /// server is connected).
    public init(
        connection: PulseConnection,
        sink: String? = nil,
        channels: Int = 1,
        targetLatency: Duration = PulsePlayback.defaultLatency,
        maximumLatency: Duration = PulsePlayback.defaultMaximumLatency,
        renderer: any PlaybackRenderer
    ) {
        self.channels = channels == 2 ? 2 : 1
        self.targetLatency = max(.milliseconds(10), targetLatency)
        self.renderer = renderer
        bufferSize = PlaybackBufferSize(floor: self.targetLatency, ceiling: maximumLatency)
        super.init(connection: connection, device: sink)
        startStream()
    }

    /// The counters so far.
    public var statistics: PulsePlaybackStatistics {
        PulsePlaybackStatistics(
            rendered: renderedSamples.load(ordering: .relaxed),
            underruns: underrunCount.load(ordering: .relaxed),
            restarts: restarts,
            buffer: .microseconds(bufferMicroseconds.load(ordering: .relaxed)),
            serverQueue: .microseconds(queueMicroseconds.load(ordering: .relaxed)),
            bufferGrowths: growthCount.load(ordering: .relaxed),
            longestRender: .microseconds(longestRenderMicroseconds.load(ordering: .relaxed)),
            longestWait: .microseconds(longestWaitMicroseconds.load(ordering: .relaxed))
        )
    }

    override var streamDescription: String { "playback stream" }

    override func makeStream(_ context: OpaquePointer, device: String?) -> OpaquePointer? {
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: 48_000, channels: UInt8(channels))
        guard let stream = pa_stream_new(context, "Conclave call", &spec, nil) else { return nil }
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_stream_set_write_callback(stream, playbackWritable, me)
        pa_stream_set_underflow_callback(stream, playbackUnderflow, me)
        pa_stream_set_started_callback(stream, playbackStarted, me)
        waitsCountFrom = nil
        var attributes = bufferAttributes(bufferSize.current)
        guard pa_stream_connect_playback(stream, device, &attributes, PA_STREAM_ADJUST_LATENCY, nil, nil) == 0 else {
            pa_stream_unref(stream)
            return nil
        }
        return stream
    }

    /// Renders `bytes` for the server; pulse thread.
    fileprivate func write(_ stream: OpaquePointer, bytes: Int) {
        let now = ContinuousClock.now
        if let waitsCountFrom, now >= waitsCountFrom, let lastRequest {
            longestWaitMicroseconds.max(Self.microseconds(now - lastRequest), ordering: .relaxed)
        }
        lastRequest = now
        defer { longestRenderMicroseconds.max(Self.microseconds(.now - now), ordering: .relaxed) }
        if let smaller = bufferSize.elapsed(to: now) { resize(stream, to: smaller) }
        let frameBytes = 2 * channels
        var remaining = bytes - bytes % frameBytes
        while remaining > 0 {
            var data: UnsafeMutableRawPointer?
            var size = remaining
            guard pa_stream_begin_write(stream, &data, &size) == 0, let data else { return }
            size = min(size, remaining)
            size -= size % frameBytes
            guard size > 0 else {
                pa_stream_cancel_write(stream)
                return
            }
            let count = size / 2
            let samples = data.bindMemory(to: Int16.self, capacity: count)
            renderer.render(into: UnsafeMutableBufferPointer(start: samples, count: count))
            guard pa_stream_write(stream, data, size, nil, 0, PA_SEEK_RELATIVE) == 0 else { return }
            renderedSamples.add(count / channels, ordering: .relaxed)
            remaining -= size
        }
    }

    /// The server started playing the stream (at first, and after an underrun once refilled).
    fileprivate func started() {
        if waitsCountFrom == nil { waitsCountFrom = .now + .seconds(1) }
    }

    fileprivate func underflow(_ stream: OpaquePointer) {
        underrunCount.add(1, ordering: .relaxed)
        guard let larger = bufferSize.underrun(at: .now) else { return }
        growthCount.add(1, ordering: .relaxed)
        resize(stream, to: larger)
    }

    /// Asks the server for a buffer of `size`; pulse thread. The server applies it on its own
    /// time: a larger one shows as a request for the difference, a smaller one as requests that
    /// wait until the queue has drained to it.
    private func resize(_ stream: OpaquePointer, to size: Duration) {
        var attributes = bufferAttributes(size)
        let me = Unmanaged.passUnretained(self).toOpaque()
        if let operation = pa_stream_set_buffer_attr(stream, &attributes, playbackResized, me) {
            pa_operation_unref(operation)
        }
    }

    override func streamDidStart(_ stream: OpaquePointer) {
        lastRequest = nil
        accepted(stream)
    }

    /// Keeps what the server accepted: the asked latency, and the queue it granted for it (read
    /// back from the server's reply); pulse thread. A change of the latency is reported.
    fileprivate func accepted(_ stream: OpaquePointer) {
        if let attributes = pa_stream_get_buffer_attr(stream) {
            queueMicroseconds.store(Int(attributes.pointee.tlength) * 1000 / bytesPerMillisecond, ordering: .relaxed)
        }
        let size = Self.microseconds(bufferSize.current)
        let previous = bufferMicroseconds.exchange(size, ordering: .relaxed)
        if previous != 0, previous != size { report(.bufferResized(bufferSize.current)) }
    }

    /// The attributes of a buffer of `size`: the server asks for more once 10 ms have played.
    private func bufferAttributes(_ size: Duration) -> pa_buffer_attr {
        let milliseconds = Int(size.ticks(clockRate: 1000))
        return pa_buffer_attr(
            maxlength: UInt32.max,
            tlength: UInt32(clamping: max(10, milliseconds) * bytesPerMillisecond),
            prebuf: UInt32.max,
            minreq: UInt32(10 * bytesPerMillisecond),
            fragsize: UInt32.max
        )
    }

    /// Bytes of a millisecond of the stream's 48 kHz s16 samples.
    private var bytesPerMillisecond: Int { 48 * 2 * channels }

    private static func microseconds(_ duration: Duration) -> Int { Int(duration.ticks(clockRate: 1_000_000)) }
}

/// `pa_stream_request_cb_t`: `void (*)(pa_stream *s, size_t nbytes, void *userdata)`; userdata is
/// the playback, unretained (cleared before the stream is let go).
private func playbackWritable(_ stream: OpaquePointer?, _ bytes: Int, _ userdata: UnsafeMutableRawPointer?) {
    guard let stream, let userdata else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().write(stream, bytes: bytes)
}

/// `pa_stream_success_cb_t` of a resize; userdata as for ``playbackWritable(_:_:_:)`` (the
/// operation is cancelled, without a call, when the stream goes).
private func playbackResized(_ stream: OpaquePointer?, _ success: Int32, _ userdata: UnsafeMutableRawPointer?) {
    guard let stream, let userdata, success != 0 else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().accepted(stream)
}

/// `pa_stream_notify_cb_t` for the start of playback.
private func playbackStarted(_ stream: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().started()
}

/// `pa_stream_notify_cb_t` for underflows.
private func playbackUnderflow(_ stream: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let stream, let userdata else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().underflow(stream)
}
