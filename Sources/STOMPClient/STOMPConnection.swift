public import ConclaveWebSocket
import Foundation
public import Logging
public import STOMPProtocol
import Synchronization

/// A STOMP 1.2 connection over WebSocket that stays up: it reconnects with backoff, subscribes
/// again, exchanges heart-beats and notices a silent server.
///
/// The rules live in ``STOMPClientCore``; this class is its shell, like `JanusConnection`: the core
/// sits under one lock and is fed from whichever thread has news (the caller's for a send, the
/// WebSocket's for a message, a timer task for heart-beats and timeouts), and what it decides is
/// carried out once the lock is released. A message reaches ``messages`` straight from the
/// WebSocket's thread.
public final class STOMPConnection: Sendable {
    /// What happens to the connection besides messages.
    public enum Event: Sendable, Hashable {
        case state(STOMPConnectionState)
        /// An error that did not close the connection for good (it may reconnect).
        case error(STOMPError)
        /// A RECEIPT asked for with a `receipt` header.
        case receipt(String)
    }

    typealias Core = STOMPClientCore<CheckedContinuation<Void, any Error>>

    private struct Shell {
        var core: Core
        var transport: (any STOMPTransport)?
        var generation = 0
        var timer: Task<Void, Never>?
        var timerDeadline: ContinuousClock.Instant?
        var connectWaiters: [CheckedContinuation<Void, any Error>] = []
        var everConnected = false
    }

    public let url: WebSocketURL
    /// Every MESSAGE, in order, from every subscription.
    public let messages: AsyncStream<STOMPMessage>
    /// States, errors and receipts.
    public let events: AsyncStream<Event>
    private let messageContinuation: AsyncStream<STOMPMessage>.Continuation
    private let eventContinuation: AsyncStream<Event>.Continuation
    private let logger: Logger
    private let makeTransport: @Sendable () -> any STOMPTransport
    private let shell: Mutex<Shell>

