import JanusProtocol

/// The Janus client's logic without I/O: transactions, sessions, keepalives, reconnect backoff,
/// claim after reconnect and event dispatch, as a state machine.
///
/// It owns no socket, timer or task. The shell (``JanusConnection``) feeds it inputs — a request
/// to send, a received text, a tick with the current time, the transport going up or down — and
/// carries out the ``Action``s it returns. Time is always an input, so every rule here (timeouts,
/// keepalive schedule, backoff window) is tested with vectors and no clock.
///
/// `Waiter` is whatever the shell resumes when a request completes (a continuation; an integer
/// in tests). The core hands each waiter back exactly once, in a `.complete` action.
struct JanusClientCore<Waiter> {
    typealias Instant = ContinuousClock.Instant

    /// What the core needs to know about the connection.
    struct Configuration {
        /// The server, for messages.
        var url: String
        var apiSecret: String?
        var token: String?
        var requestTimeout: Duration
        var keepaliveInterval: Duration
        /// Reconnect after an unexpected drop, or nil to close at once.
        var reconnect: JanusConnection.ReconnectPolicy?
        /// Makes transactions unique across connections to the same server; a counter follows it.
        var transactionPrefix: String
    }

    /// A request ready to go out. The shell serializes it (``text``) after releasing its lock, so
    /// that the JSON encoding does not hold up the thread that delivers replies.
    struct Outgoing: Sendable {
        var request: JanusRequest
        var transaction: String
        var apiSecret: String?
        var token: String?

        /// The request as Janus reads it.
        var text: String { request.json(transaction: transaction, apiSecret: apiSecret, token: token).serialized() }
    }

    /// What the shell must do.
    enum Action {
        /// Write this request to the transport.
        case send(Outgoing)
        /// Resume this waiter with this result.
        case complete(Waiter, Result<JanusMessage, JanusClientError>)
        /// A message for a handle (a plugin event, `webrtcup`, `hangup`, ...).
        case deliver(handle: UInt64, JanusMessage)
        /// A session was claimed on the new transport; its handles live on.
        case sessionReclaimed(UInt64)
        /// Janus no longer knows a session (expired, destroyed, Janus restarted).
        case sessionLost(UInt64, JanusClientError)
        /// Publish this connection state.
        case state(JanusConnection.State)
        /// Open a new transport after `delay`, then report `transportUp` or `transportFailed`.
        case reconnect(after: Duration)
        /// Janus sent something that is no Janus message: it was dropped, nothing else was.
        case malformed(JanusClientError)
        /// A keepalive failed for a reason other than a lost session (for the log).
        case keepaliveFailed(session: UInt64, JanusClientError)
    }

    /// Who is waiting for a reply.
    private enum Purpose {
        case caller(Waiter)
        case keepalive(session: UInt64)
        case claim(session: UInt64)
    }

    private struct Pending {
        var verb: JanusRequest.Verb
        var purpose: Purpose
        var deadline: Instant
        var limit: Duration
    }

    /// A request made while the transport is down, sent once it is up and the sessions are claimed.
    private struct Queued {
        var request: JanusRequest
        var waiter: Waiter
        var deadline: Instant
        var limit: Duration
    }

    private enum Phase {
        /// Before the first transport is up.
        case connecting
        case open
        /// Reconnected; waiting for the claims of these transactions.
        case claiming(Set<String>)
        /// The transport dropped; attempt `attempt` is scheduled.
        case reconnecting(attempt: Int, delay: Duration, deadline: Instant, lastError: JanusClientError)
        case closed
    }

    let configuration: Configuration
    private var phase = Phase.connecting
    private var counter: UInt64 = 0
    private var pending: [String: Pending] = [:]
    private var queued: [Queued] = []
    /// Each live session and when its next keepalive is due (nil: stopped).
    private var sessions: [UInt64: Instant?] = [:]
    private var handles: Set<UInt64> = []
    private var held: [UInt64: [JanusMessage]] = [:]
    /// A lower bound of the earliest request deadline (removals do not raise it; `tick` recomputes).
    private var earliestDeadline: Instant?
    /// Messages from Janus that could not be parsed (dropped).
    private(set) var malformedMessages = 0

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Whether the core has closed for good.
    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    /// Requests waiting for a reply or for the transport, for tests and diagnostics.
    var outstandingRequests: Int { pending.count + queued.count }

