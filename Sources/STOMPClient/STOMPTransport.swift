public import ConclaveWebSocket
import Foundation
import Logging
import Synchronization

/// What a transport reports after it is open, in order: messages, then one `.closed`.
public enum STOMPTransportEvent: Sendable {
    case message(String)
    /// Ended: nil when we closed it.
    case closed(STOMPError?)
}

/// A text channel to a STOMP server: the WebSocket in production, a scripted server in tests.
/// Used once: ``open(handler:)``, sends, then ``close()``. The handler runs on any one thread at a
/// time, in order, and must not block.
public protocol STOMPTransport: AnyObject, Sendable {
    /// Returns once text can be sent; throws `.unreachable` or `.invalidURL` when it cannot open.
    func open(handler: @escaping @Sendable (STOMPTransportEvent) -> Void) async throws(STOMPError)
    /// Thread-safe, never blocks; dropped once the transport ended.
    func send(_ text: String)
    /// Ends the channel; returns when it has ended. Events after this call are not delivered.
    func close() async
}

/// STOMP over a ``WebSocketChannel``, subprotocol `v12.stomp` (RabbitMQ Web-STOMP's).
public final class STOMPWebSocketTransport: STOMPTransport {
    public var url: WebSocketURL { channel.url }
    private let channel: WebSocketChannel
    /// Set by ``close()``: the protocol promises no events after it, not even the `.closed(nil)`
    /// that the channel reports for a close we asked for.
    private let closing = Mutex(false)

    public init(url: WebSocketURL, tls: TLSOptions = TLSOptions(), logger: Logger = Logger(label: "conclave.stomp")) {
        channel = WebSocketChannel(
            url: url,
            subprotocols: ["v12.stomp"],
            tls: tls,
            threadName: "conclave-stomp",
            logger: logger
        )
    }

    public func open(handler: @escaping @Sendable (STOMPTransportEvent) -> Void) async throws(STOMPError) {
        do {
            try await channel.open { [weak self] event in
                guard let self, !self.closing.withLock({ $0 }) else { return }
                switch event {
                case .message(let text): handler(.message(text))
                case .closed(let error): handler(.closed(error.map(STOMPError.init)))
                }
            }
        } catch {
            throw STOMPError(error)
        }
    }

    public func send(_ text: String) { channel.send(text) }

    public func close() async {
        closing.withLock { $0 = true }
        await channel.close()
    }
}

extension STOMPError {
    /// A WebSocket failure in STOMP's terms (the message, with its URL, stays).
    public init(_ error: WebSocketError) {
        let code: Code =
            switch error.code {
            case .invalidURL: .invalidURL
            case .unreachable, .tlsFailure, .handshakeRejected: .unreachable
            case .connectionClosed: .connectionClosed
            }
        self.init(code, error.message)
    }
}
