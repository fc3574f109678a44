internal import CPulse
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
}

/// A speaker: a PulseAudio playback stream at 48 kHz s16 that pulls its audio from a
/// ``PlaybackRenderer``.
///
/// Pull model: when the server wants data, the stream's write callback asks the renderer for
/// exactly that much, on the pulse thread; nothing is buffered here. The target latency is about
/// 40 ms (`tlength`), small enough for a conversation and large enough to ride out a scheduling
/// hiccup. Underruns are counted. When the server is killed and comes back, the stream is
/// recreated; when its sink disappears, it goes on on the default sink.
public final class PulsePlayback: PulseStream, @unchecked Sendable {
    // @unchecked: see PulseStream; counters are atomic.
    /// Channels of the samples the renderer writes (1 or 2).
    public let channels: Int
    /// The server's target buffer, as asked.
    public let targetLatency: Duration
    private let renderer: any PlaybackRenderer
    private let renderedSamples = Atomic<Int>(0)
    private let underrunCount = Atomic<Int>(0)

    /// Plays `renderer` on `sink` (nil: the server's default). Playback starts at once (or when the
    /// server is connected).
    public init(
        connection: PulseConnection,
        sink: String? = nil,
        channels: Int = 1,
        targetLatency: Duration = .milliseconds(40),
        renderer: any PlaybackRenderer
    ) {
        self.channels = channels == 2 ? 2 : 1
        self.targetLatency = targetLatency
        self.renderer = renderer
        super.init(connection: connection, device: sink)
        startStream()
    }

    /// The counters so far.
    public var statistics: PulsePlaybackStatistics {
        PulsePlaybackStatistics(
            rendered: renderedSamples.load(ordering: .relaxed),
            underruns: underrunCount.load(ordering: .relaxed),
            restarts: restarts
        )
    }

    override var streamDescription: String { "playback stream" }

    override func makeStream(_ context: OpaquePointer, device: String?) -> OpaquePointer? {
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: 48_000, channels: UInt8(channels))
        guard let stream = pa_stream_new(context, "Conclave call", &spec, nil) else { return nil }
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_stream_set_write_callback(stream, playbackWritable, me)
        pa_stream_set_underflow_callback(stream, playbackUnderflow, me)
        let milliseconds = Int(
            targetLatency.components.seconds * 1000 + targetLatency.components.attoseconds / 1_000_000_000_000_000
        )
        let bytesPerMillisecond = 48 * 2 * channels
        var attributes = pa_buffer_attr(
            maxlength: UInt32.max,
            tlength: UInt32(max(10, milliseconds) * bytesPerMillisecond),
            prebuf: UInt32.max,
            minreq: UInt32(10 * bytesPerMillisecond),
            fragsize: UInt32.max
        )
        guard pa_stream_connect_playback(stream, device, &attributes, PA_STREAM_ADJUST_LATENCY, nil, nil) == 0 else {
            pa_stream_unref(stream)
            return nil
        }
        return stream
    }

    /// Renders `bytes` for the server; pulse thread.
    fileprivate func write(_ stream: OpaquePointer, bytes: Int) {
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

    fileprivate func underflow() { underrunCount.add(1, ordering: .relaxed) }
}

/// `pa_stream_request_cb_t`: `void (*)(pa_stream *s, size_t nbytes, void *userdata)`; userdata is
/// the playback, unretained (cleared before the stream is let go).
private func playbackWritable(_ stream: OpaquePointer?, _ bytes: Int, _ userdata: UnsafeMutableRawPointer?) {
    guard let stream, let userdata else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().write(stream, bytes: bytes)
}

/// `pa_stream_notify_cb_t` for underflows.
private func playbackUnderflow(_ stream: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulsePlayback>.fromOpaque(userdata).takeUnretainedValue().underflow()
}
