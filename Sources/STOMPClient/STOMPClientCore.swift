public import STOMPProtocol

/// A login and passcode for CONNECT. The passcode never appears in a description or a log line.
public struct STOMPCredentials: Sendable, Hashable, CustomStringConvertible {
    public var login: String
    public var passcode: String

    public init(login: String, passcode: String) {
        self.login = login
        self.passcode = passcode
    }

    public var description: String { "\(login) (passcode redacted)" }
}

/// Waits between reconnect attempts: `initialDelay`, doubled after each failed attempt, at most
/// `maximumDelay`. A connection counts as failed again (the wait keeps growing) when it ends less
/// than `maximumDelay` after its CONNECTED, so a server that accepts and then drops at once cannot
/// cause a storm; one that stayed up longer starts the sequence afresh. There is no jitter: each
/// device has its own connection, so retries of many devices do not fall in step by design.
public struct STOMPReconnectPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var maximumDelay: Duration

    /// 500 ms doubling to 15 s (ECall waits a fixed 5 s).
    public init(initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(15)) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The wait before attempt `attempt` (1 for the first reconnect).
    public func delay(attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(attempt, 1) {
            delay *= 2
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }
}

/// How a STOMP client connects and behaves.
public struct STOMPClientConfiguration: Sendable {
    /// The server's URL, for messages.
    public var url: String
    /// The virtual host (`host` header of CONNECT): `ecall` for ECall's broker.
    public var virtualHost: String
    public var credentials: STOMPCredentials
    /// How often we offer to send heart-beats (the first number of `heart-beat`); zero for never.
    public var heartBeatSend: Duration
    /// How often we want the server's heart-beats (the second number); zero for never.
    public var heartBeatReceive: Duration
    /// The server is declared silent after this many of its negotiated heart-beat intervals without
    /// a byte (ECall has no such check; 2 leaves room for one late heart-beat).
    public var silenceFactor: Int
    /// How long the WebSocket upgrade plus CONNECTED may take before the attempt is abandoned.
    public var connectTimeout: Duration
    public var reconnect: STOMPReconnectPolicy
    /// How many sends may wait while the connection is down; more fail with `.sendQueueFull`.
    public var sendQueueLimit: Int
    /// How long a send may wait for the connection to come back before failing with `.sendTimeout`.
    public var sendQueueTimeout: Duration
    /// Limits on what the server may send.
    public var limits: STOMPDecoder.Limits

    /// ECall's settings: `heart-beat:10000,10000`, CONNECTED within 10 s.
    public init(
        url: String,
        virtualHost: String,
        credentials: STOMPCredentials,
        heartBeatSend: Duration = .seconds(10),
        heartBeatReceive: Duration = .seconds(10),
        silenceFactor: Int = 2,
        connectTimeout: Duration = .seconds(10),
        reconnect: STOMPReconnectPolicy = STOMPReconnectPolicy(),
        sendQueueLimit: Int = 256,
        sendQueueTimeout: Duration = .seconds(30),
        limits: STOMPDecoder.Limits = STOMPDecoder.Limits()
    ) {
        self.url = url
        self.virtualHost = virtualHost
        self.credentials = credentials
        self.heartBeatSend = heartBeatSend
        self.heartBeatReceive = heartBeatReceive
        self.silenceFactor = silenceFactor
        self.connectTimeout = connectTimeout
        self.reconnect = reconnect
        self.sendQueueLimit = sendQueueLimit
        self.sendQueueTimeout = sendQueueTimeout
        self.limits = limits
    }
}

/// The heart-beat intervals agreed with the server (STOMP 1.2 "Heart-beating"); nil for none.
public struct STOMPHeartBeat: Sendable, Hashable {
    /// How often we send (an EOL when nothing else went out).
    public var outgoing: Duration?
    /// How often the server sends.
    public var incoming: Duration?

