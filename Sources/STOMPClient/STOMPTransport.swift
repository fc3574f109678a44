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

/// STOMP over ``WebSocketClient``, subprotocol `v12.stomp` (RabbitMQ Web-STOMP's).
public final class STOMPWebSocketTransport: STOMPTransport {
    private enum Stage {
        case idle
        case opening(CheckedContinuation<Void, any Error>)
        case open
        case ended
    }

    public let url: WebSocketURL
    private let tls: TLSOptions
    private let logger: Logger
    private let stage = Mutex(Stage.idle)
    /// Written once before the socket (and its service thread, the only reader) exists.
    private nonisolated(unsafe) var handler: (@Sendable (STOMPTransportEvent) -> Void)?
    private let client = Mutex<WebSocketClient?>(nil)

    public init(url: WebSocketURL, tls: TLSOptions = TLSOptions(), logger: Logger = Logger(label: "conclave.stomp")) {
        self.url = url
        self.tls = tls
        self.logger = logger
    }

    public func open(handler: @escaping @Sendable (STOMPTransportEvent) -> Void) async throws(STOMPError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                self.handler = handler
                stage.withLock { $0 = .opening(continuation) }
                do throws(WebSocketError) {
                    let socket = try WebSocketClient(
                        url: url,
                        subprotocols: ["v12.stomp"],
                        tls: tls,
                        threadName: "conclave-stomp",
                        logger: logger
                    ) { [weak self] event in self?.handle(event) }
                    client.withLock { $0 = socket }
                } catch {
                    let waiting = stage.withLock { stage -> CheckedContinuation<Void, any Error>? in
                        defer { stage = .ended }
                        if case .opening(let continuation) = stage { return continuation }
                        return nil
                    }
                    waiting?.resume(throwing: STOMPError(error))
                }
            }
        } catch let error as STOMPError {
            throw error
        } catch {
            throw STOMPError(.unreachable, "cannot connect to \(url): \(error)")
        }
    }

    public func send(_ text: String) {
        client.withLock { $0 }?.send(text)
    }

    public func close() async {
        stage.withLock { $0 = .ended }
        guard let socket = client.withLock({ $0 }) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                socket.close()
                continuation.resume()
            }
        }
    }

    /// On the service thread.
    private func handle(_ event: WebSocketClient.Event) {
        switch event {
        case .open:
            let waiting = stage.withLock { stage -> CheckedContinuation<Void, any Error>? in
                guard case .opening(let continuation) = stage else { return nil }
                stage = .open
                return continuation
            }
            waiting?.resume()
        case .message(let text):
            handler?(.message(text))
        case .closed(let error):
            let previous = stage.withLock { stage in
                defer { stage = .ended }
                return stage
            }
            switch previous {
            case .opening(let continuation):
                continuation.resume(
                    throwing: error.map(STOMPError.init)
                        ?? STOMPError(.connectionClosed, "the connection to \(url) closed while opening")
                )
            case .open:
                handler?(.closed(error.map(STOMPError.init)))
            case .idle, .ended:
                break
            }
        }
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
