internal import CPulse
import Synchronization

/// What happened to a stream, for status lines and logs.
public enum PulseStreamEvent: Sendable, Hashable {
    /// Playing or recording on `device` (the server's name for it): at start, after a restart,
    /// and when the server moves the stream (PulseAudio moves streams off a removed device to the
    /// default one itself).
    case running(device: String)
    /// The stream died (server gone, device removed); it is being recreated.
    case interrupted(reason: String)
    /// The asked-for device is gone or refused: the stream goes on on the default device.
    case fellBackToDefault(missing: String)
    /// A playback stream's server-side buffer changed size: grown after an underrun (the machine
    /// stalled for longer than the buffer lasted), or shrunk back after a calm period.
    case bufferResized(Duration)
}

/// The lifecycle shared by the microphone and the playback stream: create the stream when the
/// connection's context is ready, recreate it when it dies, and fall back to the server's default
/// device when the named one is gone.
///
/// Subclasses make the stream (``makeStream(_:device:)``) and move the audio; this class owns its
/// state, on the pulse thread only.
public class PulseStream: @unchecked Sendable {
    // @unchecked: `stream`, `phase`, `device` and `usingDefault` are touched only on the pulse
    // thread or under the mainloop lock; the rest is constant or atomic.
    /// Where the stream stands.
    enum Phase {
        /// Not started or stopped.
        case idle
        /// Created, waiting for the server to make it ready.
        case creating
        /// Moving audio.
        case running
        /// Dead; waiting for the context (server lost) or for a retry (stream killed).
        case interrupted
    }

    let connection: PulseConnection
    /// The device asked for; nil is the server's default.
    let requestedDevice: String?
    /// Stream changes, in order; ends at ``stop()``.
    public let events: AsyncStream<PulseStreamEvent>
    private let eventContinuation: AsyncStream<PulseStreamEvent>.Continuation
    private(set) var stream: OpaquePointer?
    private var phase = Phase.idle
    /// True once the named device failed: the stream now follows the default.
    private var usingDefault = false
    private var stopped = false
    /// Failures since the stream last ran, for the retry backoff.
    private var consecutiveFailures = 0
    private let restartCount = Atomic<Int>(0)

    init(connection: PulseConnection, device: String?) {
        self.connection = connection
        requestedDevice = device
        (events, eventContinuation) = AsyncStream.makeStream(
            of: PulseStreamEvent.self,
            bufferingPolicy: .bufferingNewest(64)
        )
    }

    /// How many times the stream was recreated after dying.
    public var restarts: Int { restartCount.load(ordering: .relaxed) }

    /// Starts the stream (now if the server is connected, else when it is back).
    func startStream() {
        connection.withLock {
            stopped = false
            connection.register(self)
        }
    }

    /// Stops the stream for good (idempotent). Not from the pulse thread's callbacks.
    ///
    /// Until then the connection keeps the stream (to recreate it) and the stream its connection:
    /// call this (or close the connection) when done.
    public func stop() {
        connection.withLock {
            stopped = true
            connection.unregister(self)
            destroyStream()
            phase = .idle
        }
        eventContinuation.finish()
        didStop()
    }

    /// Creates and connects the stream on `device` (nil: default); nil if libpulse refused.
    /// Pulse thread. Subclasses install their data callbacks.
    func makeStream(_ context: OpaquePointer, device: String?) -> OpaquePointer? { nil }

    /// Reports `event` to ``events``; pulse thread.
    func report(_ event: PulseStreamEvent) {
        eventContinuation.yield(event)
    }

    /// Called when the stream runs (at start and after each recreation); pulse thread.
    func streamDidStart(_ stream: OpaquePointer) {}

    /// Called after ``stop()``, off the pulse thread.
    func didStop() {}

    /// The stream's name on the server, for messages.
    var streamDescription: String { "stream" }

    // MARK: Pulse thread