    /// Each side sends at the larger of what it offers and what the other wants, or not at all when
    /// either says zero.
    public static func negotiate(
        clientSend: Duration,
        clientReceive: Duration,
        serverHeader: String?
    ) -> STOMPHeartBeat {
        let parts = (serverHeader ?? "0,0").split(separator: ",").map { Int64($0.trimmingPrefixSpaces) }
        let serverSend = parts.count == 2 ? max(parts[0] ?? 0, 0) : 0
        let serverReceive = parts.count == 2 ? max(parts[1] ?? 0, 0) : 0
        func agree(_ ours: Duration, _ theirs: Int64) -> Duration? {
            guard ours > .zero, theirs > 0 else { return nil }
            return max(ours, .milliseconds(min(theirs, 86_400_000)))
        }
        return STOMPHeartBeat(outgoing: agree(clientSend, serverReceive), incoming: agree(clientReceive, serverSend))
    }
}

extension Substring {
    fileprivate var trimmingPrefixSpaces: Substring { drop { $0 == " " } }
}

/// A connection's state, as reported to its owner.
public enum STOMPConnectionState: Sendable, Hashable {
    /// Opening the WebSocket and waiting for CONNECTED (attempt 0 is the first connection).
    case connecting(attempt: Int)
    /// CONNECTED received; every subscription was sent again and queued sends flushed.
    case connected(STOMPHeartBeat)
    /// The connection ended for `reason`; attempt `attempt` starts after `delay`.
    case reconnecting(attempt: Int, delay: Duration, reason: STOMPError)
    /// Closed for good: by the owner (nil) or because the server refused the credentials.
    case closed(STOMPError?)
}

/// A MESSAGE frame, with the subscription it arrived on.
public struct STOMPMessage: Sendable, Hashable {
    public var subscription: String
    public var destination: String?
    public var headers: [STOMPHeader]
    public var body: [UInt8]
    /// Which CONNECTED the message arrived after (1 for the first connection). An ACK or NACK only
    /// means something on the connection that delivered the message: after a reconnect the broker
    /// has already put it back, so the core refuses to acknowledge it then.
    public var connection: Int = 0

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The value of the first header named `name`.
    public subscript(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// What ACK and NACK name the message by: STOMP 1.2's `ack` header (present on subscriptions
    /// with `ack: client` or `client-individual`), else `message-id`.
    public var ackID: String? { self["ack"] ?? self["message-id"] }

    /// The broker delivered the message before and it was not acknowledged then (RabbitMQ's
    /// `redelivered` header): its consumer went away, or NACKed it with requeue.
    public var redelivered: Bool { self["redelivered"] == "true" }
}

/// What the owner of a `client` or `client-individual` subscription says about a message.
public enum STOMPAcknowledgement: Sendable, Hashable {
    /// Done with: the broker forgets it.
    case ack
    /// Not done: `requeue` puts it back for any consumer (this one included).
    case nack(requeue: Bool)
}

/// The STOMP client's rules without I/O: events in (transport opened, text received, transport
/// closed, time passed, calls from the owner), actions out (open or close the transport, send text,
/// deliver a message, complete a send, report an error or a state). Times are inputs, so tests drive
/// heart-beats, silence and backoff without waiting. `Waiter` is whatever the shell resumes when a
/// send is done.
public struct STOMPClientCore<Waiter> {
    public typealias Instant = ContinuousClock.Instant

    public enum Action {
        /// Open a new transport, then report ``transportOpened(now:)`` or ``transportClosed(_:now:)``.
        case openTransport
        /// Drop the current transport; its later events must not reach the core.
        case closeTransport
        /// Write one text message.
        case send(String)
        /// A message for the owner.
        case deliver(STOMPMessage)
        /// A RECEIPT the owner asked for.
        case receipt(String)
        /// A send was written (success) or cannot be.
        case complete(Waiter, Result<Void, STOMPError>)
        /// An error that did not close the client (it may reconnect).
        case report(STOMPError)
        case state(STOMPConnectionState)
    }

    private struct Session {
        var heartBeat: STOMPHeartBeat
        var connectedAt: Instant
        var lastSent: Instant
        var lastReceived: Instant
    }

    private enum Phase {
        case idle
        /// Transport opening, or CONNECT sent: `deadline` bounds both.
        case connecting(attempt: Int, deadline: Instant, connectSent: Bool)
        case connected(Session)
        case waiting(attempt: Int, until: Instant)
        case closed
    }

