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

/// Janus's WebSocket API over a ``WebSocketChannel`` (subprotocol `janus-protocol`).
public final class JanusWebSocketTransport: JanusTransport {
    /// The server.
    public var url: WebSocketURL { channel.url }
    private let channel: WebSocketChannel

    /// A transport to `url`; nothing happens until ``open(handler:)``.
    public init(url: WebSocketURL, tls: TLSOptions = TLSOptions(), logger: Logger = Logger(label: "conclave.janus")) {
        // Janus refuses the upgrade without its subprotocol.
        channel = WebSocketChannel(url: url, subprotocols: ["janus-protocol"], tls: tls, logger: logger)
    }

    public func open(handler: @escaping @Sendable (JanusTransportEvent) -> Void) async throws(JanusClientError) {
        do {
            try await channel.open { event in
                switch event {
                case .message(let text): handler(.message(text))
                case .closed(let error): handler(.closed(error.map(JanusClientError.init)))
                }
            }
        } catch {
            throw JanusClientError(error)
        }
    }

    public func send(_ text: String) { channel.send(text) }

    public func close() async { await channel.close() }

    public func abort() async { await channel.abort() }
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
