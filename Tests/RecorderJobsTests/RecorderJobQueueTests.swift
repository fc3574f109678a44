import Foundation
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Testing

/// The job queue of config/rabbitmq against a real RabbitMQ, started by the test.
@Suite("Recorder job queue on RabbitMQ", .serialized)
struct RecorderJobQueueTests {
    /// A persistent job outlives a broker restart, goes to exactly one of two consumers, and once
    /// acknowledged is gone; a job whose consumer leaves without acknowledging goes to another
    /// consumer, marked as redelivered (a takeover).
    @Test func jobSurvivesARestartAndIsDeliveredOnceToOneConsumer() async throws {
        let bed = try RabbitMQTestBed()
        defer { bed.stop() }
        let submitterPasscode = try bed.addSubmitter(10)
        let recorderPasscode = try bed.addRecorder(900)
        let queue = RecorderTopology.jobQueueName

        let submitter = try BrokerClient(bed, device: 10, passcode: submitterPasscode)
        try await submitter.connect()
        let first = brokerJob("first")
        #expect(try await submitter.submit(first))
        // The broker's counts are statistics, refreshed every few seconds.
        #expect(await waitFor(.seconds(20)) { (try? bed.readyMessages(in: queue)) == 1 })
        await submitter.connection.close()

        try bed.restartBroker()
        #expect(await waitFor(.seconds(20)) { (try? bed.readyMessages(in: queue)) == 1 })

        let one = try BrokerClient(bed, device: 900, passcode: recorderPasscode)
        let two = try BrokerClient(bed, device: 900, passcode: recorderPasscode)
        try await one.connect()
        try await two.connect()
        one.consumeJobs()
        two.consumeJobs()
        let delivered = await withTaskGroup(of: (Int, STOMPMessage?).self) { group in
            group.addTask { (1, await one.messages.first()) }
            group.addTask { (2, await two.messages.first()) }
            let winner = await group.next() ?? (0, nil)
            group.cancelAll()
            return winner
        }
        let message = try #require(delivered.1, "no consumer received the job after the restart")
        #expect(message.job == first)
        #expect(!message.redelivered)
        let (taker, other) = delivered.0 == 1 ? (one, two) : (two, one)
        try await taker.ack(message)
        // Once the taker has gone, the next job is the first thing the other consumer sees: the
        // queue is FIFO, so the first job was neither delivered to it nor returned to the queue.
        await taker.connection.close()
        let resubmitter = try BrokerClient(bed, device: 10, passcode: submitterPasscode)
        try await resubmitter.connect()
        let second = brokerJob("second")
        #expect(try await resubmitter.submit(second))
        let next = try #require(await other.messages.first(), "the second job never arrived")
        #expect(next.job == second)
        #expect(other.messages.items.count == 1)

        // The consumer dies with the second job unacknowledged: a new one gets it again.
        await other.connection.close()
        let third = try BrokerClient(bed, device: 900, passcode: recorderPasscode)
        try await third.connect()
        third.consumeJobs()
        let again = try #require(await third.messages.first(), "the unacknowledged job was not redelivered")
        #expect(again.job == second)
        #expect(again.redelivered)
        try await third.ack(again)
        await third.connection.close()
        await resubmitter.connection.close()
        #expect(await waitFor(.seconds(20)) { (try? bed.readyMessages(in: queue)) == 0 })
    }

    /// Submitters cannot consume jobs and recorders cannot submit them.
    @Test func permissionsSeparateSubmittersFromRecorders() async throws {
        let bed = try RabbitMQTestBed.shared()
        defer { bed.stop() }
        let submitter = try BrokerClient(bed, device: 10, passcode: try bed.addSubmitter(10))
        try await submitter.connect()
        submitter.consumeJobs()
        let refused = await submitter.events.first { event in
            if case .error(let error) = event { return error.code == .subscriptionRefused }
            return false
        }
        #expect(refused != nil)

        let recorder = try BrokerClient(bed, device: 900, passcode: try bed.addRecorder(900))
        try await recorder.connect()
        // Refused: an ERROR and the connection closed, no receipt (waiting for one would only
        // wait out its timeout).
        let forged = brokerJob("forged")
        try? await recorder.send(forged)
        let closed = await recorder.events.first { event in
            switch event {
            case .error, .state(.reconnecting): true
            default: false
            }
        }
        #expect(closed != nil)
        #expect(
            !recorder.events.items.contains(.receipt(BrokerClient.receipt(for: forged))),
            "the forged job was taken"
        )
        await submitter.connection.close()
        await recorder.connection.close()
    }
}
