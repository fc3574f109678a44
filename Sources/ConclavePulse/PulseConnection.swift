internal import CPulse
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where a connection to the PulseAudio server stands.
public enum PulseConnectionState: Sendable, Hashable {
    /// The first connection attempt is under way.
    case connecting
    /// Connected to `server`; streams may be created.
    case ready(server: String)
    /// The server went away after being reached; attempt `attempt` is scheduled (capped backoff).
    case reconnecting(attempt: Int, reason: String)
    /// The first attempt failed (no server); the connection is over.
    case failed(reason: String)
    /// Closed by its owner.
    case closed
}

/// A stream that lives on a connection: told on the pulse thread when the server context is
/// ready (create the stream) and when it is lost (forget the stream, the context took it along).
protocol PulseContextClient: AnyObject {
    /// The context is ready: create and connect the stream. Pulse thread.
    func contextReady(_ context: OpaquePointer)
    /// The context failed: the stream died with it. Pulse thread.
    func contextLost()
}

/// The one owner of libpulse: a `pa_threaded_mainloop` on its own thread (`conclave-pulse`) and
/// the context connected to the server.
///
/// Every libpulse call happens on that thread (callbacks) or under the mainloop lock
/// (``withLock(_:)``), as libpulse requires. The server is found as libpulse finds it:
/// `PULSE_SERVER`, else the socket in the user's runtime directory. The first connection either
/// succeeds or throws one ``PulseError`` naming the address; once connected, a lost server (killed,
/// restarted) is reconnected with a capped backoff, and the streams made on this connection
/// (``PulseMicrophone``, ``PulsePlayback``) are recreated when it is back. State changes are
/// published on ``events``.
public final class PulseConnection: @unchecked Sendable {
    // @unchecked: the C handles are constants; every `var` below is touched only on the pulse
    // thread or under the mainloop lock, which serialises it with that thread.
    /// Every state change, in order; ends when the connection is closed.
    public let events: AsyncStream<PulseConnectionState>
    private let eventContinuation: AsyncStream<PulseConnectionState>.Continuation
    /// The address the user's setup points at, for messages (libpulse itself looks it up).
    public let serverAddress: String
    private let explicitServer: String?
    private let applicationName: String
    private let mainloop: OpaquePointer
    private let api: UnsafeMutablePointer<pa_mainloop_api>
    private var context: OpaquePointer?
    private var state = PulseConnectionState.connecting
    private var hasBeenReady = false
    private var reconnectAttempt = 0
    private var clients: [ObjectIdentifier: any PulseContextClient] = [:]
    private var firstConnect: CheckedContinuation<Result<Void, PulseError>, Never>?
    private let isClosed = Atomic<Bool>(false)

    /// The longest wait between two reconnection attempts.
    static let maximumBackoff: Duration = .seconds(1)

