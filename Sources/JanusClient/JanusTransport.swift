public import ConclaveWebSocket
import Foundation
import Logging
import Synchronization

/// What a transport reports after it is open, in order: messages, then one `.closed`.
public enum JanusTransportEvent: Sendable {
    /// One text message from Janus.
    case message(String)
    /// The transport ended: nil when we closed it, else why (`.connectionClosed` for a drop).
    case closed(JanusClientError?)
}

/// A text channel to Janus: the WebSocket in production, an in-memory Janus in tests.
///
/// ``JanusConnection`` makes one transport per connection attempt (a reconnect makes a new one),
/// so an implementation is used once: ``open(handler:)``, then ``send(_:)`` any number of times,
/// then ``close()``. The handler runs on any thread, must not block, and is called in order.
public protocol JanusTransport: AnyObject, Sendable {
    /// Opens the channel. Returns once messages can be sent; throws a ``JanusClientError``
    /// (`.unreachable`, `.tlsFailure`, `.handshakeRejected`) when it cannot be opened. After it
    /// returns, `handler` receives every message and then exactly one `.closed`.
    func open(handler: @escaping @Sendable (JanusTransportEvent) -> Void) async throws(JanusClientError)
    /// Sends one text message; thread-safe, never blocks. Dropped once the transport has ended.
    func send(_ text: String)
    /// Closes the channel and returns when it has ended (the handler then sees `.closed(nil)`).
    func close() async
    /// Ends the channel as a network failure would (the handler sees `.closed(.connectionClosed)`).
    func abort() async
}

/// Janus's WebSocket API over ``WebSocketClient`` (subprotocol `janus-protocol`).
public final class JanusWebSocketTransport: JanusTransport {
    private enum Stage {
        case idle
        case opening(CheckedContinuation<Void, any Error>, @Sendable (JanusTransportEvent) -> Void)
        case open(@Sendable (JanusTransportEvent) -> Void)
        case ended
    }

    /// The server.
    public let url: WebSocketURL
    private let tls: TLSOptions
    private let logger: Logger
    private let stage = Mutex(Stage.idle)
    /// The handler of ``open(handler:)``, for messages. Written once, before the client (and so its
    /// service thread, the only reader) exists.
    private nonisolated(unsafe) var messageHandler: (@Sendable (JanusTransportEvent) -> Void)?
    private let client = Mutex<WebSocketClient?>(nil)

    /// A transport to `url`; nothing happens until ``open(handler:)``.
    public init(url: WebSocketURL, tls: TLSOptions = TLSOptions(), logger: Logger = Logger(label: "conclave.janus")) {
        self.url = url
        self.tls = tls
        self.logger = logger
    }

    public func open(handler: @escaping @Sendable (JanusTransportEvent) -> Void) async throws(JanusClientError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                messageHandler = handler
                stage.withLock { $0 = .opening(continuation, handler) }
                do throws(WebSocketError) {
                    let socket = try WebSocketClient(
                        url: url,
                        subprotocols: ["janus-protocol"],  // Janus refuses the upgrade without it
                        tls: tls,
                        logger: logger
                    ) { [weak self] event in self?.handle(event) }
                    client.withLock { $0 = socket }
                } catch {
                    let waiting = stage.withLock { stage -> CheckedContinuation<Void, any Error>? in
                        defer { stage = .ended }
                        if case .opening(let continuation, _) = stage { return continuation }
                        return nil
                    }
                    waiting?.resume(throwing: JanusClientError(error))
                }
            }
        } catch let error as JanusClientError {
            throw error
        } catch {
            throw JanusClientError(.unreachable, "cannot connect to \(url): \(error)")
        }
    }

    public func send(_ text: String) {
        client.withLock { $0 }?.send(text)
    }

    public func close() async {
        await Self.offThread(client.withLock { $0 }) { $0.close() }
    }

    public func abort() async {
        await Self.offThread(client.withLock { $0 }) { $0.abort() }
    }

    /// Runs on the service thread.
    private func handle(_ event: WebSocketClient.Event) {
        switch event {
        case .open:
            let waiting = stage.withLock { stage -> CheckedContinuation<Void, any Error>? in
                guard case .opening(let continuation, let handler) = stage else { return nil }
                stage = .open(handler)
                return continuation
            }
            waiting?.resume()
        case .message(let text):
            // Set before the socket existed and never changed: read without the lock.
            messageHandler?(.message(text))
        case .closed(let error):
            let previous = stage.withLock { stage in
                defer { stage = .ended }
                return stage
            }
            switch previous {
            case .opening(let continuation, _):
                continuation.resume(
                    throwing: error.map(JanusClientError.init)
                        ?? JanusClientError(.connectionClosed, "the connection to \(url) closed while opening")
                )
            case .open(let handler):
                handler(.closed(error.map(JanusClientError.init)))
            case .idle, .ended:
                break
            }
        }
    }

    /// Closing waits for the service thread to end; do that off the caller's executor.
    private static func offThread(_ client: WebSocketClient?, _ body: @escaping @Sendable (WebSocketClient) -> Void)
        async
    {
        guard let client else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                body(client)
                continuation.resume()
            }
        }
    }
}

extension JanusClientError {
    /// The same failure in Janus's terms: the codes map one to one, the message (with its URL) stays.
    public init(_ error: WebSocketError) {
        let code: Code =
            switch error.code {
            case .invalidURL: .invalidURL
            case .unreachable: .unreachable
            case .tlsFailure: .tlsFailure
            case .handshakeRejected: .handshakeRejected
            case .connectionClosed: .connectionClosed
            }
        self.init(code, error.message)
    }
}
