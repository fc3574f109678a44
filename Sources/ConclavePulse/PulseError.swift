/// A PulseAudio failure, with the server, device or operation it concerns in its message.
public struct PulseError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong, for callers that react differently (no server: go on without audio).
    public enum Kind: Sendable, Hashable {
        /// No server answered at the address libpulse looked up.
        case noServer
        /// The server went away or refused an operation.
        case server
        /// A stream could not be created or connected.
        case stream
        /// The connection was closed by its owner.
        case closed
    }

    /// The kind of failure.
    public var kind: Kind
    /// One line for a person: what, where and libpulse's reason.
    public var message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
