import ConclaveCall
import Synchronization

/// A broker in memory: routes message bodies to devices by id, as RabbitMQ routes
/// `ecall.signal.in` to `ecall.signal.out/<deviceId>`, so that call signaling can be tested without
/// a broker. Messages to a device that has not taken its channel yet wait for it.
public final class InMemorySignalingHub: Sendable {
    private struct Inbox {
        var stream: AsyncStream<String>
        var continuation: AsyncStream<String>.Continuation
    }

    private let inboxes = Mutex<[UInt64: Inbox]>([:])
    private let counts = Mutex<[UInt64: Int]>([:])

    public init() {}

    /// The channel of device `deviceID`. Each device takes its channel once.
    public func channel(forDevice deviceID: UInt64) -> InMemorySignalingChannel {
        InMemorySignalingChannel(hub: self, deviceID: deviceID, messages: inbox(deviceID).stream)
    }

    /// Puts `body` in the inbox of `deviceID`, from nobody in particular: how a test plays a
    /// stranger with access to the broker.
    public func deliver(_ body: String, toDevice deviceID: UInt64) {
        counts.withLock { $0[deviceID, default: 0] += 1 }
        inbox(deviceID).continuation.yield(body)
    }

    /// How many messages were delivered to `deviceID` so far.
    public func deliveredCount(toDevice deviceID: UInt64) -> Int { counts.withLock { $0[deviceID] ?? 0 } }

    /// Ends every device's message stream.
    public func close() {
        for inbox in inboxes.withLock({ Array($0.values) }) { inbox.continuation.finish() }
    }

    private func inbox(_ deviceID: UInt64) -> Inbox {
        inboxes.withLock { inboxes in
            if let inbox = inboxes[deviceID] { return inbox }
            let (stream, continuation) = AsyncStream.makeStream(of: String.self)
            let inbox = Inbox(stream: stream, continuation: continuation)
            inboxes[deviceID] = inbox
            return inbox
        }
    }
}

/// One device's end of an ``InMemorySignalingHub``.
public struct InMemorySignalingChannel: SignalingChannel {
    let hub: InMemorySignalingHub
    /// The device this channel belongs to.
    public let deviceID: UInt64
    public let messages: AsyncStream<String>

    public func send(_ body: String, toDevice deviceID: UInt64) async throws {
        hub.deliver(body, toDevice: deviceID)
    }
}