    private struct Subscription {
        var id: String
        var destination: String
        var ack: String
        /// More SUBSCRIBE headers (`prefetch-count`, `x-priority`, ...), sent as given.
        var headers: [STOMPHeader] = []
    }

    private struct QueuedSend {
        var frame: STOMPFrame
        var waiter: Waiter
        var deadline: Instant
    }

    public let configuration: STOMPClientConfiguration
    private var phase = Phase.idle
    private var decoder: STOMPDecoder
    private var subscriptions: [Subscription] = []
    /// The last SUBSCRIBE sent and when. RabbitMQ answers a SUBSCRIBE it refuses by closing the
    /// connection, over Web-STOMP often without the ERROR frame reaching the client, and it sends no
    /// RECEIPT for SUBSCRIBE there either: a close (or ERROR) right after a SUBSCRIBE is the only sign.
    private var lastSubscribe: (id: String, at: Instant)?
    /// Closes that followed a subscription's SUBSCRIBE at once, per subscription.
    private var strikes: [String: Int] = [:]
    private var queue: [QueuedSend] = []
    /// Consecutive connections that failed or did not last.
    private var failures = 0
    /// Frames from the server that could not be read (each reported once).
    public private(set) var malformedFrames = 0
    /// CONNECTED frames received so far: the current connection's number, stamped on its messages.
    public private(set) var connections = 0

    public init(configuration: STOMPClientConfiguration) {
        self.configuration = configuration
        decoder = STOMPDecoder(limits: configuration.limits)
    }

    public var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    /// Starts the first connection.
    public mutating func start(now: Instant) -> [Action] {
        guard case .idle = phase else { return [] }
        phase = .connecting(attempt: 0, deadline: now + configuration.connectTimeout, connectSent: false)
        return [.state(.connecting(attempt: 0)), .openTransport]
    }

    /// The transport is open: CONNECT goes out.
    public mutating func transportOpened(now: Instant) -> [Action] {
        guard case .connecting(let attempt, let deadline, false) = phase else { return [] }
        phase = .connecting(attempt: attempt, deadline: deadline, connectSent: true)
        decoder = STOMPDecoder(limits: configuration.limits)
        let heartBeat = "\(configuration.heartBeatSend.milliseconds),\(configuration.heartBeatReceive.milliseconds)"
        let connect = STOMPFrame(
            .connect,
            headers: [
                .init("accept-version", "1.2"), .init("host", configuration.virtualHost),
                .init("login", configuration.credentials.login), .init("passcode", configuration.credentials.passcode),
                .init("heart-beat", heartBeat),
            ]
        )
        return [.send(connect.text)]
    }

    /// The transport could not be opened, or ended (nil when we closed it).
    public mutating func transportClosed(_ error: STOMPError?, now: Instant) -> [Action] {
        switch phase {
        case .connecting:
            let reason = error ?? STOMPError(.connectionClosed, "the connection to \(configuration.url) was closed")
            return scheduleReconnect(reason, now: now, closeTransport: false)
        case .connected:
            let reason = error ?? STOMPError(.connectionClosed, "the connection to \(configuration.url) was closed")
            if let suspect = recentSubscribe(now: now) {
                strikes[suspect.id, default: 0] += 1
                if strikes[suspect.id, default: 0] >= 2 {
                    strikes[suspect.id] = nil
                    subscriptions.removeAll { $0.id == suspect.id }
                    let refused = STOMPError(
                        .subscriptionRefused,
                        "\(configuration.url) closed the connection right after SUBSCRIBE to \(suspect.destination), twice: the subscription is refused"
                    )
                    return [.report(refused)] + scheduleReconnect(reason, now: now, closeTransport: false)
                }
            }
            return scheduleReconnect(reason, now: now, closeTransport: false)
        case .idle, .waiting, .closed:
            return []
        }
    }