    /// A connection to `configuration.url`; nothing happens until ``start()``. `transport` makes
    /// the channel for each attempt (nil: the WebSocket); tests pass a scripted server.
    public init(
        configuration: STOMPClientConfiguration,
        tls: TLSOptions = TLSOptions(),
        logger: Logger = Logger(label: "conclave.stomp"),
        transport: (@Sendable (WebSocketURL) -> any STOMPTransport)? = nil
    ) throws(STOMPError) {
        do {
            url = try WebSocketURL(configuration.url)
        } catch {
            throw STOMPError(error)
        }
        var tagged = logger
        tagged[metadataKey: "stomp"] = "\(url)"
        self.logger = tagged
        let url = url
        let logger = tagged
        if let transport {
            makeTransport = { transport(url) }
        } else {
            makeTransport = { STOMPWebSocketTransport(url: url, tls: tls, logger: logger) }
        }
        (messages, messageContinuation) = AsyncStream.makeStream(of: STOMPMessage.self)
        (events, eventContinuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        shell = Mutex(Shell(core: Core(configuration: configuration)))
    }

    /// Starts connecting (and reconnecting, until ``close()``).
    public func start() {
        drive { $0.core.start(now: .now) }
    }

    /// Returns once CONNECTED has been received at least once; throws when the client closed first
    /// (the server refused the credentials, or ``close()``).
    public func waitUntilConnected() async throws(STOMPError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = shell.withLock { shell -> Result<Void, STOMPError>? in
                    if shell.everConnected { return .success(()) }
                    if shell.core.isClosed {
                        return .failure(STOMPError(.closed, "the STOMP client for \(url) is closed"))
                    }
                    shell.connectWaiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } catch let error as STOMPError {
            throw error
        } catch {
            throw STOMPError(.closed, "\(error)")
        }
    }

    /// Subscribes now or, while disconnected, as soon as CONNECTED arrives; renewed on every
    /// reconnect. `headers` are added to SUBSCRIBE (`prefetch-count`, ...).
    public func subscribe(id: String, destination: String, ack: String = "auto", headers: [STOMPHeader] = []) {
        drive { $0.core.subscribe(id: id, destination: destination, ack: ack, headers: headers, now: .now) }
    }

    /// ACKs `message`, a delivery of a `client` or `client-individual` subscription. Throws
    /// `.notAcknowledgeable` when the connection that delivered it is gone (the broker delivers
    /// it again, so there is nothing left to acknowledge).
    public func ack(_ message: STOMPMessage) async throws(STOMPError) {
        try await acknowledge(message, .ack)
    }

    /// NACKs `message`: with `requeue` the broker delivers it again, to this or another consumer.
    public func nack(_ message: STOMPMessage, requeue: Bool) async throws(STOMPError) {
        try await acknowledge(message, .nack(requeue: requeue))
    }

    private func acknowledge(_ message: STOMPMessage, _ verdict: STOMPAcknowledgement) async throws(STOMPError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                drive { $0.core.acknowledge(message, verdict, waiter: continuation, now: .now) }
            }
        } catch let error as STOMPError {
            throw error
        } catch {
            throw STOMPError(.closed, "\(error)")
        }
    }

    public func unsubscribe(id: String) {
        drive { $0.core.unsubscribe(id: id, now: .now) }
    }

    /// Writes `frame` now, or when the connection is back (a bounded queue: see
    /// ``STOMPClientConfiguration/sendQueueLimit`` and ``STOMPClientConfiguration/sendQueueTimeout``).
    /// Returns once the frame was handed to the WebSocket; the broker's receipt, if wanted, arrives
    /// on ``events``.
    public func send(_ frame: STOMPFrame) async throws(STOMPError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                drive { $0.core.send(frame, waiter: continuation, now: .now) }
            }
        } catch let error as STOMPError {
            throw error
        } catch {
            throw STOMPError(.closed, "\(error)")
        }
    }

    /// Frames from the server that could not be read.
    public var malformedFrames: Int { shell.withLock { $0.core.malformedFrames } }

    /// Sends DISCONNECT, closes the WebSocket and ends the streams. Queued sends fail with `.closed`.
    public func close() async {
        let transport = shell.withLock { $0.transport }
        drive { $0.core.close() }
        await transport?.close()
    }

    // MARK: Transport

    private func openTransport() {
        let transport = makeTransport()
        let generation = shell.withLock { shell in
            shell.generation += 1
            shell.transport = transport
            return shell.generation
        }
        Task {
            do throws(STOMPError) {
                try await transport.open { [weak self] event in self?.transportEvent(event, generation: generation) }
                drive { shell in
                    guard shell.generation == generation else { return [] }
                    return shell.core.transportOpened(now: .now)
                }
            } catch {
                logger.debug("connect attempt failed", metadata: ["error": "\(error)"])
                drive { shell in
                    guard shell.generation == generation else { return [] }
                    shell.transport = nil
                    return shell.core.transportClosed(error, now: .now)
                }
            }
        }
    }

    private func transportEvent(_ event: STOMPTransportEvent, generation: Int) {
        drive { shell in
            guard shell.generation == generation else { return [] }
            switch event {
            case .message(let text):
                return shell.core.received(text, now: .now)
            case .closed(let error):
                shell.transport = nil
                return shell.core.transportClosed(error, now: .now)
            }
        }
    }

    // MARK: Actions

    private enum Effect {
        case open
        case close(any STOMPTransport)
        case send(String)
        case deliver(STOMPMessage)
        case event(Event)
        case resume(CheckedContinuation<Void, any Error>, Result<Void, STOMPError>)
        case finish
    }

    private func drive(_ input: (inout Shell) -> [Core.Action]) {
        let (transport, effects) = shell.withLock { shell in
            let actions = input(&shell)
            let transport = shell.transport
            return (transport, resolve(actions, in: &shell))
        }
        perform(effects, on: transport)
    }

    private func resolve(_ actions: [Core.Action], in shell: inout Shell) -> [Effect] {
        var effects: [Effect] = []
        for action in actions {
            switch action {
            case .openTransport:
                effects.append(.open)
            case .closeTransport:
                shell.generation += 1
                if let transport = shell.transport { effects.append(.close(transport)) }
                shell.transport = nil
            case .send(let text):
                effects.append(.send(text))
            case .deliver(let message):
                effects.append(.deliver(message))
            case .receipt(let id):
                effects.append(.event(.receipt(id)))
            case .complete(let waiter, let result):
                effects.append(.resume(waiter, result))
            case .report(let error):
                effects.append(.event(.error(error)))
            case .state(let state):
                switch state {
                case .connected:
                    shell.everConnected = true
                    for waiter in shell.connectWaiters { effects.append(.resume(waiter, .success(()))) }
                    shell.connectWaiters.removeAll()
                case .closed(let error):
                    let failure = error ?? STOMPError(.closed, "the STOMP client for \(url) was closed")
                    for waiter in shell.connectWaiters { effects.append(.resume(waiter, .failure(failure))) }
                    shell.connectWaiters.removeAll()
                    shell.timer?.cancel()
                    shell.timer = nil
                    shell.timerDeadline = nil
                default:
                    break
                }
                effects.append(.event(.state(state)))
                if case .closed = state { effects.append(.finish) }
            }
        }
        schedule(&shell)
        return effects
    }

    private func perform(_ effects: [Effect], on transport: (any STOMPTransport)?) {
        for effect in effects {
            switch effect {
            case .open:
                openTransport()
            case .close(let old):
                Task { await old.close() }
            case .send(let text):
                transport?.send(text)
            case .deliver(let message):
                messageContinuation.yield(message)
            case .event(let event):
                switch event {
                case .state(.reconnecting(let attempt, let delay, let reason)):
                    logger.notice(
                        "STOMP connection lost; reconnecting",
                        metadata: ["attempt": "\(attempt)", "delay": "\(delay)", "reason": "\(reason)"]
                    )
                case .error(let error):
                    logger.warning("STOMP error", metadata: ["error": "\(error)"])
                default:
                    break
                }
                eventContinuation.yield(event)
            case .resume(let waiter, let result):
                waiter.resume(with: result.mapError { $0 as any Error })
            case .finish:
                messageContinuation.finish()
                eventContinuation.finish()
            }
        }
    }

    /// One timer armed for the core's next deadline (heart-beat, silence, timeouts, reconnect).
    private func schedule(_ shell: inout Shell) {
        guard !shell.core.isClosed, let next = shell.core.nextDeadline else { return }
        if let armed = shell.timerDeadline, armed <= next, shell.timer != nil { return }
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
}

extension STOMPConnection {
    /// The subscriptions renewed on reconnect.
    package var subscriptionIDsForTesting: [String] { shell.withLock { $0.core.subscriptionIDs } }
}
