import ConclaveTestSupport
import Foundation
import RabbitMQTestBed
import Testing

@testable import STOMPClient

/// The process's shared broker: what one test leaves behind never reaches the next, and a test
/// never gets it while another holds it. Runs with the suite's other broker tests serially (CI's
/// `--no-parallel`), so the shared broker is free when it starts.
@Suite("The shared RabbitMQ test bed", .serialized)
struct SharedRabbitMQTests {
    @Test func aHandedBackBrokerIsEmptiedAndAHeldOneIsNeverLent() async throws {
        let first = try RabbitMQTestBed.shared()
        try #require(first.isShared, "the shared broker is free when the test starts (run serially)")

        // Held: a second test gets a private broker, and nobody may stop the shared one.
        let other = try RabbitMQTestBed.shared()
        #expect(!other.isShared)
        #expect(other.webSTOMPPort != first.webSTOMPPort)
        other.stop()
        #expect(throws: RabbitMQTestBedError.self) { try first.stopBroker() }
        #expect(throws: RabbitMQTestBedError.self) { try first.restartBroker() }

        // What a test leaves: users (one connected, one with every right) and a connection.
        var configuration = STOMPSignalingChannel.Configuration(
            url: first.webSocketURL,
            deviceID: 1,
            passcode: try first.addDevice(1)
        )
        configuration.tuning = {
            $0.reconnect = STOMPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(2))
        }
        let leftover = try STOMPSignalingChannel(configuration: configuration)
        let events = Recorder(leftover.events)
        try await leftover.connect()
        try first.importUser(
            login: "worker",
            passcode: RabbitMQTestBed.randomPasscode(),
            permissions: (".*", ".*", ".*")
        )
        #expect(Set(try users(first)) == ["device-1", "worker"])

        first.stop()
        first.stop()  // a second hand-back of the same lease changes nothing

        let next = try RabbitMQTestBed.shared()
        defer { next.stop() }
        #expect(next.isShared)
        #expect(next.webSTOMPPort == first.webSTOMPPort, "the same node, not a new one")
        #expect(try users(next).isEmpty)
        #expect(try queues(next) == ["recorder.jobs", "recorder.jobs.dead"], "the topology, imported again")
        #expect(try next.readyMessages(in: "recorder.jobs") == 0)
        // The leftover connection was ended by the broker, and its credentials are gone.
        let closed = await events.first { $0.closedError != nil }
        #expect((closed?.closedError ?? nil)?.code == .connectRefused)
        await leftover.close()
    }

    func users(_ broker: RabbitMQTestBed) throws -> [String] {
        try broker.users()
    }

    func queues(_ broker: RabbitMQTestBed) throws -> [String] {
        try broker.queueInfo("messages").keys.sorted()
    }
}