    /// One text message from the server.
    public mutating func received(_ text: String, now: Instant) -> [Action] {
        switch phase {
        case .connecting(_, _, true), .connected: break
        default: return []
        }
        if case .connected(var session) = phase {
            session.lastReceived = now
            phase = .connected(session)
        }
        let output: STOMPDecoder.Output
        do {
            output = try decoder.decode(text)
        } catch {
            malformedFrames += 1
            return [
                .report(STOMPError(.malformedFrame, "\(configuration.url) sent an unreadable frame: \(error.message)"))
            ]
        }
        var actions: [Action] = []
        for frame in output.frames {
            actions += handle(frame, now: now)
            if isClosed { break }
            if case .waiting = phase { break }
        }
        return actions
    }

    private mutating func handle(_ frame: STOMPFrame, now: Instant) -> [Action] {
        switch (phase, frame.command) {
        case (.connecting(_, _, true), .connected):
            let heartBeat = STOMPHeartBeat.negotiate(
                clientSend: configuration.heartBeatSend,
                clientReceive: configuration.heartBeatReceive,
                serverHeader: frame["heart-beat"]
            )
            phase = .connected(Session(heartBeat: heartBeat, connectedAt: now, lastSent: now, lastReceived: now))
            connections += 1
            var actions: [Action] = []
            for subscription in subscriptions { actions.append(subscribeFrame(subscription, now: now)) }
            let flushed = queue
            queue.removeAll()
            for item in flushed {
                actions.append(.send(item.frame.text))
                actions.append(.complete(item.waiter, .success(())))
            }
            actions.append(.state(.connected(heartBeat)))
            return actions
        case (.connecting(_, _, true), .error):
            let error = Self.serverError(
                .connectRefused,
                "\(configuration.url) refused CONNECT as \(configuration.credentials.login)",
                frame
            )
            return closeForGood(error, sendDisconnect: false)
        case (.connecting, _):
            return [
                .report(
                    STOMPError(.malformedFrame, "\(configuration.url) sent \(frame.command.rawValue) before CONNECTED")
                )
            ]
        case (.connected, .message):
            if let subscription = frame["subscription"] { strikes[subscription] = nil }
            let message = STOMPMessage(
                subscription: frame["subscription"] ?? "",
                destination: frame["destination"],
                headers: frame.headers,
                body: frame.body,
                connection: connections
            )
            return [.deliver(message)]
        case (.connected, .receipt):
            guard let id = frame["receipt-id"] else { return [] }
            return [.receipt(id)]
        case (.connected, .error):
            if let suspect = recentSubscribe(now: now) {
                let error = Self.serverError(
                    .subscriptionRefused,
                    "\(configuration.url) refused the subscription to \(suspect.destination)",
                    frame
                )
                subscriptions.removeAll { $0.id == suspect.id }
                return [.report(error)]
                    + scheduleReconnect(error, now: now, closeTransport: true, countsAsFailure: false)
            }
            let error = Self.serverError(.server, "\(configuration.url) sent ERROR", frame)
            return [.report(error)] + scheduleReconnect(error, now: now, closeTransport: true)
        case (.connected, _):
            return [
                .report(
                    STOMPError(.malformedFrame, "\(configuration.url) sent an unexpected \(frame.command.rawValue)")
                )
            ]
        default:
            return []
        }
    }

    /// Time passed: heart-beats, silence, timeouts, reconnects.
    public mutating func tick(now: Instant) -> [Action] {
        var actions = expireQueue(now: now)
        switch phase {
        case .connecting(_, let deadline, let connectSent) where now >= deadline:
            let what = connectSent ? "no CONNECTED" : "the WebSocket did not open"
            let error = STOMPError(
                .connectTimeout,
                "\(what) from \(configuration.url) within \(configuration.connectTimeout)"
            )
            actions += scheduleReconnect(error, now: now, closeTransport: true)
        case .connected(var session):
            if let incoming = session.heartBeat.incoming,
                now >= session.lastReceived + incoming * configuration.silenceFactor
            {
                let error = STOMPError(
                    .serverSilent,
                    "\(configuration.url) sent nothing for \(incoming * configuration.silenceFactor)"
                )
                actions.append(.report(error))
                actions += scheduleReconnect(error, now: now, closeTransport: true)
            } else if let outgoing = session.heartBeat.outgoing, now >= session.lastSent + outgoing {
                session.lastSent = now
                phase = .connected(session)
                actions.append(.send("\n"))
            }
        case .waiting(let attempt, let until) where now >= until:
            phase = .connecting(attempt: attempt, deadline: now + configuration.connectTimeout, connectSent: false)
            actions += [.state(.connecting(attempt: attempt)), .openTransport]
        default:
            break
        }
        return actions
    }

