import Foundation
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Synchronization
import Testing

/// Which consumer holds which job, as recorder services would: from delivery until the late ACK.
final class JobLedger: Sendable {
    private struct State {
        var holders: [String: Int] = [:]
        var deliveries: [String: Int] = [:]
        var acknowledged: Set<String> = []
        /// "job X delivered to consumer B while consumer A held it".
        var overlaps: [String] = []
    }

    private let state = Mutex(State())

    func delivered(_ jobID: String, to consumer: Int) {
        state.withLock { state in
            state.deliveries[jobID, default: 0] += 1
            if let holder = state.holders[jobID] {
                state.overlaps.append("\(jobID) delivered to consumer \(consumer) while consumer \(holder) held it")
            }
            state.holders[jobID] = consumer
        }
    }

    func acknowledged(_ jobID: String) {
        state.withLock { state in
            state.holders[jobID] = nil
            state.acknowledged.insert(jobID)
        }
    }

    var acknowledgedJobs: Set<String> { state.withLock { $0.acknowledged } }
    var overlaps: [String] { state.withLock { $0.overlaps } }
    var deliveries: [String: Int] { state.withLock { $0.deliveries } }
}

/// The job queue on a three-node RabbitMQ cluster (three namespaces) with a node lost mid-run.
@Suite("Recorder job queue on a RabbitMQ cluster", .serialized)
struct FleetBrokerClusterTests {
    /// Consumes jobs on `connection`, holding each for `hold` (a recording) before the ACK.
    func consume(
        _ connection: STOMPConnection,
        consumer: Int,
        ledger: JobLedger,
        hold: Duration
    ) -> Task<Void, Never> {
        connection.subscribe(id: "jobs", destination: RecorderTopology.jobQueue, ack: "client-individual")
        return Task {
            await withTaskGroup(of: Void.self) { group in
                for await message in connection.messages {
                    guard let job = message.job else { continue }
                    ledger.delivered(job.jobID, to: consumer)
                    group.addTask {
                        try? await Task.sleep(for: hold)
                        // Marked first: once the ACK is out, the broker may not hand the job on.
                        ledger.acknowledged(job.jobID)
                        if let frame = try? ackFrame(message) { try? await connection.send(frame) }
                    }
                }
            }
        }
    }

    @Test func noJobIsLostOrHeldTwiceWhenANodeDies() async throws {
        let cluster = try RabbitMQCluster(nodeCount: 3)
        defer { cluster.stop() }
        let names = cluster.nodes.map(\.name).sorted()
        #expect(try cluster.runningNodes() == names)
        let replicas = try cluster.quorumMembers(of: RecorderTopology.jobQueueName)
        #expect(replicas.members == names, "the job queue is not replicated on every node")
        #expect(replicas.online == names)

        let submitterPasscode = try cluster.addSubmitter(10)
        let recorderPasscode = try cluster.addRecorder(900)
        // Node 0 declared the queue (its first leader) and is the one that dies; submitter and
        // services use the survivors.
        let submitter = try BrokerClient(url: cluster.nodes[1].webSocketURL, device: 10, passcode: submitterPasscode)
        try await submitter.connect()
        let ledger = JobLedger()
        var consumers: [STOMPConnection] = []
        var readers: [Task<Void, Never>] = []
        for (consumer, node) in [1, 2, 1, 2].enumerated() {
            let connection = try makeConnection(
                url: cluster.nodes[node].webSocketURL,
                device: 900,
                passcode: recorderPasscode
            )
            connection.start()
            try await connection.waitUntilConnected()
            readers.append(consume(connection, consumer: consumer, ledger: ledger, hold: .milliseconds(1500)))
            consumers.append(connection)
        }

        var submitted: [String] = []
        for index in 0..<8 {
            let job = brokerJob("before-\(index)")
            #expect(try await submitter.submit(job), "no receipt for \(job.jobID)")
            submitted.append(job.jobID)
        }
        // Lost while jobs are held unacknowledged and others still wait in the queue.
        cluster.kill(node: 0)
        for index in 0..<8 {
            let job = brokerJob("after-\(index)")
            #expect(try await submitter.submit(job), "no receipt for \(job.jobID) with node 0 down")
            submitted.append(job.jobID)
        }
        let expected = Set(submitted)
        let allDone = await waitFor(.seconds(120)) { ledger.acknowledgedJobs == expected }
        #expect(allDone, "acknowledged \(ledger.acknowledgedJobs.count) of \(expected.count)")
        #expect(ledger.overlaps.isEmpty, "\(ledger.overlaps)")

        // The node comes back, rejoins, and its replica catches up; the queue still serves.
        try cluster.start(node: 0)
        let rejoined = await waitFor(.seconds(60)) {
            (try? cluster.runningNodes(from: 1)) == names
                && (try? cluster.quorumMembers(of: RecorderTopology.jobQueueName, from: 1).online) == names
        }
        #expect(rejoined, "node 0 did not rejoin: \(cluster.logTail(node: 0))")
        let last = brokerJob("after-restart")
        #expect(try await submitter.submit(last))
        let served = await waitFor(.seconds(30)) { ledger.acknowledgedJobs.contains(last.jobID) }
        #expect(served)
        #expect(ledger.overlaps.isEmpty, "\(ledger.overlaps)")
        #expect(ledger.deliveries.keys.count == expected.count + 1)

        for reader in readers { reader.cancel() }
        for connection in consumers { await connection.close() }
        await submitter.connection.close()
        #expect(await waitFor(.seconds(20)) { (try? cluster.readyMessages(in: RecorderTopology.jobQueueName)) == 0 })
    }
}
