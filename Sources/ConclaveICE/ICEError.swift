/// Why an ICE operation failed, with the offending input where there is one.
public enum ICEError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The loop thread could not be started (`pthread_create` result).
    case threadCreationFailed(errno: Int32)
    /// libnice refused to create the agent or its stream.
    case agentCreationFailed(step: String)
    /// A configured local address, STUN or TURN server is not a numeric IP address (libnice
    /// does not resolve names).
    case invalidAddress(field: String, value: String)
    /// A remote candidate line could not be parsed; `field` names the part that is wrong.
    case malformedCandidate(candidate: String, field: String, reason: String)
    /// A well-formed candidate this agent cannot use (for example an mDNS `.local` host name,
    /// a TCP candidate with ICE-TCP off, or a component other than 1 with rtcp-mux).
    case unsupportedCandidate(candidate: String, reason: String)
    /// Remote ICE credentials are empty or contain characters outside ice-char (RFC 8445).
    case invalidCredentials(field: String, reason: String)
    /// libnice rejected an operation (`step` is the libnice function).
    case operationFailed(step: String)
    /// Settings that cannot work together (relay-only without a TURN server, say).
    case invalidConfiguration(field: String, reason: String)
    /// The agent was closed.
    case closed

    public var description: String {
        switch self {
        case .threadCreationFailed(let errno): "could not start the ICE loop thread (error \(errno))"
        case .agentCreationFailed(let step): "could not create the ICE agent: \(step) failed"
        case .invalidAddress(let field, let value): "\(field) \"\(value)\" is not a numeric IP address"
        case .malformedCandidate(let candidate, let field, let reason):
            "malformed ICE candidate (\(field): \(reason)): \"\(candidate)\""
        case .unsupportedCandidate(let candidate, let reason): "unsupported ICE candidate (\(reason)): \"\(candidate)\""
        case .invalidCredentials(let field, let reason): "invalid remote ICE \(field): \(reason)"
        case .operationFailed(let step): "ICE operation failed: \(step)"
        case .invalidConfiguration(let field, let reason): "invalid ICE \(field): \(reason)"
        case .closed: "the ICE agent is closed"
        }
    }
}