    /// The next time ``tick(now:)`` has something to do.
    public var nextDeadline: Instant? {
        var next: Instant?
        func consider(_ instant: Instant) { next = next.map { min($0, instant) } ?? instant }
        switch phase {
        case .connecting(_, let deadline, _): consider(deadline)
        case .waiting(_, let until): consider(until)
        case .connected(let session):
            if let incoming = session.heartBeat.incoming {
                consider(session.lastReceived + incoming * configuration.silenceFactor)
            }
            if let outgoing = session.heartBeat.outgoing { consider(session.lastSent + outgoing) }
        case .idle, .closed: break
        }
        if let first = queue.first { consider(first.deadline) }
        return next
    }

    // MARK: Calls from the owner

    /// Subscribes now if connected, and again after every reconnect. `headers` go into the
    /// SUBSCRIBE as they are (RabbitMQ's `prefetch-count` bounds the unacknowledged messages of a
    /// `client-individual` subscription).
    public mutating func subscribe(
        id: String,
        destination: String,
        ack: String = "auto",
        headers: [STOMPHeader] = [],
        now: Instant
    ) -> [Action] {
        guard !isClosed else { return [] }
        subscriptions.removeAll { $0.id == id }
        let reserved: Set<String> = ["id", "destination", "ack"]
        let subscription = Subscription(
            id: id,
            destination: destination,
            ack: ack,
            headers: headers.filter { !reserved.contains($0.name) }
        )
        subscriptions.append(subscription)
        guard case .connected = phase else { return [] }
        return [subscribeFrame(subscription, now: now)]
    }

    public mutating func unsubscribe(id: String, now: Instant) -> [Action] {
        guard subscriptions.contains(where: { $0.id == id }) else { return [] }
        subscriptions.removeAll { $0.id == id }
        guard case .connected = phase else { return [] }
        return [sendFrame(STOMPFrame(.unsubscribe, headers: [.init("id", id)]), now: now)]
    }

    /// Acknowledges `message` (ACK), or gives it back (NACK; `requeue` false asks RabbitMQ to drop
    /// or dead-letter it instead). Only on the connection that delivered it, and never queued: after
    /// a reconnect the broker has already requeued it, and an ACK naming a delivery of an earlier
    /// connection would be refused. Completes `waiter` once the frame is written.
    public mutating func acknowledge(
        _ message: STOMPMessage,
        _ verdict: STOMPAcknowledgement,
        waiter: Waiter,
        now: Instant
    ) -> [Action] {
        guard let id = message.ackID else {
            let error = STOMPError(
                .notAcknowledgeable,
                "the message on subscription \(message.subscription) has neither an ack nor a message-id header"
            )
            return [.complete(waiter, .failure(error))]
        }
        guard case .connected = phase, message.connection == connections else {
            let error = STOMPError(
                .notAcknowledgeable,
                "the connection that delivered message \(id) is gone; the broker delivers it again"
            )
            return [.complete(waiter, .failure(error))]
        }
        let frame: STOMPFrame
        switch verdict {
        case .ack:
            frame = STOMPFrame(.ack, headers: [.init("id", id)])
        case .nack(let requeue):
            frame = STOMPFrame(.nack, headers: [.init("id", id), .init("requeue", requeue ? "true" : "false")])
        }
        return [sendFrame(frame, now: now), .complete(waiter, .success(()))]
    }

    /// The subscriptions that will be renewed on reconnect (refused ones are dropped).
    public var subscriptionIDs: [String] { subscriptions.map(\.id) }