    /// When the shell should next call ``tick(now:)`` (a timeout or a keepalive may be due), or nil.
    var nextDeadline: Instant? {
        var next = earliestDeadline
        for deadline in queued.map(\.deadline) where next.map({ deadline < $0 }) ?? true { next = deadline }
        guard case .open = phase else { return next }
        for case let due? in sessions.values where next.map({ due < $0 }) ?? true { next = due }
        return next
    }

    // MARK: Inputs

    /// A caller's request: sent now, queued until a reconnect ends, or failed when closed.
    mutating func request(_ request: JanusRequest, timeout: Duration?, waiter: Waiter, now: Instant) -> [Action] {
        let limit = timeout ?? configuration.requestTimeout
        switch phase {
        case .open:
            return [transmit(request, purpose: .caller(waiter), limit: limit, now: now)]
        case .connecting, .claiming, .reconnecting:
            queued.append(Queued(request: request, waiter: waiter, deadline: now + limit, limit: limit))
            return []
        case .closed:
            return [
                .complete(
                    waiter,
                    .failure(JanusClientError(.connectionClosed, "not connected to \(configuration.url)"))
                )
            ]
        }
    }

    /// The transport is up: the first time, the connection is open; after a drop, every live session
    /// is claimed before queued requests go out.
    mutating func transportUp(now: Instant) -> [Action] {
        switch phase {
        case .connecting:
            phase = .open
            return [.state(.connected)] + flushQueue(now: now)
        case .reconnecting:
            var actions: [Action] = []
            var claims: Set<String> = []
            for id in sessions.keys.sorted() {
                let action = transmit(
                    JanusRequest(.claim, session: id),
                    purpose: .claim(session: id),
                    limit: configuration.requestTimeout,
                    now: now
                )
                if case .send(let outgoing) = action { claims.insert(outgoing.transaction) }
                actions.append(action)
            }
            if claims.isEmpty { return actions + reopened(now: now) }
            phase = .claiming(claims)
            return actions
        case .open, .claiming, .closed:
            return []
        }
    }

    /// The transport went down: `error` nil means we closed it. Outstanding requests fail; the
    /// connection reconnects when its policy allows, or closes.
    mutating func transportDown(_ error: JanusClientError?, now: Instant) -> [Action] {
        switch phase {
        case .closed, .reconnecting:
            return []
        case .connecting, .open, .claiming:
            let failure =
                error ?? JanusClientError(.connectionClosed, "the connection to \(configuration.url) was closed")
            var actions = failPending(failure)
            guard error != nil, let policy = configuration.reconnect else {
                return actions + close(failure: error == nil ? nil : failure)
            }
            phase = .reconnecting(
                attempt: 1,
                delay: policy.initialDelay,
                deadline: now + policy.window,
                lastError: failure
            )
            actions.append(.state(.reconnecting(attempt: 1)))
            actions.append(.reconnect(after: policy.initialDelay))
            return actions
        }
    }

    /// A reconnect attempt failed: try again with a longer delay, or give up after the window.
    mutating func transportFailed(_ error: JanusClientError, now: Instant) -> [Action] {
        guard case .reconnecting(let attempt, let delay, let deadline, _) = phase, let policy = configuration.reconnect
        else { return [] }
        guard now < deadline else {
            let failure = JanusClientError(.connectionClosed, "could not reconnect to \(configuration.url): \(error)")
            return close(failure: failure)
        }
        let next = min(delay * 2, policy.maximumDelay)
        phase = .reconnecting(attempt: attempt + 1, delay: next, deadline: deadline, lastError: error)
        return [.state(.reconnecting(attempt: attempt + 1)), .reconnect(after: next)]
    }

