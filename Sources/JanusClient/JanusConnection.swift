public import ConclaveWebSocket
import Foundation
import JanusProtocol
import Logging
import Synchronization

/// A parsed ws:// or wss:// URL (from ConclaveWebSocket, named here for JanusClient's callers).
public typealias WebSocketURL = ConclaveWebSocket.WebSocketURL
/// TLS settings for wss:// URLs (from ConclaveWebSocket).
public typealias TLSOptions = ConclaveWebSocket.TLSOptions

/// A connection to a Janus server over its WebSocket API.
///
/// The connection assigns each request a unique transaction and resolves it from the matching
/// reply: `success` or `error` for core requests, `ack` for `keepalive` and `trickle`, and for plugin
/// `message` requests either a synchronous `success` or an `ack` followed by an `event` with the same
/// transaction. Messages that answer no pending request are routed by `sender` to their handle's
/// event stream (messages for a handle that is being attached are held briefly until it exists).
///
/// When the WebSocket drops, every outstanding request fails with `.connectionClosed`, the connection
/// reconnects with exponential backoff, and every live session is `claim`ed on the new socket, so
/// handles keep receiving their events. A session Janus no longer knows (it expired, or Janus
/// restarted) is reported as lost on its ``JanusSession/events`` stream.
///
/// The rules live in ``JanusClientCore``, a state machine without I/O; this class is its shell. It
/// keeps the core under one lock and feeds it from whichever thread has news: the caller's for a
/// request, the transport's for a reply, a timer task for timeouts and keepalives. A reply resumes
/// its caller straight from the transport's thread, with no stream or actor in between, so a
/// request costs one thread hop each way. The request methods here and on sessions and handles
/// are `nonisolated(nonsending)`: they run on the caller's executor, so a caller on an actor (the
/// main actor, say) does not also hop to the global executor and back around every request.
public final class JanusConnection: Sendable {
    /// How to connect and behave.
    public struct Options: Sendable {
        /// Janus's `api_secret`, sent as `apisecret` with every request.
        public var apiSecret: String?
        /// A stored-token auth token, sent as `token` with every request.
        public var token: String?
        /// TLS settings for wss:// URLs.
        public var tls: TLSOptions
        /// How long a request may wait for its reply.
        public var requestTimeout: Duration
        /// How often each session sends a keepalive (well under Janus's `session_timeout`, 60 s by default).
        public var keepaliveInterval: Duration
        /// Reconnect after an unexpected drop, or nil to give up at once.
        public var reconnect: ReconnectPolicy?
        /// Makes the transport for each connection attempt; nil for Janus's WebSocket API at the
        /// URL. Tests pass an in-memory Janus here, through every layer that takes options.
        public var transport: (@Sendable (WebSocketURL) -> any JanusTransport)?

        /// Creates options with sensible defaults: 10 s request timeout, 25 s keepalive, reconnect on.
        public init(
            apiSecret: String? = nil,
            token: String? = nil,
            tls: TLSOptions = TLSOptions(),
            requestTimeout: Duration = .seconds(10),
            keepaliveInterval: Duration = .seconds(25),
            reconnect: ReconnectPolicy? = ReconnectPolicy(),
            transport: (@Sendable (WebSocketURL) -> any JanusTransport)? = nil
        ) {
            self.apiSecret = apiSecret
            self.token = token
            self.tls = tls
            self.requestTimeout = requestTimeout
            self.keepaliveInterval = keepaliveInterval
            self.reconnect = reconnect
            self.transport = transport
        }
    }

    /// Backoff for reconnecting after a drop.
    public struct ReconnectPolicy: Sendable {
        /// The first wait before reconnecting.
        public var initialDelay: Duration
        /// The longest wait between attempts.
        public var maximumDelay: Duration
        /// Give up after this long (Janus's `reclaim_session_timeout` bounds what a claim can save).
        public var window: Duration

