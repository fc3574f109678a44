import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusTestBed
import Logging
import RabbitMQTestBed
import RecorderJobs
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The fleet at scale: two Janus servers (two namespaces), three `conclave recorder serve`
/// processes each in a namespace of its own (as if on machines of their own: they reach the broker
/// and both Janus servers and nothing else; the storage is shared), and twelve calls of two to four
/// encrypted participants submitted as jobs.
///
/// Two shared cores carry the 36 participants because a participant's frames are encoded and
/// encrypted before it starts sending (sending then costs only the transport), at 10 video frames a
/// second for eight seconds. `--max-calls 4` makes the twelve calls need all three services.
@Suite("Recorder fleet at scale", .serialized)
struct FleetScaleTests {
    let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }()

    /// One call of the test: where it happens, its key and its publishers.
    struct Call {
        var jobID: String
        var callID: UInt64
        var room: UInt64
        var janus: JanusTestBed
        var connection: JanusConnection
        var key: CallKey
        var publishers: [CallPublisher]
    }

    static let frameRate = 10
    static let seconds = 8

    @Test(
        "twelve calls of 2-4 participants on two Janus servers, recorded completely by three services on hosts of their own"
    )
    func twelveCallsOverThreeServices() async throws {
        let fleet = try await Fleet()
        let second = try JanusTestBed()
        defer { second.stop() }
        var hosts: [RecorderHost] = []
        defer { for host in hosts { host.stop() } }
        var services: [ServiceProcess] = []
        for index in 0..<3 {
            let host = try fleet.makeHost(reaching: [fleet.janus, second])
            hosts.append(host)
            services.append(try fleet.startService("fleet-\(index)", ["--max-calls", "4"], on: host))
        }
        for service in services {
            #expect(await fleet.awaitService(service.name), "\(service.errors)")
        }

        var calls: [Call] = []
        for (index, participants) in Array(repeating: [2, 3, 4], count: 4).joined().enumerated() {
            let janus = index.isMultiple(of: 2) ? fleet.janus : second
            let connection = try await JanusConnection.connect(to: janus.webSocketURL)
            let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
            let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["h264", "vp8"]))
            let callID = UInt64(500 + index)
            let key = CallKey.random()
            // The call is under way when its job arrives, as a call to record is; its
            // participants send their frames, then leave, and the room-empty stop ends it.
            var publishers: [CallPublisher] = []
            for participant in 0..<participants {
                let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
                crypto.keyRing.install(key, epoch: 0)
                publishers.append(
                    try await .start(
                        on: connection,
                        room: room,
                        display: "\(participant + 1):P\(participant + 1)",
                        crypto: crypto,
                        seconds: Self.seconds,
                        address: janus.hostAddress,
                        frameRate: Self.frameRate,
                        logger: logger
                    )
                )
            }
            let call = Call(
                jobID: "scale-\(index)",
                callID: callID,
                room: room,
                janus: janus,
                connection: connection,
                key: key,
                publishers: publishers
            )
            try await fleet.submit(
                RecordJob(
                    jobID: call.jobID,
                    callID: callID,
                    room: room,
                    janusURL: janus.webSocketURL,
                    crypto: .ecall,
                    wrappedKey: try KeyWrapping.wrap(key, for: fleet.fleetKey),
                    keyEpoch: 0,
                    recorderDeviceID: Fleet.deviceID,
                    output: "scale/call-\(callID)",
                    stop: .roomEmpty(graceSeconds: 3),
                    display: "recorder",
                    submittedAt: RecorderTime.format(Date())
                )
                .encoded()
            )
            calls.append(call)
        }
        var startedBy: [String: String] = [:]
        for call in calls {
            let started = try #require(
                await fleet.log.started(call.jobID, within: .seconds(60)),
                "\(call.jobID) never started: \(services.map(\.errors).joined(separator: "\n").suffix(3000))"
            )
            startedBy[call.jobID] = started.serviceID
        }
        // At most four calls per service: all three services record.
        #expect(Set(startedBy.values).count == 3, "\(startedBy)")
        #expect(Dictionary(grouping: startedBy.values, by: { $0 }).values.allSatisfy { $0.count <= 4 }, "\(startedBy)")
        // Everyone leaves once their frames are sent.
        for call in calls {
            for publisher in call.publishers {
                await publisher.waitUntilSent()
                await publisher.stop()
            }
        }

        for call in calls {
            let finished = try #require(
                await fleet.log.finished(call.jobID, within: .seconds(90)),
                "\(call.jobID): \(services.map(\.errors).joined(separator: "\n").suffix(3000))"
            )
            #expect(finished.serviceID == startedBy[call.jobID])
            #expect(
                finished.summary.participants == call.publishers.count,
                """
                \(call.jobID) on \(call.janus.webSocketURL) by \(finished.serviceID): \(finished.summary), \
                not recorded: \((try? RecordingManifest.read(from: finished.path))?.notRecorded ?? []); \
                \(services.first { $0.name == finished.serviceID }?.errors.suffix(3000) ?? "")
                """
            )
            #expect(finished.summary.problems.isEmpty, "\(call.jobID): \(finished.summary.problems)")
            #expect(finished.summary.gaps.isEmpty, "\(call.jobID): \(finished.summary.gaps)")
            try RecorderServiceTests().expectComplete(
                finished.path,
                participants: call.publishers.count,
                "\(call.jobID)"
            )
            try expectEveryFrame(finished.path, of: call)
        }
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0, "every job acknowledged")
        for service in services {
            service.signal(SIGTERM)
            #expect(await service.waitForExit(within: .seconds(30)) == 0, "\(service.name): \(service.errors)")
        }
        for call in calls { await call.connection.close() }
    }

    @Test(
        "a service over its CPU budget takes no job: the job waits in the queue, status shows the service full, another service takes it"
    )
    func cpuAdmission() async throws {
        let fleet = try await Fleet()
        // A budget that one call of six exceeds (about 0.005 cores a participant here), an idle
        // service (about 0.003) does not.
        let budget = 0.015
        let frugal = try fleet.startService("frugal", ["--cpu-budget", "\(budget)"])
        #expect(await fleet.awaitService("frugal"), "\(frugal.errors)")
        let first = try await fleet.createRoom()
        let firstKey = CallKey.random()
        let firstCall = try await publishers(
            fleet,
            on: first.connection,
            room: first.room,
            callID: 61,
            key: firstKey,
            count: 6,
            seconds: 60
        )
        try await fleet.submit(
            try fleet.job(
                "busy",
                callID: 61,
                room: first.room,
                key: firstKey,
                output: "cpu/busy",
                stop: .roomEmpty(graceSeconds: 3)
            )
            .encoded()
        )
        let busy = try #require(await fleet.log.started("busy"), "\(frugal.errors)")
        #expect(busy.serviceID == "frugal")
        // Its next status over budget: the idle slots are unsubscribed by then (the same tick), and
        // the broker is left with the one consumer holding the job.
        let full = await fleet.log.first(within: .seconds(30)) {
            if case .serviceStatus(let status) = $0 {
                status.serviceID == "frugal" && status.calls.count == 1 && status.cpu >= status.cpuBudget
            } else {
                false
            }
        }
        #expect(full != nil, "frugal never went over \(budget) cores: \(fleet.log.events.suffix(8))")
        #expect(try await fleet.jobQueue("consumers", settlingAt: 1) == 1, "only the busy slot subscribed")

        let second = try await fleet.createRoom()
        let secondKey = CallKey.random()
        let secondCall = try await publishers(
            fleet,
            on: second.connection,
            room: second.room,
            callID: 62,
            key: secondKey,
            count: 2,
            seconds: 12
        )
        try await fleet.submit(
            try fleet.job(
                "waits",
                callID: 62,
                room: second.room,
                key: secondKey,
                output: "cpu/waits",
                stop: .roomEmpty(graceSeconds: 3)
            )
            .encoded()
        )
        #expect(try await fleet.jobQueue("messages_ready", settlingAt: 1) == 1, "the new job waits in the queue")
        let status = try conclave([
            "recorder", "status", "--data-dir", fleet.dataDirectory, "--broker", fleet.broker.webSocketURL,
            "--passcode-file", fleet.passcodeFile, "--seconds", "3",
        ])
        let frugalLine = String(decoding: status.stdout, as: UTF8.self).split(separator: "\n").first {
            $0.hasPrefix("frugal ")
        }
        #expect(
            frugalLine?.contains("1 calls") == true && frugalLine?.hasSuffix("full (CPU budget)") == true,
            "\(status)"
        )

        // A service with room takes the waiting job: frugal, with three free slots, did not.
        let spare = try fleet.startService("spare")
        let waits = try #require(await fleet.log.started("waits"), "\(spare.errors)")
        #expect(waits.serviceID == "spare")

        // The busy call has shown what it had to: it ends now, the other once its frames are sent.
        for publisher in firstCall { await publisher.stop() }
        for publisher in secondCall {
            await publisher.waitUntilSent()
            await publisher.stop()
        }
        for job in ["busy", "waits"] {
            let finished = try #require(await fleet.log.finished(job), "\(frugal.errors)\n\(spare.errors)")
            try RecorderServiceTests().expectComplete(finished.path, participants: job == "busy" ? 6 : 2, "\(job)")
        }
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0, "both jobs acknowledged")
        for service in [frugal, spare] {
            service.signal(SIGTERM)
            #expect(await service.waitForExit(within: .seconds(30)) == 0, "\(service.name): \(service.errors)")
        }
        await first.connection.close()
        await second.connection.close()
    }

    /// `count` encrypted participants of a call on the fleet's Janus, sending for `seconds`.
    func publishers(
        _ fleet: Fleet,
        on connection: JanusConnection,
        room: UInt64,
        callID: UInt64,
        key: CallKey,
        count: Int,
        seconds: Int
    ) async throws -> [CallPublisher] {
        var publishers: [CallPublisher] = []
        for participant in 0..<count {
            let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
            crypto.keyRing.install(key, epoch: 0)
            publishers.append(
                try await .start(
                    on: connection,
                    room: room,
                    display: "\(participant + 1):P\(participant + 1)",
                    crypto: crypto,
                    seconds: seconds,
                    address: fleet.janus.hostAddress,
                    logger: logger
                )
            )
        }
        return publishers
    }

    /// Every frame a participant sent from the recording's first frame of it on is in the recording:
    /// nothing lost on the way or in the recorder. (The frames sent before the recorder's
    /// subscription to a participant was up are not recordable: the job arrives while the call is
    /// under way.)
    func expectEveryFrame(_ folder: String, of call: Call) throws {
        let manifest = try RecordingManifest.read(from: folder)
        for publisher in call.publishers {
            let participant = try #require(
                manifest.participants.first { $0.feedIDs.contains(publisher.publisher.feedID) },
                "\(call.jobID): feed \(publisher.publisher.feedID) not in \(manifest.participants.map(\.key))"
            )
            let tracks = participant.segments.flatMap(\.tracks)
            for (kind, sent, rate) in [
                (MediaKind.video, publisher.videoFrames, Self.frameRate), (.audio, publisher.audioFrames, 50),
            ] {
                let written = tracks.filter { $0.kind == kind }.reduce(0) { $0 + $1.framesWritten }
                let lost = tracks.filter { $0.kind == kind }.reduce(0) { $0 + $1.framesLost + $1.gaps }
                let span = tracks.filter { $0.kind == kind }.reduce(0.0) {
                    $0 + (($1.lastTimestamp ?? 0) - ($1.firstTimestamp ?? 0))
                }
                let between = Int((span * Double(rate)).rounded()) + 1
                let label = "\(call.jobID) \(participant.key) \(kind)"
                #expect(lost == 0, "\(label): \(tracks)")
                #expect(written <= sent, "\(label): \(written) written, \(sent) sent")
                #expect(abs(written - between) <= 1, "\(label): \(written) written over \(span) s (\(between) sent)")
            }
        }
    }
}

extension Fleet {
    /// Info item `item` of the job queue (`consumers`, `messages_ready`) once it reaches
    /// `expected`, or its last value after `limit` (the broker's counts trail a cancelled
    /// subscription or a delivery by up to the queue's tick, config/rabbitmq/advanced.config).
    func jobQueue(_ item: String, settlingAt expected: Int, within limit: Duration = .seconds(15)) async throws
        -> Int
    {
        let deadline = ContinuousClock.now + limit
        while true {
            let value = try jobQueue(item)
            if value == expected || ContinuousClock.now >= deadline { return value }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