    /// The user closes the connection: everything outstanding fails with `.connectionClosed`.
    mutating func close() -> [Action] {
        guard !isClosed else { return [] }
        let failure = JanusClientError(.connectionClosed, "the connection to \(configuration.url) was closed")
        return failPending(failure) + close(failure: nil)
    }

    /// A text from Janus: resolves its transaction, or is dispatched to its handle or session.
    mutating func received(_ text: String, now: Instant) -> [Action] {
        let message: JanusMessage
        do {
            message = try JanusMessage(text: text)
        } catch {
            malformedMessages += 1
            return [.malformed(JanusClientError(.malformedMessage, "Janus at \(configuration.url) sent \(error)"))]
        }
        if let transaction = message.transaction, let request = pending[transaction] {
            return resolve(transaction, request: request, with: message, now: now)
        }
        if let sender = message.sender {
            if handles.contains(sender) { return [.deliver(handle: sender, message)] }
            hold(message, for: sender)
            return []
        }
        if message.kind == .timeout, let session = message.sessionID, sessions[session] != nil {
            sessions.removeValue(forKey: session)
            return [.sessionLost(session, JanusClientError(.janus, "Janus timed the session out"))]
        }
        return []
    }

    /// The time passed: overdue requests fail with `.timeout` (queued ones, which never reached
    /// Janus, with `.connectionClosed`), and due keepalives go out.
    mutating func tick(now: Instant) -> [Action] {
        var actions: [Action] = []
        var earliest: Instant?
        for (transaction, request) in pending {
            guard request.deadline <= now else {
                if earliest.map({ request.deadline < $0 }) ?? true { earliest = request.deadline }
                continue
            }
            let error = JanusClientError(
                .timeout,
                "Janus did not answer \(request.verb.rawValue) within \(request.limit)"
            )
            actions += complete(transaction, with: .failure(error), now: now)
        }
        earliestDeadline = earliest
        let url = configuration.url
        queued.removeAll { entry in
            guard entry.deadline <= now else { return false }
            let message = "not connected to \(url): \(entry.request.verb.rawValue) waited \(entry.limit)"
            actions.append(.complete(entry.waiter, .failure(JanusClientError(.connectionClosed, message))))
            return true
        }
        guard case .open = phase else { return actions }
        for (id, due) in sessions {
            guard let due, due <= now else { continue }
            sessions[id] = now + configuration.keepaliveInterval
            actions.append(
                transmit(
                    JanusRequest(.keepalive, session: id),
                    purpose: .keepalive(session: id),
                    limit: configuration.requestTimeout,
                    now: now
                )
            )
        }
        return actions
    }

    /// Takes back queued requests whose callers gave up (their tasks were cancelled); requests
    /// already sent stay, since Janus may act on them anyway.
    mutating func cancelQueued(where match: (Waiter) -> Bool) -> [Waiter] {
        var cancelled: [Waiter] = []
        queued.removeAll { entry in
            guard match(entry.waiter) else { return false }
            cancelled.append(entry.waiter)
            return true
        }
        return cancelled
    }

    // MARK: Sessions and handles

    /// A session was created: keepalives start, and it is claimed after a reconnect.
    mutating func sessionCreated(_ id: UInt64, now: Instant) {
        sessions[id] = now + configuration.keepaliveInterval
    }

    /// Stops a session's keepalives (it stays claimable until destroyed).
    mutating func stopKeepalive(_ id: UInt64) {
        if sessions[id] != nil { sessions[id] = .some(nil) }
    }

    /// A session was destroyed: no more keepalives or claims.
    mutating func sessionDestroyed(_ id: UInt64) {
        sessions.removeValue(forKey: id)
    }

    /// A handle was attached: its events are delivered from now on; returns those that came early.
    mutating func handleAttached(_ id: UInt64) -> [JanusMessage] {
        handles.insert(id)
        return held.removeValue(forKey: id) ?? []
    }

    /// A handle was detached.
    mutating func handleDetached(_ id: UInt64) {
        handles.remove(id)
        held.removeValue(forKey: id)
    }

    // MARK: Internals