    /// Sends a frame now, or queues it until CONNECTED (bounded, with a timeout).
    public mutating func send(_ frame: STOMPFrame, waiter: Waiter, now: Instant) -> [Action] {
        switch phase {
        case .connected:
            return [sendFrame(frame, now: now), .complete(waiter, .success(()))]
        case .closed:
            return [
                .complete(waiter, .failure(STOMPError(.closed, "the STOMP client for \(configuration.url) is closed")))
            ]
        case .idle, .connecting, .waiting:
            guard queue.count < configuration.sendQueueLimit else {
                let error = STOMPError(
                    .sendQueueFull,
                    "\(configuration.sendQueueLimit) sends already wait for \(configuration.url) to come back"
                )
                return [.complete(waiter, .failure(error))]
            }
            queue.append(QueuedSend(frame: frame, waiter: waiter, deadline: now + configuration.sendQueueTimeout))
            return []
        }
    }

    /// Closes for good: DISCONNECT if connected, queued sends fail with `.closed`.
    public mutating func close() -> [Action] {
        guard !isClosed else { return [] }
        return closeForGood(nil, sendDisconnect: true)
    }

    // MARK: Helpers

    private mutating func subscribeFrame(_ subscription: Subscription, now: Instant) -> Action {
        lastSubscribe = (subscription.id, now)
        return sendFrame(
            STOMPFrame(
                .subscribe,
                headers: [
                    .init("id", subscription.id), .init("destination", subscription.destination),
                    .init("ack", subscription.ack),
                ] + subscription.headers
            ),
            now: now
        )
    }

    /// The subscription whose SUBSCRIBE went out within the last second, if it still exists.
    private func recentSubscribe(now: Instant) -> Subscription? {
        guard let last = lastSubscribe, now - last.at <= .seconds(1) else { return nil }
        return subscriptions.first { $0.id == last.id }
    }

    private mutating func sendFrame(_ frame: STOMPFrame, now: Instant) -> Action {
        if case .connected(var session) = phase {
            session.lastSent = now
            phase = .connected(session)
        }
        return .send(frame.text)
    }

    private mutating func scheduleReconnect(
        _ reason: STOMPError,
        now: Instant,
        closeTransport: Bool,
        countsAsFailure: Bool = true
    ) -> [Action] {
        if case .connected(let session) = phase, now - session.connectedAt >= configuration.reconnect.maximumDelay {
            failures = 0
        }
        if countsAsFailure || failures == 0 { failures += 1 }
        let delay = configuration.reconnect.delay(attempt: failures)
        phase = .waiting(attempt: failures, until: now + delay)
        var actions: [Action] = closeTransport ? [.closeTransport] : []
        actions.append(.state(.reconnecting(attempt: failures, delay: delay, reason: reason)))
        return actions
    }

    private mutating func closeForGood(_ error: STOMPError?, sendDisconnect: Bool) -> [Action] {
        var actions: [Action] = []
        if sendDisconnect, case .connected = phase { actions.append(.send(STOMPFrame(.disconnect).text)) }
        switch phase {
        case .connecting, .connected: actions.append(.closeTransport)
        default: break
        }
        phase = .closed
        let failure = error ?? STOMPError(.closed, "the STOMP client for \(configuration.url) was closed")
        for item in queue { actions.append(.complete(item.waiter, .failure(failure))) }
        queue.removeAll()
        actions.append(.state(.closed(error)))
        return actions
    }

    private mutating func expireQueue(now: Instant) -> [Action] {
        guard let first = queue.first, first.deadline <= now else { return [] }
        var actions: [Action] = []
        while let item = queue.first, item.deadline <= now {
            queue.removeFirst()
            let error = STOMPError(
                .sendTimeout,
                "\(configuration.url) was unreachable for \(configuration.sendQueueTimeout); the message was not sent"
            )
            actions.append(.complete(item.waiter, .failure(error)))
        }
        return actions
    }

    private static func serverError(_ code: STOMPError.Code, _ message: String, _ frame: STOMPFrame) -> STOMPError {
        let body = frame.bodyText.trimmingWhitespace
        return STOMPError(
            code,
            message,
            serverMessage: frame["message"],
            bodyExcerpt: body.isEmpty ? nil : String(body.prefix(200))
        )
    }
}

extension Duration {
    /// Whole milliseconds, for the `heart-beat` header.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        return String(scalars)
    }
}
