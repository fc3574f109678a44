/// Why a WebSocket could not be opened or ended. Every error names the URL it is about, so that a
/// message shown to a person says which server failed.
public struct WebSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure, for code that reacts to it (a caller maps these to its own codes).
    public enum Code: Sendable, Hashable {
        /// The text is not a ws:// or wss:// URL.
        case invalidURL
        /// Nothing answered at the address (refused, unreachable, name not found, connect timeout).
        case unreachable
        /// TLS failed: an untrusted or invalid certificate, an unreadable CA file, a handshake error.
        case tlsFailure
        /// The server answered but refused the WebSocket upgrade (wrong path or subprotocol?).
        case handshakeRejected
        /// The open connection ended without our asking.
        case connectionClosed
    }

    /// The kind of failure.
    public var code: Code
    /// The URL as given (or as parsed), for messages.
    public var url: String
    /// What happened, for people; it includes the URL.
    public var message: String

    /// Creates an error about `url`.
    public init(_ code: Code, url: String, _ message: String) {
        self.code = code
        self.url = url
        self.message = message
    }

    public var description: String { message }
}
