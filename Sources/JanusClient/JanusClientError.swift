import JanusProtocol

/// Why a Janus operation failed. Every case carries a message that names what and where.
public struct JanusClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure, for code that reacts to it (reconnect on `.connectionClosed`, say).
    public enum Code: Sendable, Hashable {
        /// The URL is not a ws:// or wss:// URL.
        case invalidURL
        /// Nothing answered at the address (refused, unreachable, name not found, connect timeout).
        case unreachable
        /// TLS failed: untrusted or invalid certificate, or a handshake error.
        case tlsFailure
        /// The server answered but refused the WebSocket upgrade (not a Janus WebSocket endpoint?).
        case handshakeRejected
        /// The connection closed while the request was outstanding.
        case connectionClosed
        /// No reply within the request's timeout.
        case timeout
        /// Janus sent something that is not a valid Janus message.
        case malformedMessage
        /// Janus answered with an error (see ``JanusClientError/janusError``).
        case janus
        /// A reply had an unexpected shape (for example no id in a `create` success).
        case unexpectedReply
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// Janus's own error, when `code == .janus`.
    public var janusError: JanusError?

    /// Creates an error.
    public init(_ code: Code, _ message: String, janusError: JanusError? = nil) {
        self.code = code
        self.message = message
        self.janusError = janusError
    }

    /// Wraps an error reported by Janus for `request`.
    public static func janus(_ error: JanusError, request: String) -> JanusClientError {
        JanusClientError(.janus, "\(request): \(error)", janusError: error)
    }

    public var description: String { message }

    /// True when Janus says the session does not exist (expired or destroyed, or Janus restarted).
    public var isSessionGone: Bool { janusError?.code == JanusError.sessionNotFound }
}
