import ConclaveCall
import ConclaveE2EE
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import JanusClient
import Logging
import RecorderJobs
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave recorder serve` against a real RabbitMQ (the recorder topology of
/// config/rabbitmq) and the shared test Janus, with publishers in the calls.
@Suite("Recorder service", .serialized)
struct RecorderServiceTests {
    let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }()

    /// Two participants of a call encrypted with `key`, sending for `seconds`.
    func publishers(
        _ fleet: Fleet,
        on connection: JanusConnection,
        room: UInt64,
        callID: UInt64,
        key: CallKey,
        seconds: Int,
        names: [String] = ["1:Ann", "2:Bo"]
    ) async throws -> [CallPublisher] {
        var publishers: [CallPublisher] = []
        for name in names {
            let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
            crypto.keyRing.install(key, epoch: 0)
            publishers.append(
                try await .start(
                    on: connection,
                    room: room,
                    display: name,
                    crypto: crypto,
                    seconds: seconds,
                    address: fleet.janus.hostAddress,
                    logger: logger
                )
            )
        }
        return publishers
    }

    /// A finished attempt's manifest: every participant recorded with frames, verified (no
    /// journal kept, no error).
    func expectComplete(_ folder: String, participants: Int, _ comment: Comment? = nil) throws {
        let manifest = try RecordingManifest.read(from: folder)
        #expect(manifest.status == "finished", comment)
        let recorded = manifest.participants.filter(\.recorded)
        #expect(recorded.count == participants, "\(manifest.participants.map(\.key))")
        for participant in recorded {
            let tracks = participant.segments.flatMap(\.tracks)
            #expect(Set(tracks.map(\.kind)) == [.audio, .video], "\(participant.key)")
            #expect(tracks.allSatisfy { $0.framesWritten > 0 && $0.error == nil }, "\(participant.key): \(tracks)")
            #expect(participant.segments.allSatisfy { $0.journals.isEmpty && $0.error == nil })
        }
    }

    @Test("one service records two calls submitted as jobs: both complete and verified, both jobs acknowledged")
    func recordsTwoCalls() async throws {
        let fleet = try await Fleet()
        let service = try fleet.startService("one")
        #expect(await fleet.awaitService("one"), "\(service.errors)")
        let first = try await fleet.createRoom()
        let second = try await fleet.createRoom()
        let keys = (CallKey.random(), CallKey.random())
        try await fleet.submit(
            try fleet.job(
                "job-a",
                callID: 11,
                room: first.room,
                key: keys.0,
                output: "team/a",
                stop: .roomEmpty(graceSeconds: 3)
            )
            .encoded()
        )
        try await fleet.submit(
            try fleet.job(
                "job-b",
                callID: 12,
                room: second.room,
                key: keys.1,
                output: "team/b",
                stop: .after(seconds: 9)
            )
            .encoded()
        )
        let startedA = try #require(await fleet.log.started("job-a"), "\(service.errors)")
        let startedB = try #require(await fleet.log.started("job-b"), "\(service.errors)")
        #expect(startedA.serviceID == "one" && startedB.serviceID == "one")
        #expect(startedA.path == fleet.storage.path + "/team/a")
        let callA = try await publishers(
            fleet,
            on: first.connection,
            room: first.room,
            callID: 11,
            key: keys.0,
            seconds: 5
        )
        let callB = try await publishers(
            fleet,
            on: second.connection,
            room: second.room,
            callID: 12,
            key: keys.1,
            seconds: 5
        )
        // The room-empty job ends once its publishers are gone for its grace time; the other at 9 s.
        try await Task.sleep(for: .seconds(5))
        for publisher in callA + callB { await publisher.stop() }
        let finishedA = try #require(await fleet.log.finished("job-a"), "\(service.errors)")
        let finishedB = try #require(await fleet.log.finished("job-b"), "\(service.errors)")
        #expect(finishedA.summary.participants == 2 && finishedA.summary.problems.isEmpty, "\(finishedA.summary)")
        #expect(finishedB.summary.participants == 2 && finishedB.summary.problems.isEmpty, "\(finishedB.summary)")
        try expectComplete(finishedA.path, participants: 2)
        try expectComplete(finishedB.path, participants: 2)
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0, "both jobs acknowledged")
        #expect(service.output.contains("recording_finished job job-a"), "\(service.output)")
        service.signal(SIGTERM)
        #expect(await service.waitForExit(within: .seconds(20)) == 0, "\(service.errors)")
        await first.connection.close()
        await second.connection.close()
    }

    @Test(
        "bad jobs: malformed, unknown room, a key for another device, a path out of the storage root: each failed with its reason, nothing written"
    )
    func badJobsAreRefused() async throws {
        let fleet = try await Fleet()
        let service = try fleet.startService("strict")
        #expect(await fleet.awaitService("strict"), "\(service.errors)")
        let outside = fleet.directory.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        #expect(symlink(outside.path, fleet.storage.path + "/escape") == 0)
        let (room, connection) = try await fleet.createRoom()
        let key = CallKey.random()

        try await fleet.submit(Array("{\"version\":1,\"jobId\":".utf8))
        let malformed = await fleet.log.failed { $0.jobID == nil }
        #expect(malformed != nil)

        try await fleet.submit(
            try fleet.job(
                "no-room",
                callID: 21,
                room: room + 1,
                key: key,
                output: "x/no-room",
                stop: .after(seconds: 5)
            )
            .encoded()
        )
        let noRoom = try #require(await fleet.log.failed { $0.jobID == "no-room" })
        #expect(noRoom.reason.hasPrefix("room:"), "\(noRoom.reason)")

        let stranger = try DevicePublicKey(publicKeyString: DeviceIdentity.generate(.p256).publicKeyString)
        try await fleet.submit(
            try fleet.job(
                "stranger",
                callID: 22,
                room: room,
                key: key,
                output: "x/stranger",
                stop: .after(seconds: 5),
                wrappedFor: stranger
            )
            .encoded()
        )
        let wrongKey = try #require(await fleet.log.failed { $0.jobID == "stranger" })
        #expect(
            wrongKey.reason.hasPrefix("wrappedKey:") && wrongKey.reason.contains("does not open"),
            "\(wrongKey.reason)"
        )

        try await fleet.submit(
            try fleet.job("escape", callID: 23, room: room, key: key, output: "escape/call", stop: .after(seconds: 5))
                .encoded()
        )
        let escape = try #require(await fleet.log.failed { $0.jobID == "escape" })
        #expect(escape.reason.contains("symlink"), "\(escape.reason)")

        // Refused for good (acknowledged), and nothing written anywhere.
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fleet.storage.path) == ["escape"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
        #expect(service.output.contains("recording_failed job stranger"), "\(service.output)")
        service.signal(SIGTERM)
        #expect(await service.waitForExit(within: .seconds(20)) == 0)
        await connection.close()
    }

    @Test(
        "kill -9 of the service recording a call: the other continues it within 5 s in attempt-2, the outage in its manifest"
    )
    func takeover() async throws {
        let fleet = try await Fleet()
        let one = try fleet.startService("one")
        #expect(await fleet.awaitService("one"), "\(one.errors)")
        let (room, connection) = try await fleet.createRoom()
        let key = CallKey.random()
        try await fleet.submit(
            try fleet.job(
                "long",
                callID: 31,
                room: room,
                key: key,
                output: "calls/long",
                stop: .roomEmpty(graceSeconds: 2)
            )
            .encoded()
        )
        let started = try #require(await fleet.log.started("long"), "\(one.errors)")
        #expect(started.serviceID == "one")
        // The second service comes up once the first holds the job: the broker gives it nothing
        // until the first dies.
        let two = try fleet.startService("two")
        #expect(await fleet.awaitService("two"), "\(two.errors)")
        let call = try await publishers(fleet, on: connection, room: room, callID: 31, key: key, seconds: 16)
        let output = URL(fileURLWithPath: started.path)
        // Media written before the kill (the manifest is rewritten as the recording runs).
        let writing = try await waitUntilWritten(output, within: .seconds(15))
        #expect(writing)
        let killed = ContinuousClock.now
        one.signal(SIGKILL)
        let resumed = try #require(await fleet.log.started("long", attempt: 2, within: .seconds(10)))
        let takeover = ContinuousClock.now - killed
        #expect(resumed.serviceID == "two")
        #expect(takeover < .seconds(5), "recording again after \(takeover)")
        #expect(resumed.path == output.path + "/attempt-2")
        // The publishers end; the room-empty condition ends the job.
        try await Task.sleep(for: .seconds(6))
        for publisher in call { await publisher.stop() }
        let finished = try #require(await fleet.log.finished("long"), "\(two.errors)")
        #expect(finished.serviceID == "two" && finished.path == resumed.path)
        try expectComplete(finished.path, participants: 2)
        let manifest = try RecordingManifest.read(from: finished.path)
        let continuation = try #require(manifest.continuation)
        #expect(continuation.attempt == 2 && continuation.previous == "..")
        let outage = try #require(continuation.outageSeconds)
        #expect(outage > 0 && outage < 6, "outage \(outage) s")
        #expect(finished.summary.gaps.count == 1 && abs((finished.summary.gaps.first?.seconds ?? 0) - outage) < 0.001)
        // The dead service's attempt is repaired from its journals: it plays up to the outage.
        let first = try RecordingManifest.read(from: output.path)
        #expect(first.status == "repaired", "\(first.status)")
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0)
        two.signal(SIGTERM)
        #expect(await two.waitForExit(within: .seconds(20)) == 0)
        await connection.close()
    }

    @Test("SIGTERM drains: no new job is taken, the current recording finishes, then exit 0")
    func drain() async throws {
        let fleet = try await Fleet()
        let service = try fleet.startService("drained")
        #expect(await fleet.awaitService("drained"), "\(service.errors)")
        let (room, connection) = try await fleet.createRoom()
        let key = CallKey.random()
        try await fleet.submit(
            try fleet.job("current", callID: 41, room: room, key: key, output: "d/current", stop: .after(seconds: 6))
                .encoded()
        )
        _ = try #require(await fleet.log.started("current"), "\(service.errors)")
        let call = try await publishers(fleet, on: connection, room: room, callID: 41, key: key, seconds: 8)
        service.signal(SIGTERM)
        let draining = await fleet.log.first(within: .seconds(10)) {
            if case .serviceStatus(let status) = $0 { status.serviceID == "drained" && status.draining } else { false }
        }
        #expect(draining != nil)
        try await fleet.submit(
            try fleet.job("later", callID: 42, room: room, key: key, output: "d/later", stop: .after(seconds: 5))
                .encoded()
        )
        let finished = try #require(await fleet.log.finished("current"), "\(service.errors)")
        try expectComplete(finished.path, participants: 2)
        #expect(await service.waitForExit(within: .seconds(20)) == 0, "\(service.errors)")
        for publisher in call { await publisher.stop() }
        // The later job was left for another service.
        #expect(try await fleet.jobsInQueue(settlingAt: 1) == 1)
        #expect(await fleet.log.started("later", within: .zero) == nil)
        await connection.close()
    }

    @Test("SIGTERM with --handover: the call stops, goes back to the queue, and another service continues it")
    func drainWithHandover() async throws {
        let fleet = try await Fleet()
        let leaving = try fleet.startService("leaving", ["--handover"])
        #expect(await fleet.awaitService("leaving"), "\(leaving.errors)")
        let (room, connection) = try await fleet.createRoom()
        let key = CallKey.random()
        try await fleet.submit(
            try fleet.job(
                "moved",
                callID: 51,
                room: room,
                key: key,
                output: "h/moved",
                stop: .roomEmpty(graceSeconds: 2)
            )
            .encoded()
        )
        let started = try #require(await fleet.log.started("moved"), "\(leaving.errors)")
        #expect(started.serviceID == "leaving")
        let staying = try fleet.startService("staying")
        #expect(await fleet.awaitService("staying"), "\(staying.errors)")
        let call = try await publishers(fleet, on: connection, room: room, callID: 51, key: key, seconds: 14)
        #expect(try await waitUntilWritten(URL(fileURLWithPath: started.path), within: .seconds(15)))
        leaving.signal(SIGTERM)
        let resumed = try #require(await fleet.log.started("moved", attempt: 2, within: .seconds(10)))
        #expect(resumed.serviceID == "staying" && resumed.path == started.path + "/attempt-2")
        #expect(await leaving.waitForExit(within: .seconds(20)) == 0, "\(leaving.errors)")
        // The first attempt was finished cleanly by the service that left: nothing to repair.
        #expect(try RecordingManifest.read(from: started.path).status == "finished")
        try await Task.sleep(for: .seconds(4))
        for publisher in call { await publisher.stop() }
        let finished = try #require(await fleet.log.finished("moved"), "\(staying.errors)")
        try expectComplete(finished.path, participants: 2)
        let continuation = try #require(try RecordingManifest.read(from: finished.path).continuation)
        #expect(continuation.previous == ".." && (continuation.outageSeconds ?? -1) >= 0)
        #expect(try await fleet.jobsInQueue(settlingAt: 0) == 0)
        staying.signal(SIGTERM)
        #expect(await staying.waitForExit(within: .seconds(20)) == 0)
        await connection.close()
    }

    /// Waits until the recording's manifest shows written video and audio for every participant.
    func waitUntilWritten(_ folder: URL, within limit: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let manifest = try? RecordingManifest.read(from: folder.path), manifest.participants.count >= 2,
                manifest.participants.allSatisfy({ participant in
                    participant.segments.flatMap(\.tracks).filter { $0.framesWritten > 15 }.count >= 2
                })
            {
                return true
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }
}
