public import ConclaveWebSocket
public import Logging
import STOMPProtocol

/// The call layer's channel to other devices, over a STOMP broker laid out as ECall's: each device
/// reads `/exchange/ecall.signal.out/<its id>` and writes to `/exchange/ecall.signal.in/<target id>`.
/// ECall's backend consumes `ecall.signal.in`; a bare RabbitMQ routes it to `ecall.signal.out` by an
/// exchange-to-exchange binding (config/rabbitmq/README.md), so the routing key names the target.
///
/// Sends made while the connection is down wait in a bounded queue and go out, in order, once it is
/// back and the subscription renewed; a send that cannot (queue full, 30 s passed, client closed,
/// credentials refused) throws instead of being lost silently.
public final class STOMPSignalingChannel: Sendable {
    /// Where and as whom to connect.
    public struct Configuration: Sendable {
        /// `ws://host:port/ws` (RabbitMQ Web-STOMP's path).
        public var url: String
        /// This device's id: it names the subscription and the default login.
        public var deviceID: UInt64
        /// The broker login; ECall's is `device-<id>`.
        public var login: String
        public var passcode: String
        /// The virtual host: `ecall`.
        public var virtualHost: String
        /// Heart-beats, timeouts, reconnect and queue settings (defaults are ECall's).
        public var tuning: (@Sendable (inout STOMPClientConfiguration) -> Void)?

        public init(
            url: String,
            deviceID: UInt64,
            passcode: String,
            login: String? = nil,
            virtualHost: String = "ecall"
        ) {
            self.url = url
            self.deviceID = deviceID
            self.login = login ?? "device-\(deviceID)"
            self.passcode = passcode
            self.virtualHost = virtualHost
        }
    }

    /// The exchange devices send to.
    public static let inboundExchange = "ecall.signal.in"
    /// The exchange devices read from.
    public static let outboundExchange = "ecall.signal.out"

    public let deviceID: UInt64
    /// Every message body that reaches this device, in order.
    public let messages: AsyncStream<String>
    /// The connection's states, errors and receipts.
    public var events: AsyncStream<STOMPConnection.Event> { connection.events }
    /// The connection underneath, for tests and diagnostics.
    public let connection: STOMPConnection
    private let forwarder: Task<Void, Never>

    /// A channel for `configuration.deviceID`; call ``connect()``.
    public init(
        configuration: Configuration,
        tls: TLSOptions = TLSOptions(),
        logger: Logger = Logger(label: "conclave.signaling"),
        transport: (@Sendable (WebSocketURL) -> any STOMPTransport)? = nil
    ) throws(STOMPError) {
        var client = STOMPClientConfiguration(
            url: configuration.url,
            virtualHost: configuration.virtualHost,
            credentials: STOMPCredentials(login: configuration.login, passcode: configuration.passcode)
        )
        configuration.tuning?(&client)
        deviceID = configuration.deviceID
        connection = try STOMPConnection(configuration: client, tls: tls, logger: logger, transport: transport)
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        messages = stream
        let subscription = Self.subscriptionID(configuration.deviceID)
        let incoming = connection.messages
        forwarder = Task {
            for await message in incoming where message.subscription == subscription {
                continuation.yield(message.text)
            }
            continuation.finish()
        }
        connection.subscribe(id: subscription, destination: Self.destination(forDevice: configuration.deviceID))
    }

    deinit { forwarder.cancel() }

    /// Connects and subscribes; returns after the first CONNECTED. Throws `.connectRefused` when the
    /// broker refuses the credentials (the channel is then closed).
    public func connect() async throws(STOMPError) {
        connection.start()
        try await connection.waitUntilConnected()
    }

    /// Sends one message body (JSON text) so that it reaches the device `deviceID`.
    public func send(_ body: String, toDevice deviceID: UInt64) async throws(STOMPError) {
        let frame = STOMPFrame(
            .send,
            headers: [
                .init("destination", "/exchange/\(Self.inboundExchange)/\(deviceID)"),
                .init("content-type", "application/json"),
            ],
            text: body
        )
        try await connection.send(frame)
    }

    /// Disconnects; ``messages`` ends.
    public func close() async {
        await connection.close()
    }

    /// `/exchange/ecall.signal.out/<id>`: what device `id` subscribes to.
    public static func destination(forDevice id: UInt64) -> String { "/exchange/\(outboundExchange)/\(id)" }

    /// `sub-<id>`, ECall's subscription id.
    public static func subscriptionID(_ id: UInt64) -> String { "sub-\(id)" }
}
