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
}
