import JanusClient
import JanusProtocol

/// Why joining a call failed, in words a user can act on.
public enum CallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Janus could not be reached at all.
    case janusUnreachable(url: String, reason: String)
    /// Janus refused our credentials.
    case unauthorized(url: String)
    /// The room does not exist.
    case roomNotFound(room: UInt64, url: String)
    /// Someone with our user id is already publishing in the room.
    case participantAlreadyPresent(userID: String, feed: UInt64, room: UInt64)
    /// Janus refused a step of the join.
    case janus(step: String, error: String)
    /// Media could not be set up (ICE, DTLS, a source).
    case media(step: String, error: String)

    public var description: String {
        switch self {
        case .janusUnreachable(let url, let reason): "cannot reach Janus at \(url): \(reason)"
        case .unauthorized(let url):
            "Janus at \(url) refused the request: wrong or missing API secret or token (403 unauthorized)"
        case .roomNotFound(let room, let url):
            "room \(room) does not exist on \(url) (create it with 'conclave call create')"
        case .participantAlreadyPresent(let userID, let feed, let room):
            "participant '\(userID)' is already in room \(room) (feed \(feed)); another conclave is running as this "
                + "participant. If that one crashed, resume with 'conclave rejoin CALL_ID'"
        case .janus(let step, let error): "\(step) failed: \(error)"
        case .media(let step, let error): "\(step) failed: \(error)"
        }
    }

    /// Maps an error of `step` to a ``CallError``, recognising Janus's authorization refusals.
    static func from(_ error: any Error, step: String, url: String) -> CallError {
        if let error = error as? CallError { return error }
        if let error = error as? JanusClientError {
            if error.janusError?.code == JanusError.unauthorized
                || error.janusError?.code == JanusError.videoRoomUnauthorized
            {
                return .unauthorized(url: url)
            }
            switch error.code {
            case .unreachable, .invalidURL, .tlsFailure, .handshakeRejected:
                return .janusUnreachable(url: url, reason: error.message)
            default:
                return .janus(step: step, error: error.message)
            }
        }
        return .media(step: step, error: "\(error)")
    }
}