    private func create(_ context: OpaquePointer) {
        guard !stopped else { return }
        let device = usingDefault ? nil : requestedDevice
        guard let created = makeStream(context, device: device) else {
            let reason = String(cString: pa_strerror(pa_context_errno(context)))
            streamFailed("cannot create the \(streamDescription): \(reason)")
            return
        }
        pa_stream_set_state_callback(created, streamStateChanged, Unmanaged.passUnretained(self).toOpaque())
        pa_stream_set_moved_callback(created, streamMoved, Unmanaged.passUnretained(self).toOpaque())
        stream = created
        phase = .creating
    }

    private func destroyStream() {
        guard let stream else { return }
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_set_moved_callback(stream, nil, nil)
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_set_underflow_callback(stream, nil, nil)
        pa_stream_set_started_callback(stream, nil, nil)
        if pa_stream_get_state(stream) == PA_STREAM_READY || pa_stream_get_state(stream) == PA_STREAM_CREATING {
            pa_stream_disconnect(stream)
        }
        pa_stream_unref(stream)
        self.stream = nil
    }

    fileprivate func stateDidChange() {
        guard let stream else { return }
        switch pa_stream_get_state(stream) {
        case PA_STREAM_READY:
            phase = .running
            consecutiveFailures = 0
            streamDidStart(stream)
            let name = pa_stream_get_device_name(stream).map { String(cString: $0) } ?? (requestedDevice ?? "default")
            eventContinuation.yield(.running(device: name))
        case PA_STREAM_FAILED, PA_STREAM_TERMINATED:
            let reason =
                connection.readyContext.map { String(cString: pa_strerror(pa_context_errno($0))) } ?? "server gone"
            streamFailed(reason)
        default:
            break
        }
    }

    /// The server moved the stream (its device was removed and PulseAudio rescued the stream, or a
    /// person moved it): report where it runs now.
    fileprivate func didMove() {
        guard let stream, let name = pa_stream_get_device_name(stream) else { return }
        eventContinuation.yield(.running(device: String(cString: name)))
    }

    /// The stream died while the context lives (device removed, stream killed): recreate it, on
    /// the default device when a named one was used.
    private func streamFailed(_ reason: String) {
        destroyStream()
        phase = .interrupted
        guard !stopped else { return }
        eventContinuation.yield(.interrupted(reason: reason))
        if let requestedDevice, !usingDefault {
            usingDefault = true
            eventContinuation.yield(.fellBackToDefault(missing: requestedDevice))
        }
        // A short pause lets the server finish removing the device before the new stream asks
        // for the default; while no device at all takes the stream, retries back off to one a
        // second.
        consecutiveFailures += 1
        let delay = min(.seconds(1), .milliseconds(100) * (1 << min(consecutiveFailures - 1, 4)))
        connection.schedule(after: delay) { [weak self] in
            guard let self, !self.stopped, self.stream == nil, let context = self.connection.readyContext else {
                return
            }
            self.restartCount.add(1, ordering: .relaxed)
            self.create(context)
        }
    }
}

extension PulseStream: PulseContextClient {
    func contextReady(_ context: OpaquePointer) {
        guard stream == nil else { return }
        if phase == .interrupted {
            restartCount.add(1, ordering: .relaxed)
            // A restarted server may have the named device again.
            usingDefault = false
        }
        create(context)
    }

    func contextLost() {
        // The stream belongs to the dead context: drop our reference without touching it more.
        destroyStream()
        // Reported once: the stream's own failure may have come first.
        guard phase != .idle, phase != .interrupted else { return }
        phase = .interrupted
        if !stopped { eventContinuation.yield(.interrupted(reason: "PulseAudio server lost")) }
    }
}

/// `pa_stream_notify_cb_t` for moves; userdata as for ``streamStateChanged(_:_:)``.
private func streamMoved(_ stream: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulseStream>.fromOpaque(userdata).takeUnretainedValue().didMove()
}

/// `pa_stream_notify_cb_t`: `void (*)(pa_stream *s, void *userdata)`; userdata is the
/// ``PulseStream``, unretained (callbacks are cleared before it lets the stream go).
private func streamStateChanged(_ stream: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulseStream>.fromOpaque(userdata).takeUnretainedValue().stateDidChange()
}
