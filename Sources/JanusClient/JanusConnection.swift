import Foundation
import JanusProtocol
import Logging

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
public actor JanusConnection {
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

        /// Creates options with sensible defaults: 10 s request timeout, 25 s keepalive, reconnect on.
        public init(
            apiSecret: String? = nil,
            token: String? = nil,
            tls: TLSOptions = TLSOptions(),
            requestTimeout: Duration = .seconds(10),
            keepaliveInterval: Duration = .seconds(25),
            reconnect: ReconnectPolicy? = ReconnectPolicy()
        ) {
            self.apiSecret = apiSecret
            self.token = token
            self.tls = tls
            self.requestTimeout = requestTimeout
            self.keepaliveInterval = keepaliveInterval
            self.reconnect = reconnect
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
    public nonisolated let url: WebSocketURL
    /// State changes, for status displays and recovery logic.
    public nonisolated let states: AsyncStream<State>
    private let stateContinuation: AsyncStream<State>.Continuation
    let options: Options
    let logger: Logger

    private var socket: WebSocketConnection?
    private var generation = 0
    private var openWaiter: CheckedContinuation<Void, any Error>?
    private var state: State = .closed(nil)
    private var closedByUser = false
    private var pending: [String: PendingRequest] = [:]
    private var handleStreams: [UInt64: AsyncStream<JanusMessage>.Continuation] = [:]
    private var heldEvents: [UInt64: [JanusMessage]] = [:]
    private var sessionStreams: [UInt64: AsyncStream<JanusSession.Event>.Continuation] = [:]
    /// Requests waiting for a reconnect to end (see `waitWhileReconnecting`), woken by `setState`.
    private var reconnectWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextReconnectWaiter = 0
    /// Counts messages from Janus that could not be parsed (they are logged and dropped).
    public private(set) var malformedMessages = 0

    private struct PendingRequest {
        var verb: JanusRequest.Verb
        var continuation: CheckedContinuation<JanusMessage, any Error>
        var deadline: ContinuousClock.Instant
        var limit: Duration
    }

    /// Expires overdue requests; one task for all of them (a timer task per request would cost more
    /// than the request itself at thousands of requests per second). It runs only while a request
    /// is pending: an idle connection (a call in progress sends a keepalive every 25 s) would
    /// otherwise wake a thread 20 times a second for nothing.
    private var sweeper: Task<Void, Never>?

    private init(url: WebSocketURL, options: Options, logger: Logger) {
        self.url = url
        self.options = options
        var logger = logger
        logger[metadataKey: "janus"] = "\(url)"
        self.logger = logger
        (states, stateContinuation) = AsyncStream.makeStream(of: State.self, bufferingPolicy: .bufferingNewest(32))
    }

    /// Connects to a Janus WebSocket endpoint (`ws://host:8188` or `wss://...`).
    ///
    /// Throws ``JanusClientError`` with `.invalidURL`, `.unreachable`, `.tlsFailure` or
    /// `.handshakeRejected` when no Janus session can be opened there.
    public static func connect(
        to url: String,
        options: Options = Options(),
        logger: Logger = Logger(label: "conclave.janus")
    ) async throws -> JanusConnection {
        let connection = JanusConnection(url: try WebSocketURL(url), options: options, logger: logger)
        try await connection.openSocket()
        await connection.setState(.connected)
        return connection
    }

    /// Creates a session (and starts its keepalive).
    public func createSession() async throws -> JanusSession {
        let reply = try await send(.create())
        guard let id = reply.createdID else {
            throw JanusClientError(.unexpectedReply, "Janus's reply to create has no session id")
        }
        return JanusSession(id: id, connection: self, events: registerSession(id))
    }

    /// Closes the connection. Outstanding requests fail with `.connectionClosed`; sessions are left for
    /// Janus to expire (destroy them first for a clean exit).
    public func close() async {
        closedByUser = true
        let socket = self.socket
        self.socket = nil
        if let socket { await Self.closeOffActor(socket) }
        failAll(JanusClientError(.connectionClosed, "the connection to \(url) was closed"))
        finishStreams(error: nil)
        setState(.closed(nil))
    }

    /// Sends a request and waits for its reply.
    ///
    /// Throws ``JanusClientError``: `.janus` when Janus answers with an error (the core's, not a
    /// plugin's: plugin errors arrive inside the reply's plugin data), `.timeout`, `.connectionClosed`.
    public func send(_ request: JanusRequest, timeout: Duration? = nil) async throws -> JanusMessage {
        // Requests made during a reconnect wait until the sessions are claimed again.
        try await waitWhileReconnecting(timeout: timeout ?? options.requestTimeout)
        return try await transmit(request, timeout: timeout)
    }

    /// Sends at once, without waiting for a reconnect to finish (the reconnect's own claims).
    private func transmit(_ request: JanusRequest, timeout: Duration?) async throws -> JanusMessage {
        guard let socket else {
            throw JanusClientError(.connectionClosed, "not connected to \(url)")
        }
        let transaction = Self.makeTransaction()
        let text = request.json(transaction: transaction, apiSecret: options.apiSecret, token: options.token)
            .serialized()
        let limit = timeout ?? options.requestTimeout
        startSweeperIfNeeded()
        return try await withCheckedThrowingContinuation { continuation in
            pending[transaction] = PendingRequest(
                verb: request.verb,
                continuation: continuation,
                deadline: .now + limit,
                limit: limit
            )
            logger.trace("sending", metadata: ["message": "\(Self.redacted(text))"])
            socket.send(text)
        }
    }

    // MARK: Sessions and handles

    func registerSession(_ id: UInt64) -> AsyncStream<JanusSession.Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: JanusSession.Event.self)
        sessionStreams[id] = continuation
        return stream
    }

    func unregisterSession(_ id: UInt64) {
        sessionStreams.removeValue(forKey: id)?.finish()
    }

    func registerHandle(_ id: UInt64) -> AsyncStream<JanusMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: JanusMessage.self)
        handleStreams[id] = continuation
        for message in heldEvents.removeValue(forKey: id) ?? [] { continuation.yield(message) }
        return stream
    }

    func unregisterHandle(_ id: UInt64) {
        handleStreams.removeValue(forKey: id)?.finish()
    }

    /// Closes the socket abruptly, as a network failure would, to exercise reconnect and claim.
    package func dropConnectionForTesting() async {
        guard let socket else { return }
        await Self.closeOffActor(socket, simulatingFailure: true)
    }

    // MARK: Socket lifecycle

    private func openSocket() async throws {
        let socket = try WebSocketConnection(
            url: url,
            subprotocol: "janus-protocol",
            tls: options.tls,
            logger: logger
        )
        generation += 1
        let generation = self.generation
        self.socket = socket
        Task { [weak self] in
            for await event in socket.events {
                await self?.receive(event, generation: generation)
            }
        }
        try await withCheckedThrowingContinuation { continuation in
            openWaiter = continuation
        }
    }

    private func receive(_ event: WebSocketConnection.Event, generation: Int) {
        guard generation == self.generation else { return }
        switch event {
        case .open:
            openWaiter?.resume()
            openWaiter = nil
        case .message(let text):
            route(text)
        case .closed(let error):
            socket = nil
            if let waiter = openWaiter {
                openWaiter = nil
                waiter.resume(throwing: error ?? JanusClientError(.connectionClosed, "the connection closed"))
                return
            }
            let failure = error ?? JanusClientError(.connectionClosed, "the connection to \(url) was closed")
            failAll(failure)
            guard !closedByUser else { return }
            logger.warning("connection to Janus lost", metadata: ["error": "\(failure)"])
            if let policy = options.reconnect {
                Task { await self.reconnect(policy: policy, cause: failure) }
            } else {
                finishStreams(error: failure)
                setState(.closed(failure))
            }
        }
    }

    private func reconnect(policy: ReconnectPolicy, cause: JanusClientError) async {
        let deadline = ContinuousClock.now + policy.window
        var delay = policy.initialDelay
        var attempt = 0
        var lastError = cause
        while ContinuousClock.now < deadline && !closedByUser {
            attempt += 1
            setState(.reconnecting(attempt: attempt))
            try? await Task.sleep(for: delay)
            do {
                try await openSocket()
                logger.notice("reconnected to Janus", metadata: ["attempt": "\(attempt)"])
                await claimSessions()
                setState(.reconnected)
                return
            } catch {
                lastError = (error as? JanusClientError) ?? JanusClientError(.unreachable, "\(error)")
                logger.debug("reconnect attempt failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                delay = min(delay * 2, policy.maximumDelay)
            }
        }
        guard !closedByUser else { return }
        let failure = JanusClientError(.connectionClosed, "could not reconnect to \(url): \(lastError)")
        finishStreams(error: failure)
        setState(.closed(failure))
    }

    /// Re-binds every live session to the new socket with `claim`.
    private func claimSessions() async {
        for id in sessionStreams.keys.sorted() {
            do {
                _ = try await transmit(JanusRequest(.claim, session: id), timeout: nil)
                sessionStreams[id]?.yield(.reclaimed)
            } catch {
                let failure = (error as? JanusClientError) ?? JanusClientError(.unexpectedReply, "\(error)")
                logger.warning("session could not be claimed", metadata: ["session": "\(id)", "error": "\(failure)"])
                sessionStreams[id]?.yield(.lost(failure))
            }
        }
    }

    /// Returns once the connection is no longer reconnecting (at once when it is not), or when
    /// `timeout` passes; throws `CancellationError` when the task is cancelled while waiting.
    ///
    /// Woken by `setState` (not on a timer), so a request goes out the moment the sessions are
    /// claimed again. It does not read ``states``: that stream has one reader, the caller's.
    private func waitWhileReconnecting(timeout: Duration) async throws {
        guard case .reconnecting = state else { return }
        let id = nextReconnectWaiter
        nextReconnectWaiter &+= 1
        // The deadline itself: a timer that ends this one wait (cancelled as soon as it ends).
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.releaseReconnectWaiter(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // On the actor, as are `setState` and `releaseReconnectWaiter`: a cancellation
                // before this point is seen here, one after it finds the continuation registered.
                if case .reconnecting = state, !Task.isCancelled {
                    reconnectWaiters[id] = continuation
                } else {
                    continuation.resume()
                }
            }
        } onCancel: {
            Task { await self.releaseReconnectWaiter(id) }
        }
        try Task.checkCancellation()
    }

    /// Ends one wait of `waitWhileReconnecting` early (its timeout passed, or its task was cancelled).
    private func releaseReconnectWaiter(_ id: Int) {
        reconnectWaiters.removeValue(forKey: id)?.resume()
    }

    // MARK: Routing

    private func route(_ text: String) {
        logger.trace("received", metadata: ["message": "\(text)"])
        let message: JanusMessage
        do {
            message = try JanusMessage(text: text)
        } catch {
            malformedMessages += 1
            logger.warning("ignoring a malformed message from Janus", metadata: ["error": "\(error)"])
            return
        }
        if let transaction = message.transaction, let request = pending[transaction] {
            resolve(transaction, request: request, with: message)
            return
        }
        if let sender = message.sender {
            if let stream = handleStreams[sender] {
                stream.yield(message)
            } else {
                hold(message, for: sender)
            }
            return
        }
        if message.kind == .timeout, let session = message.sessionID {
            sessionStreams[session]?.yield(.lost(JanusClientError(.janus, "Janus timed the session out")))
            return
        }
        logger.debug("unrouted Janus message", metadata: ["kind": "\(message.kind.rawValue)"])
    }

    private func resolve(_ transaction: String, request: PendingRequest, with message: JanusMessage) {
        switch message.kind {
        case .ack where request.verb == .message:
            return  // the plugin's answer follows as an event with the same transaction
        case .error:
            let error = message.error ?? JanusError(code: JanusError.unknown, reason: "")
            complete(transaction, with: .failure(JanusClientError.janus(error, request: request.verb.rawValue)))
        default:
            complete(transaction, with: .success(message))
        }
    }

    private func complete(_ transaction: String, with result: Result<JanusMessage, JanusClientError>) {
        guard let request = pending.removeValue(forKey: transaction) else { return }
        request.continuation.resume(with: result)
    }

    private func startSweeperIfNeeded() {
        guard sweeper == nil else { return }
        sweeper = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(50))
                guard let self, await self.expireOverdue() else { return }
            }
        }
    }

    /// Fails every request past its deadline; returns false (and the sweeper ends) once no request
    /// is pending or the connection is closed for good. The next request starts a new sweeper.
    private func expireOverdue() -> Bool {
        let now = ContinuousClock.now
        for (transaction, request) in pending where request.deadline <= now {
            let message = "Janus did not answer \(request.verb.rawValue) within \(request.limit)"
            complete(transaction, with: .failure(JanusClientError(.timeout, message)))
        }
        if case .closed = state {
            sweeper = nil
            return false
        }
        if pending.isEmpty {
            sweeper = nil
            return false
        }
        return true
    }

    /// Keeps a few early events for a handle whose attach reply is still on its way.
    private func hold(_ message: JanusMessage, for sender: UInt64) {
        guard heldEvents.count < 64 || heldEvents[sender] != nil else { return }
        var held = heldEvents[sender] ?? []
        guard held.count < 64 else { return }
        held.append(message)
        heldEvents[sender] = held
    }

    private func failAll(_ error: JanusClientError) {
        for transaction in Array(pending.keys) { complete(transaction, with: .failure(error)) }
    }

    private func finishStreams(error: JanusClientError?) {
        for (_, stream) in sessionStreams {
            if let error { stream.yield(.lost(error)) }
            stream.finish()
        }
        sessionStreams.removeAll()
        for (_, stream) in handleStreams { stream.finish() }
        handleStreams.removeAll()
    }

    private func setState(_ state: State) {
        self.state = state
        let stillReconnecting = if case .reconnecting = state { true } else { false }
        if !stillReconnecting {
            let waiters = reconnectWaiters
            reconnectWaiters = [:]
            for waiter in waiters.values { waiter.resume() }
        }
        stateContinuation.yield(state)
        if case .closed = state { stateContinuation.finish() }
    }

    /// Closing waits for the service thread to end; do that off the actor's executor.
    private static func closeOffActor(_ socket: WebSocketConnection, simulatingFailure: Bool = false) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                if simulatingFailure { socket.abort() } else { socket.close() }
                continuation.resume()
            }
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

    /// Janus echoes the transaction; 12 random bytes make collisions practically impossible.
    private static func makeTransaction() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<12).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