    /// Connects to the server (`server` nil: libpulse's lookup) and returns once connected.
    ///
    /// Throws `.noServer` with the address and libpulse's reason when nothing answers, e.g.
    /// "no PulseAudio server at unix:/run/user/0/pulse/native: Connection refused".
    public static func connect(
        server: String? = nil,
        applicationName: String = "Conclave"
    ) async throws(PulseError) -> PulseConnection {
        let connection = try PulseConnection(server: server, applicationName: applicationName)
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Void, PulseError>, Never>) in
            connection.withLock {
                connection.firstConnect = continuation
                connection.openContext()
            }
        }
        if case .failure(let error) = result {
            connection.close()
            throw error
        }
        return connection
    }

    private init(server: String?, applicationName: String) throws(PulseError) {
        explicitServer = server
        self.applicationName = applicationName
        serverAddress = Self.describeServer(server)
        (events, eventContinuation) = AsyncStream.makeStream(of: PulseConnectionState.self, bufferingPolicy: .unbounded)
        guard let mainloop = pa_threaded_mainloop_new() else {
            throw PulseError(.server, "cannot create the PulseAudio main loop")
        }
        self.mainloop = mainloop
        api = pa_threaded_mainloop_get_api(mainloop)
        pa_threaded_mainloop_set_name(mainloop, "conclave-pulse")
        guard pa_threaded_mainloop_start(mainloop) == 0 else {
            pa_threaded_mainloop_free(mainloop)
            throw PulseError(.server, "cannot start the PulseAudio main loop thread")
        }
    }

    deinit { close() }

    /// The current state.
    public var currentState: PulseConnectionState { withLock { state } }

    /// Stops the thread and disconnects (idempotent). Streams on this connection stop too. Must
    /// not be called from the pulse thread (a renderer or a callback).
    public func close() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        withLock {
            let streams = Array(clients.values)
            clients.removeAll()
            for client in streams { client.contextLost() }
            dropContext()
            setState(.closed)
        }
        pa_threaded_mainloop_stop(mainloop)
        pa_threaded_mainloop_free(mainloop)
        eventContinuation.finish()
    }

    // MARK: Threading

    /// Runs `body` with the mainloop locked (or directly on the pulse thread, which holds it).
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        if pa_threaded_mainloop_in_thread(mainloop) != 0 { return try body() }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    /// Runs `body` on the pulse thread after `delay`. Pulse thread or under the lock.
    func schedule(after delay: Duration, _ body: @escaping () -> Void) {
        let box = Unmanaged.passRetained(TimerBox(body)).toOpaque()
        var when = timeval()
        pa_gettimeofday(&when)
        let microseconds = delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000
        pa_timeval_add(&when, pa_usec_t(max(0, microseconds)))
        _ = api.pointee.time_new?(api, &when, timerFired, box)
    }

    // MARK: Streams

    /// Adds a stream; told at once if the context is ready. Under the lock.
    func register(_ client: any PulseContextClient) {
        clients[ObjectIdentifier(client)] = client
        if case .ready = state, let context { client.contextReady(context) }
    }

    /// Removes a stream. Under the lock.
    func unregister(_ client: any PulseContextClient) {
        clients[ObjectIdentifier(client)] = nil
    }

    /// The context when ready, for one-off operations. Under the lock.
    var readyContext: OpaquePointer? {
        if case .ready = state { return context }
        return nil
    }

    // MARK: Context lifecycle (pulse thread or under the lock)

    private func openContext() {
        guard !isClosed.load(ordering: .acquiring) else { return }
        guard let context = pa_context_new(api, applicationName) else {
            connectFailed("cannot create a PulseAudio context")
            return
        }
        self.context = context
        pa_context_set_state_callback(context, contextStateChanged, Unmanaged.passUnretained(self).toOpaque())
        if pa_context_connect(context, explicitServer, PA_CONTEXT_NOAUTOSPAWN, nil) < 0, self.context == context {
            connectFailed(String(cString: pa_strerror(pa_context_errno(context))))
        }
    }

    /// Lets the context go. It is unreferenced on the next loop iteration, not here: this runs
    /// inside libpulse's own calls on it (its state callback, `pa_context_connect`).
    private func dropContext() {
        guard let context else { return }
        self.context = nil
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        if isClosed.load(ordering: .acquiring) {
            pa_context_unref(context)
        } else {
            schedule(after: .zero) { pa_context_unref(context) }
        }
    }

    fileprivate func contextStateDidChange() {
        guard let context else { return }
        switch pa_context_get_state(context) {
        case PA_CONTEXT_READY:
            hasBeenReady = true
            reconnectAttempt = 0
            let server = pa_context_get_server(context).map { String(cString: $0) } ?? serverAddress
            setState(.ready(server: server))
            firstConnect?.resume(returning: .success(()))
            firstConnect = nil
            for client in clients.values { client.contextReady(context) }
        case PA_CONTEXT_FAILED:
            connectFailed(String(cString: pa_strerror(pa_context_errno(context))))
        default:
            break
        }
    }

    private func connectFailed(_ reason: String) {
        dropContext()
        guard hasBeenReady else {
            setState(.failed(reason: reason))
            firstConnect?.resume(
                returning: .failure(PulseError(.noServer, "no PulseAudio server at \(serverAddress): \(reason)"))
            )
            firstConnect = nil
            return
        }
        // Lost after being connected: the server was killed or restarted. Streams died with the
        // context; try again, sooner first, then at most every `maximumBackoff`.
        for client in clients.values { client.contextLost() }
        reconnectAttempt += 1
        setState(.reconnecting(attempt: reconnectAttempt, reason: reason))
        let delay = min(Self.maximumBackoff, .milliseconds(50) * (1 << min(reconnectAttempt, 5)))
        schedule(after: delay) { [weak self] in self?.openContext() }
    }

    private func setState(_ next: PulseConnectionState) {
        guard state != next else { return }
        state = next
        eventContinuation.yield(next)
    }

    /// The address libpulse will try first, as a person would write it.
    static func describeServer(_ explicit: String?) -> String {
        if let explicit { return explicit }
        if let variable = getenv("PULSE_SERVER"), variable.pointee != 0 { return String(cString: variable) }
        if let runtime = getenv("PULSE_RUNTIME_PATH"), runtime.pointee != 0 {
            return "unix:\(String(cString: runtime))/native"
        }
        if let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 {
            return "unix:\(String(cString: runtime))/pulse/native"
        }
        return "unix:/run/user/\(getuid())/pulse/native"
    }
}

/// `pa_context_notify_cb_t`: `void (*)(pa_context *c, void *userdata)`; userdata is the
/// connection, unretained (the callback is cleared before the connection goes).
private func contextStateChanged(_ context: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<PulseConnection>.fromOpaque(userdata).takeUnretainedValue().contextStateDidChange()
}

/// A closure run once by a mainloop timer.
private final class TimerBox {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// `pa_time_event_cb_t`: `void (*)(pa_mainloop_api *a, pa_time_event *e, const struct timeval *tv,
/// void *userdata)`; userdata is a retained ``TimerBox``, released here (the timer fires once).
private func timerFired(
    _ api: UnsafeMutablePointer<pa_mainloop_api>?,
    _ event: OpaquePointer?,
    _ when: UnsafePointer<timeval>?,
    _ userdata: UnsafeMutableRawPointer?
) {
    if let api, let event { api.pointee.time_free?(event) }
    guard let userdata else { return }
    let box = Unmanaged<TimerBox>.fromOpaque(userdata).takeRetainedValue()
    box.body()
}
