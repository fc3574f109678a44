import Foundation
import Logging
import Synchronization

/// One text channel over a ``WebSocketClient``, used once: ``open(handler:)`` returns when the
/// upgrade is done, then ``send(_:)`` any number of times, then ``close()`` or ``abort()``.
///
/// This is the part the Janus and STOMP transports share: waiting for the upgrade in `async`
/// code, failing that wait with the reason the connection ended, and closing off the caller's
/// executor (closing waits for the service thread to end). Messages go to the handler directly on
/// the service thread, so a transport built on it adds no thread hop per message.
public final class WebSocketChannel: Sendable {
    /// What the channel reports after it is open, in order: messages, then one `.closed`.
    public enum Event: Sendable {
        /// One text message.
        case message(String)
        /// The channel ended: nil when we closed it, else why.
        case closed(WebSocketError?)
    }

    private enum Stage {
        case idle
        case opening(CheckedContinuation<Void, any Error>, @Sendable (Event) -> Void)
        case open(@Sendable (Event) -> Void)
        case ended
    }

    /// The server.
    public let url: WebSocketURL
    private let subprotocols: [String]
    private let tls: TLSOptions
    private let threadName: String
    private let logger: Logger
    private let stage = Mutex(Stage.idle)
    /// The handler of ``open(handler:)``, for messages. Written once, before the client (and so its
    /// service thread, the only reader) exists.
    private nonisolated(unsafe) var messageHandler: (@Sendable (Event) -> Void)?
    private let client = Mutex<WebSocketClient?>(nil)

    /// A channel to `url` offering `subprotocols`; nothing happens until ``open(handler:)``.
    public init(
        url: WebSocketURL,
        subprotocols: [String],
        tls: TLSOptions = TLSOptions(),
        threadName: String = "conclave-ws",
        logger: Logger = Logger(label: "conclave.websocket")
    ) {
        self.url = url
        self.subprotocols = subprotocols
        self.tls = tls
        self.threadName = threadName
        self.logger = logger
    }

    /// Opens the channel; returns once text can be sent. After it returns, `handler` receives every
    /// message and then exactly one `.closed`, on the service thread; it must not block.
    /// - Throws: why it could not open (`.connectionClosed` when the server closed during the
    ///   upgrade).
    public func open(handler: @escaping @Sendable (Event) -> Void) async throws(WebSocketError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                messageHandler = handler
                stage.withLock { $0 = .opening(continuation, handler) }
                do throws(WebSocketError) {
                    let socket = try WebSocketClient(
                        url: url,
                        subprotocols: subprotocols,
                        tls: tls,
                        threadName: threadName,
                        logger: logger
                    ) { [weak self] event in self?.handle(event) }
                    client.withLock { $0 = socket }
                } catch {
                    let waiting = stage.withLock { stage -> CheckedContinuation<Void, any Error>? in
                        defer { stage = .ended }
                        if case .opening(let continuation, _) = stage { return continuation }
                        return nil
                    }
                    waiting?.resume(throwing: error)
                }
            }
        } catch let error as WebSocketError {
            throw error
        } catch {
            throw WebSocketError(.unreachable, url: "\(url)", "cannot connect to \(url): \(error)")
        }
    }

    /// Sends one text message; thread-safe, never blocks. Dropped once the channel has ended.
    public func send(_ text: String) {
        client.withLock { $0 }?.send(text)
    }

    /// Closes the channel and returns when it has ended (the handler then sees `.closed(nil)`).
    public func close() async {
        await Self.offThread(client.withLock { $0 }) { $0.close() }
    }

    /// Ends the channel as a network failure would (the handler sees `.closed(.connectionClosed)`).
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
                    throwing: error
                        ?? WebSocketError(
                            .connectionClosed,
                            url: "\(url)",
                            "the connection to \(url) closed while opening"
                        )
                )
            case .open(let handler):
                handler(.closed(error))
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
