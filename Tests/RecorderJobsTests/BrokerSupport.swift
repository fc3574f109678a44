import ConclaveTestSupport
import Foundation
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Testing

/// The shared collector, under the name these tests use.
typealias Inbox = StreamCollector

/// A STOMP connection to the test broker as device `device`, with its messages and events collected.
struct BrokerClient {
    let connection: STOMPConnection
    let messages: Inbox<STOMPMessage>
    let events: Inbox<STOMPConnection.Event>

    init(_ bed: RabbitMQTestBed, device: UInt64, passcode: String) throws {
        try self.init(url: bed.webSocketURL, device: device, passcode: passcode)
    }

    init(url: String, device: UInt64, passcode: String) throws {
        connection = try makeConnection(url: url, device: device, passcode: passcode)
        messages = Inbox(connection.messages)
        events = Inbox(connection.events)
    }

    /// Connects, or fails within 30 s: a WebSocket stuck before its handshake fails the test
    /// instead of hanging the run.
    func connect() async throws {
        connection.start()
        let connection = connection
        let outcome = await firstWithin(.seconds(30)) { () -> String? in
            do {
                try await connection.waitUntilConnected()
                return nil
            } catch {
                return "\(error)"
            }
        }
        switch outcome {
        case .some(nil): return
        case .some(let error?): throw BrokerTestError(description: error)
        case nil:
            Task { await connection.close() }
            throw BrokerTestError(description: "no STOMP connection to \(connection.url) within 30 s")
        }
    }

    /// Sends `job` to the submit exchange as a persistent message and waits for the broker's
    /// receipt, which RabbitMQ sends once the queue has confirmed the message.
    func submit(_ job: RecordJob) async throws -> Bool {
        try await send(job)
        return await events.first { $0 == .receipt(Self.receipt(for: job)) } != nil
    }

    /// Sends `job` as ``submit(_:)`` does, without waiting for the receipt
    /// (``receipt(for:)`` names it).
    func send(_ job: RecordJob) async throws {
        try await connection.send(
            STOMPFrame(
                .send,
                headers: [
                    .init("destination", RecorderTopology.submitDestination), .init("persistent", "true"),
                    .init("content-type", "application/json"), .init("receipt", Self.receipt(for: job)),
                ],
                body: job.encoded()
            )
        )
    }

    /// The receipt the broker sends once it has taken `job`.
    static func receipt(for job: RecordJob) -> String { "submit-\(job.jobID)" }

    /// Subscribes to the job queue, acknowledging each job by itself.
    func consumeJobs(id: String = "jobs") {
        connection.subscribe(id: id, destination: RecorderTopology.jobQueue, ack: "client-individual")
    }

    /// Acknowledges `message` (its `ack` header, STOMP 1.2).
    func ack(_ message: STOMPMessage) async throws {
        try await connection.send(try ackFrame(message))
    }
}

/// A STOMP connection to `url` as device `device`, reconnecting quickly; not started.
func makeConnection(url: String, device: UInt64, passcode: String) throws -> STOMPConnection {
    let configuration = STOMPClientConfiguration(
        url: url,
        virtualHost: RabbitMQTestBed.virtualHost,
        credentials: STOMPCredentials(login: RabbitMQTestBed.login(forDevice: device), passcode: passcode),
        reconnect: STOMPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(2))
    )
    return try STOMPConnection(configuration: configuration)
}

/// The `ack` header of a MESSAGE, as an ACK frame.
func ackFrame(_ message: STOMPMessage) throws -> STOMPFrame {
    let id = try #require(message.headers.first { $0.name == "ack" }?.value)
    return STOMPFrame(.ack, headers: [.init("id", id)])
}

extension STOMPMessage {
    /// The job in the body, nil if it is not one.
    var job: RecordJob? { try? RecordJob.decode(body) }
    /// The broker delivered it before, to a consumer that went away without acknowledging it.
    var redelivered: Bool { headers.contains { $0.name == "redelivered" && $0.value == "true" } }
}

/// A valid job without a key, for broker tests.
func brokerJob(_ id: String) -> RecordJob {
    RecordJob(
        jobID: id,
        callID: 77,
        room: 1234,
        janusURL: "ws://127.0.0.1:8188/janus",
        crypto: .none,
        output: "calls/\(id)",
        stop: .after(seconds: 30),
        submittedAt: RecorderTime.format(Date())
    )
}

/// Checks `condition` every 100 ms (it asks the broker or a ledger) until it holds or `limit` passes.
func waitFor(_ limit: Duration, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return condition()
}

/// A broker fixture that could not do its part, with the reason.
struct BrokerTestError: Error, CustomStringConvertible {
    var description: String
}
