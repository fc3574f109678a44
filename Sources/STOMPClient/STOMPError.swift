/// Why a STOMP connection, subscription or send failed. Server refusals carry the ERROR frame's
/// `message` header and the start of its body, so that a log line says what the broker objected to.
public struct STOMPError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// The URL is not ws:// or wss://.
        case invalidURL
        /// Nothing answered, TLS failed, or the WebSocket upgrade was refused.
        case unreachable
        /// The open connection dropped.
        case connectionClosed
        /// No CONNECTED within the connect timeout.
        case connectTimeout
        /// The server answered CONNECT with ERROR (wrong login or passcode, unknown vhost): final,
        /// the client does not retry with the same credentials.
        case connectRefused
        /// The server refused a subscription (no permission to read that destination).
        case subscriptionRefused
        /// An ERROR frame after CONNECTED (the server then closes the connection).
        case server
        /// Nothing, not even a heart-beat, arrived within the silence timeout.
        case serverSilent
        /// The server sent bytes that are not a STOMP frame, or a frame over the limits.
        case malformedFrame
        /// Too many sends are waiting for the connection to come back.
        case sendQueueFull
        /// A queued send waited longer than its timeout.
        case sendTimeout
        /// The client was closed.
        case closed
        /// An ACK or NACK that cannot be sent: the message has no id, or the connection that
        /// delivered it is gone (the broker then delivers it again).
        case notAcknowledgeable
    }

    public var code: Code
    /// What happened, for people.
    public var message: String
    /// The ERROR frame's `message` header, when the server sent one.
    public var serverMessage: String?
    /// The first bytes of the ERROR frame's body (at most 200 characters).
    public var bodyExcerpt: String?

    public init(_ code: Code, _ message: String, serverMessage: String? = nil, bodyExcerpt: String? = nil) {
        self.code = code
        self.message = message
        self.serverMessage = serverMessage
        self.bodyExcerpt = bodyExcerpt
    }

    public var description: String {
        var text = message
        if let serverMessage { text += " (server: \(serverMessage)" + (bodyExcerpt.map { ": \($0)" } ?? "") + ")" }
        return text
    }
}