    private mutating func transmit(_ request: JanusRequest, purpose: Purpose, limit: Duration, now: Instant) -> Action {
        counter &+= 1
        let transaction = configuration.transactionPrefix + String(counter, radix: 36)
        let deadline = now + limit
        pending[transaction] = Pending(verb: request.verb, purpose: purpose, deadline: deadline, limit: limit)
        if earliestDeadline.map({ deadline < $0 }) ?? true { earliestDeadline = deadline }
        return .send(
            Outgoing(
                request: request,
                transaction: transaction,
                apiSecret: configuration.apiSecret,
                token: configuration.token
            )
        )
    }

    private mutating func resolve(
        _ transaction: String,
        request: Pending,
        with message: JanusMessage,
        now: Instant
    ) -> [Action] {
        switch message.kind {
        case .ack where request.verb == .message:
            return []  // the plugin's answer follows as an event with the same transaction
        case .error:
            let error = message.error ?? JanusError(code: JanusError.unknown, reason: "")
            return complete(transaction, with: .failure(.janus(error, request: request.verb.rawValue)), now: now)
        default:
            return complete(transaction, with: .success(message), now: now)
        }
    }

    private mutating func complete(
        _ transaction: String,
        with result: Result<JanusMessage, JanusClientError>,
        now: Instant
    ) -> [Action] {
        guard let request = pending.removeValue(forKey: transaction) else { return [] }
        switch request.purpose {
        case .caller(let waiter):
            return [.complete(waiter, result)]
        case .keepalive(let session):
            guard case .failure(let error) = result else { return [] }
            guard error.isSessionGone, sessions[session] != nil else {
                return [.keepaliveFailed(session: session, error)]
            }
            sessions.removeValue(forKey: session)
            return [.sessionLost(session, error)]
        case .claim(let session):
            var actions: [Action]
            switch result {
            case .success:
                actions = [.sessionReclaimed(session)]
            case .failure(let error):
                sessions.removeValue(forKey: session)
                actions = [.sessionLost(session, error)]
            }
            if case .claiming(var claims) = phase {
                claims.remove(transaction)
                if claims.isEmpty {
                    actions += reopened(now: now)
                } else {
                    phase = .claiming(claims)
                }
            }
            return actions
        }
    }

    /// Every session is claimed (or lost): the connection is open again.
    private mutating func reopened(now: Instant) -> [Action] {
        phase = .open
        return [.state(.reconnected)] + flushQueue(now: now)
    }

    private mutating func flushQueue(now: Instant) -> [Action] {
        let waiting = queued
        queued = []
        return waiting.map { entry in
            // The wait counts against the request's limit, as it did before it was queued.
            let left = max(entry.deadline - now, .zero)
            return transmit(entry.request, purpose: .caller(entry.waiter), limit: left, now: now)
        }
    }

    private mutating func failPending(_ failure: JanusClientError) -> [Action] {
        var actions: [Action] = []
        let transactions = Array(pending.keys)
        for transaction in transactions {
            guard let request = pending.removeValue(forKey: transaction) else { continue }
            if case .caller(let waiter) = request.purpose { actions.append(.complete(waiter, .failure(failure))) }
        }
        earliestDeadline = nil
        return actions
    }

    /// Closes for good: queued requests fail, sessions are finished by the shell with `failure`.
    private mutating func close(failure: JanusClientError?) -> [Action] {
        phase = .closed
        let error = failure ?? JanusClientError(.connectionClosed, "the connection to \(configuration.url) was closed")
        var actions = queued.map { Action.complete($0.waiter, .failure(error)) }
        queued = []
        sessions = [:]
        handles = []
        held = [:]
        actions.append(.state(.closed(failure)))
        return actions
    }

    /// Keeps a few early events for a handle whose attach reply is still on its way.
    private mutating func hold(_ message: JanusMessage, for sender: UInt64) {
        guard held.count < 64 || held[sender] != nil else { return }
        var messages = held[sender] ?? []
        guard messages.count < 64 else { return }
        messages.append(message)
        held[sender] = messages
    }
}
