import ConclaveTestSupport
import Foundation
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Synchronization
import Testing

/// Collects a stream's elements so that a test can wait for one that matches, with a deadline.
final class Inbox<Element: Sendable>: Sendable {
    private struct Waiter {
        var id: Int
        var predicate: @Sendable (Element) -> Bool
        var continuation: CheckedContinuation<Element?, Never>
    }

    private struct State {
        var items: [Element] = []
        var finished = false
        var waiters: [Waiter] = []
        var nextID = 0
    }

    private let state = Mutex(State())
    private let reader = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<Element>) {
        let task = Task { [weak self] in
            for await item in stream { self?.append(item) }
            self?.finish()
        }
        reader.withLock { $0 = task }
    }

    deinit { reader.withLock { $0?.cancel() } }

    var items: [Element] { state.withLock { $0.items } }

    private func append(_ item: Element) {
        let ready = state.withLock { state in
            state.items.append(item)
            let matching = state.waiters.filter { $0.predicate(item) }
            state.waiters.removeAll { $0.predicate(item) }
            return matching.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: item) }
    }

    private func finish() {
        let waiting = state.withLock { state in
            state.finished = true
            defer { state.waiters.removeAll() }
            return state.waiters.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(returning: nil) }
    }

    /// The first element that matches, already here or still to come; nil at the deadline or
    /// when the stream ended without one.
    func first(
        within limit: Duration = .seconds(30),
        where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
    ) async -> Element? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timeout = Task {
            try? await Task.sleep(for: limit)
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: nil)
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { continuation in
            let found = state.withLock { state -> Element?? in
                if let item = state.items.first(where: predicate) { return .some(item) }
                if state.finished { return .some(nil) }
                state.waiters.append(Waiter(id: id, predicate: predicate, continuation: continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }
}

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
        let receipt = "submit-\(job.jobID)"
        try await connection.send(
            STOMPFrame(
                .send,
                headers: [
                    .init("destination", RecorderTopology.submitDestination), .init("persistent", "true"),
                    .init("content-type", "application/json"), .init("receipt", receipt),
                ],
                body: job.encoded()
            )
        )
        return await events.first { $0 == .receipt(receipt) } != nil
    }

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