        /// Creates a policy: 250 ms doubling up to 4 s, for at most 60 s.
        public init(
            initialDelay: Duration = .milliseconds(250),
            maximumDelay: Duration = .seconds(4),
            window: Duration = .seconds(60)
        ) {
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.window = window
        }
    }

    /// The connection's state, as published on ``states``.
    public enum State: Sendable, Hashable {
        case connected
        /// The socket dropped; reconnect attempt number `attempt` is under way.
        case reconnecting(attempt: Int)
        /// Reconnected and every live session claimed.
        case reconnected
        /// Closed for good: by ``close()`` (nil) or after reconnecting failed.
        case closed(JanusClientError?)
    }

    /// The server's URL.
    public let url: WebSocketURL
    /// State changes, for status displays and recovery logic.
    public let states: AsyncStream<State>
    private let stateContinuation: AsyncStream<State>.Continuation
    let options: Options
    let logger: Logger
    private let makeTransport: @Sendable () -> any JanusTransport
    private let shell: Mutex<Shell>
    /// Numbers callers, so that a cancelled one finds its queued request (no lock for that).
    private let nextWaiter = Atomic<UInt64>(0)

    /// A caller waiting for a reply; the id finds it again when its task is cancelled.
    struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<JanusMessage, any Error>
    }

    typealias Core = JanusClientCore<Waiter>

    /// Everything that changes, under one lock: the core and what its actions act on.
    private struct Shell {
        var core: Core
        var transport: (any JanusTransport)?
        /// Counts transports; events of an older one are ignored.
        var generation = 0
        var closedByUser = false
        var handleStreams: [UInt64: AsyncStream<JanusMessage>.Continuation] = [:]
        var sessionStreams: [UInt64: AsyncStream<JanusSession.Event>.Continuation] = [:]
        /// The one timer (timeouts and keepalives) and when it fires.
        var timer: Task<Void, Never>?
        var timerDeadline: ContinuousClock.Instant?
    }

    /// Messages from Janus that could not be parsed (they are logged and dropped).
    public var malformedMessages: Int { shell.withLock { $0.core.malformedMessages } }

    private init(
        url: WebSocketURL,
        options: Options,
        logger: Logger,
        makeTransport: @escaping @Sendable () -> any JanusTransport
    ) {
        self.url = url
        self.options = options
        var logger = logger
        logger[metadataKey: "janus"] = "\(url)"
        self.logger = logger
        self.makeTransport = makeTransport
        (states, stateContinuation) = AsyncStream.makeStream(of: State.self, bufferingPolicy: .bufferingNewest(32))
        var random = SystemRandomNumberGenerator()
        let prefix = String(UInt32.random(in: 0...UInt32.max, using: &random), radix: 36) + "-"
        let configuration = Core.Configuration(
            url: "\(url)",
            apiSecret: options.apiSecret,
            token: options.token,
            requestTimeout: options.requestTimeout,
            keepaliveInterval: options.keepaliveInterval,
            reconnect: options.reconnect,
            transactionPrefix: prefix
        )
        shell = Mutex(Shell(core: Core(configuration: configuration)))
    }

    /// Connects to a Janus WebSocket endpoint (`ws://host:8188` or `wss://...`), or to whatever
    /// ``Options/transport`` makes for that URL.
    ///
    /// Throws ``JanusClientError`` with `.invalidURL`, `.unreachable`, `.tlsFailure` or
    /// `.handshakeRejected` when no Janus session can be opened there.
    public static func connect(
        to url: String,
        options: Options = Options(),
        logger: Logger = Logger(label: "conclave.janus")
    ) async throws -> JanusConnection {
        let parsed: WebSocketURL
        do {
            parsed = try WebSocketURL(url)
        } catch {
            throw JanusClientError(error)
        }
        let make: @Sendable () -> any JanusTransport
        if let factory = options.transport {
            make = { factory(parsed) }
        } else {
            let tls = options.tls
            make = { JanusWebSocketTransport(url: parsed, tls: tls, logger: logger) }
        }
        return try await connect(url: parsed, transport: make, options: options, logger: logger)
    }

    /// Connects through transports that `transport` makes (one per attempt: reconnecting makes a
    /// new one); `url` names the server in messages.
    public static func connect(
        url: WebSocketURL,
        transport: @escaping @Sendable () -> any JanusTransport,
        options: Options = Options(),
        logger: Logger = Logger(label: "conclave.janus")
    ) async throws(JanusClientError) -> JanusConnection {
        let connection = JanusConnection(url: url, options: options, logger: logger, makeTransport: transport)
        try await connection.openTransport()
        return connection
    }

    /// Creates a session (and starts its keepalive).
    nonisolated(nonsending) public func createSession() async throws -> JanusSession {
        let reply = try await send(.create())
        guard let id = reply.createdID else {
            throw JanusClientError(.unexpectedReply, "Janus's reply to create has no session id")
        }
        return JanusSession(id: id, connection: self, events: registerSession(id))
    }

    /// Closes the connection. Outstanding requests fail with `.connectionClosed`; sessions are left for
    /// Janus to expire (destroy them first for a clean exit).
    public func close() async {
        let (transport, effects) = shell.withLock { shell in
            shell.closedByUser = true
            let effects = resolve(shell.core.close(), in: &shell)
            shell.timer?.cancel()
            shell.timer = nil
            defer { shell.transport = nil }
            return (shell.transport, effects)
        }
        perform(effects, on: nil)
        await transport?.close()
    }

    /// Sends a request and waits for its reply.
    ///
    /// Requests made while the connection reconnects wait until the sessions are claimed again
    /// (within their timeout); cancelling the task ends such a wait with `CancellationError`.
    ///
    /// Throws ``JanusClientError``: `.janus` when Janus answers with an error (the core's, not a
    /// plugin's: plugin errors arrive inside the reply's plugin data), `.timeout`, `.connectionClosed`.
    nonisolated(nonsending) public func send(_ request: JanusRequest, timeout: Duration? = nil) async throws
        -> JanusMessage
    {
        try await send(request, timeout: timeout, isolation: #isolation)
    }

    /// ``send(_:timeout:)`` with the caller's isolation as a parameter: the cancellation handler's
    /// operation, a closure, runs on the caller's executor only when it captures an `isolated`
    /// parameter (it does not inherit a `nonisolated(nonsending)` function's isolation).
    private func send(
        _ request: JanusRequest,
        timeout: Duration?,
        isolation: isolated (any Actor)?
    ) async throws -> JanusMessage {
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            _ = isolation  // the capture that keeps this closure on the caller's executor
            return try await withCheckedThrowingContinuation { continuation in
                let waiter = Waiter(id: id, continuation: continuation)
                drive { $0.core.request(request, timeout: timeout, waiter: waiter, now: .now) }
                // Cancelled before the request was queued: the handler below found nothing yet.
                if Task.isCancelled { cancelQueued(id) }
            }
        } onCancel: {
            cancelQueued(id)
        }
    }

    /// Ends the wait of a caller whose task was cancelled, if its request is still queued.
    private func cancelQueued(_ id: UInt64) {
        let cancelled = shell.withLock { $0.core.cancelQueued { $0.id == id } }
        for waiter in cancelled { waiter.continuation.resume(throwing: CancellationError()) }
    }

    // MARK: Sessions and handles

    func registerSession(_ id: UInt64) -> AsyncStream<JanusSession.Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: JanusSession.Event.self)
        drive { shell in
            shell.sessionStreams[id] = continuation
            shell.core.sessionCreated(id, now: .now)
            return []
        }
        return stream
    }

    func stopKeepalive(_ id: UInt64) {
        shell.withLock { $0.core.stopKeepalive(id) }
    }

    func unregisterSession(_ id: UInt64) {
        let stream = shell.withLock { shell in
            shell.core.sessionDestroyed(id)
            return shell.sessionStreams.removeValue(forKey: id)
        }
        stream?.finish()
    }

    func registerHandle(_ id: UInt64) -> AsyncStream<JanusMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: JanusMessage.self)
        shell.withLock { shell in
            shell.handleStreams[id] = continuation
            for message in shell.core.handleAttached(id) { continuation.yield(message) }
        }
        return stream
    }

    func unregisterHandle(_ id: UInt64) {
        let stream = shell.withLock { shell in
            shell.core.handleDetached(id)
            return shell.handleStreams.removeValue(forKey: id)
        }
        stream?.finish()
    }

    /// Closes the transport abruptly, as a network failure would, to exercise reconnect and claim.
    package func dropConnectionForTesting() async {
        let transport = shell.withLock { $0.transport }
        await transport?.abort()
    }

    // MARK: Transport lifecycle

    /// Opens a new transport; on success the core learns that it is up.
    private func openTransport() async throws(JanusClientError) {
        let transport = makeTransport()
        let generation = shell.withLock { shell in
            shell.generation += 1
            shell.transport = transport
            return shell.generation
        }
        do {
            try await transport.open { [weak self] event in self?.transportEvent(event, generation: generation) }
        } catch {
            shell.withLock { shell in
                if shell.generation == generation { shell.transport = nil }
            }
            throw error
        }
        var current = false
        drive { shell in
            guard shell.generation == generation, !shell.closedByUser else { return [] }
            current = true
            return shell.core.transportUp(now: .now)
        }
        if !current {
            await transport.close()
            throw JanusClientError(.connectionClosed, "the connection to \(url) was closed")
        }
    }

    /// Runs on the transport's thread: a reply resumes its caller from here.
    private func transportEvent(_ event: JanusTransportEvent, generation: Int) {
        if case .message(let text) = event { logger.trace("received", metadata: ["message": "\(text)"]) }
        drive { shell in
            guard shell.generation == generation else { return [] }
            switch event {
            case .message(let text):
                return shell.core.received(text, now: .now)
            case .closed(let error):
                shell.transport = nil
                guard !shell.closedByUser else { return [] }
                let failure = error ?? JanusClientError(.connectionClosed, "the connection to \(url) was closed")
                return shell.core.transportDown(failure, now: .now)
            }
        }
    }

    private func reconnect(after delay: Duration) async {
        try? await Task.sleep(for: delay)
        guard !shell.withLock({ $0.closedByUser }) else { return }
        do {
            try await openTransport()
            logger.notice("reconnected to Janus")
        } catch {
            logger.debug("reconnect attempt failed", metadata: ["error": "\(error)"])
            drive { shell in
                guard !shell.closedByUser else { return [] }
                return shell.core.transportFailed(error, now: .now)
            }
        }
    }

    // MARK: Actions

    /// What carrying out the core's actions takes once the lock is released.
    private enum Effect {
        case send(Core.Outgoing)
        case resume(Waiter, Result<JanusMessage, JanusClientError>)
        case handleEvent(AsyncStream<JanusMessage>.Continuation, JanusMessage)
        case sessionEvent(AsyncStream<JanusSession.Event>.Continuation, JanusSession.Event)
        case finishHandle(AsyncStream<JanusMessage>.Continuation)
        case finishSession(AsyncStream<JanusSession.Event>.Continuation)
        case state(State)
        case reconnect(after: Duration)
        case warning(String, error: JanusClientError)
        case debug(String, error: JanusClientError)
    }

    /// Feeds the core one input under the lock, then carries out what it decided outside it:
    /// serializing, writing to the transport and resuming callers never hold up the thread that
    /// delivers the next reply.
    private func drive(_ input: (inout Shell) -> [Core.Action]) {
        let (transport, effects) = shell.withLock { shell in
            let actions = input(&shell)
            return (shell.transport, resolve(actions, in: &shell))
        }
        perform(effects, on: transport)
    }

    /// Turns actions into effects, under the lock: looks up the streams they address and updates
    /// the shell's own state (closed streams, the timer).
    private func resolve(_ actions: [Core.Action], in shell: inout Shell) -> [Effect] {
        var effects: [Effect] = []
        effects.reserveCapacity(actions.count)
        for action in actions {
            switch action {
            case .send(let outgoing):
                effects.append(.send(outgoing))
            case .complete(let waiter, let result):
                effects.append(.resume(waiter, result))
            case .deliver(let handle, let message):
                if let stream = shell.handleStreams[handle] { effects.append(.handleEvent(stream, message)) }
            case .sessionReclaimed(let session):
                if let stream = shell.sessionStreams[session] { effects.append(.sessionEvent(stream, .reclaimed)) }
            case .sessionLost(let session, let error):
                effects.append(.warning("Janus session \(session) lost", error: error))
                if let stream = shell.sessionStreams[session] { effects.append(.sessionEvent(stream, .lost(error))) }
            case .state(let state):
                if case .closed(let error) = state {
                    for stream in shell.sessionStreams.values {
                        if let error { effects.append(.sessionEvent(stream, .lost(error))) }
                        effects.append(.finishSession(stream))
                    }
                    shell.sessionStreams.removeAll()
                    for stream in shell.handleStreams.values { effects.append(.finishHandle(stream)) }
                    shell.handleStreams.removeAll()
                    shell.timer?.cancel()
                    shell.timer = nil
                    shell.timerDeadline = nil
                }
                effects.append(.state(state))
            case .reconnect(let delay):
                effects.append(.reconnect(after: delay))
            case .malformed(let error):
                effects.append(.warning("ignoring a malformed message from Janus", error: error))
            case .keepaliveFailed(let session, let error):
                effects.append(.debug("keepalive of session \(session) failed", error: error))
            }
        }
        schedule(&shell)
        return effects
    }

    private func perform(_ effects: [Effect], on transport: (any JanusTransport)?) {
        for effect in effects {
            switch effect {
            case .send(let outgoing):
                let text = outgoing.text
                logger.trace("sending", metadata: ["message": "\(Self.redacted(text))"])
                transport?.send(text)
            case .resume(let waiter, let result):
                waiter.continuation.resume(with: result)
            case .handleEvent(let stream, let message):
                stream.yield(message)
            case .sessionEvent(let stream, let event):
                stream.yield(event)
            case .finishHandle(let stream):
                stream.finish()
            case .finishSession(let stream):
                stream.finish()
            case .state(let state):
                if case .reconnecting(attempt: 1) = state { logger.warning("connection to Janus lost; reconnecting") }
                stateContinuation.yield(state)
                if case .closed = state { stateContinuation.finish() }
            case .reconnect(let delay):
                Task { await self.reconnect(after: delay) }
            case .warning(let message, let error):
                logger.warning("\(message)", metadata: ["error": "\(error)"])
            case .debug(let message, let error):
                logger.debug("\(message)", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Keeps one timer armed for the core's next deadline. A request whose deadline is later than
    /// the armed one (the usual case) costs nothing here; a timer that fires early finds nothing
    /// due and re-arms for the next deadline.
    private func schedule(_ shell: inout Shell) {
        guard !shell.core.isClosed, let next = shell.core.nextDeadline else { return }
        if let armed = shell.timerDeadline, armed <= next { return }
        shell.timer?.cancel()
        shell.timerDeadline = next
        shell.timer = Task { [weak self] in
            try? await Task.sleep(until: next, clock: .continuous)
            guard !Task.isCancelled else { return }
            self?.timerFired(deadline: next)
        }
    }

    private func timerFired(deadline: ContinuousClock.Instant) {
        drive { shell in
            if shell.timerDeadline == deadline {
                shell.timer = nil
                shell.timerDeadline = nil
            }
            return shell.core.tick(now: .now)
        }
    }

    /// The request text without the API secret or token, for trace logs.
    private static func redacted(_ text: String) -> String {
        var result = text
        for key in ["\"apisecret\":\"", "\"token\":\""] {
            guard let start = result.range(of: key), let end = result[start.upperBound...].firstIndex(of: "\"") else {
                continue
            }
            result.replaceSubrange(start.upperBound..<end, with: "***")
        }
        return result
    }
}
