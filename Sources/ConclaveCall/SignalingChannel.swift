/// Where a call's signaling messages go and come from (STOMP to RabbitMQ in production).
///
/// Bodies are ECall's `SignalMessage` JSON; a channel routes them by the target device id, as
/// ECall's `/exchange/ecall.signal.out/<deviceId>` destinations do, and hands this device's own
/// messages out in arrival order.
public protocol SignalingChannel: Sendable {
    /// Sends `body` to the device `deviceID`.
    func send(_ body: String, toDevice deviceID: UInt64) async throws
    /// The messages addressed to this device; read by one task.
    var messages: AsyncStream<String> { get }
    /// Whether the channel can carry messages, as it changes; read by one task. A channel that
    /// never goes down (in memory) reports nothing.
    var availability: AsyncStream<SignalingAvailability> { get }
}

extension SignalingChannel {
    public var availability: AsyncStream<SignalingAvailability> { AsyncStream { $0.finish() } }
}

/// A change in whether a ``SignalingChannel`` carries messages: the key host does not rotate into
/// an outage (``ECallSignaling/CallKeyLifecycle``), and a channel that fails for good says why.
public enum SignalingAvailability: Sendable {
    /// Connected (again): messages go through.
    case up
    /// Lost, reconnecting: sends wait or fail.
    case down
    /// Down for good (the broker refused this device's credentials, say); `error` says why.
    case failed(any Error)
}
