import STOMPClient

/// The broker channel is the call layer's channel in production: its `send` throws the typed
/// `STOMPError` (queue full, timeout, closed, refused), which satisfies the protocol's untyped
/// requirement as is.
extension STOMPSignalingChannel: SignalingChannel {}
