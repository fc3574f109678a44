import STOMPClient

/// The broker channel is the call layer's channel in production: its `send` throws the typed
/// `STOMPError` (queue full, timeout, closed, refused), which satisfies the protocol's untyped
/// requirement as is.
extension STOMPSignalingChannel: SignalingChannel {
    /// The connection's states as availability: CONNECTED (subscriptions renewed) is up, a lost
    /// connection is down until it is back, and a refusal (revoked credentials) fails with its
    /// `STOMPError`. It consumes ``events``: read one or the other.
    public var availability: AsyncStream<SignalingAvailability> {
        let events = events
        let (stream, continuation) = AsyncStream.makeStream(of: SignalingAvailability.self)
        let task = Task {
            for await case .state(let state) in events {
                switch state {
                case .connected: continuation.yield(.up)
                case .reconnecting: continuation.yield(.down)
                case .connecting: continue
                case .closed(let error):
                    if let error { continuation.yield(.failed(error)) }
                    continuation.finish()
                    return
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
