import ConclaveE2EE
import ConclaveKeyStore
import ConclaveTestSupport
import ECallSignaling
import Foundation
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Testing

@testable import ConclaveRecorderService

/// `conclave recorder submit` and `status`, the built binary against a real RabbitMQ.
@Suite("conclave recorder against RabbitMQ", .serialized)
struct RecorderCommandTests {
    /// Runs the built `conclave` off the cooperative pool (it blocks until the child exits).
    func conclave(_ arguments: [String], input: Data? = nil) async throws -> ProcessResult {
        let binary = TestPaths.productsDirectory.appendingPathComponent("conclave").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw SubprocessError(description: "no conclave binary at \(binary): run swift build first")
        }
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result { try runProcess(binary, arguments, input: input, timeout: .seconds(60)) }
                )
            }
        }
    }

    /// A device with a key pair, ids and a broker passcode file.
    struct Device {
        var dataDirectory: String
        var passcodeFile: String
        var publicKey: String
    }

    func makeDevice(
        _ name: String,
        id: UInt64,
        passcode: String,
        in directory: URL
    ) async throws -> Device {
        let data = directory.appendingPathComponent("data-\(name)").path
        let created = try await conclave([
            "keys", "init", "--type", "p256", "--display", "\(id):\(name)", "--device-id", "\(id)", "--data-dir", data,
        ])
        #expect(created.succeeded, "\(created.errorOutput)")
        let shown = try await conclave(["keys", "show", "--public", "--data-dir", data])
        let passcodeFile = directory.appendingPathComponent("\(name).passcode")
        try Data(passcode.utf8).write(to: passcodeFile)
        return Device(
            dataDirectory: data,
            passcodeFile: passcodeFile.path,
            publicKey: shown.output.trimmingCharacters(in: .whitespacesAndNewlines)
        )
    }

    @Test func submitQueuesAJobWhoseKeyOpensOnTheFleetDevice() async throws {
        let broker = try RabbitMQTestBed.shared()
        defer { broker.stop() }
        let directory = try TestPaths.temporaryDirectory("conclave-recorder-submit")
        let submitter = try await makeDevice("sub", id: 10, passcode: try broker.addSubmitter(10), in: directory)
        let recorderPasscode = try broker.addRecorder(900)
        let fleet = try await makeDevice("fleet", id: 900, passcode: recorderPasscode, in: directory)
        let keyHex = String(repeating: "5a", count: 16) + String(repeating: "c3", count: 16)
        let keyFile = directory.appendingPathComponent("call.key")
        try Data(keyHex.utf8).write(to: keyFile)
        let common = [
            "--data-dir", submitter.dataDirectory, "--broker", broker.webSocketURL, "--passcode-file",
            submitter.passcodeFile,
        ]
        let submitted = try await conclave(
            [
                "recorder", "submit", "--call-id", "4242", "--room", "77", "--janus", "ws://198.18.0.1:8188",
                "--out", "team/call-4242", "--duration", "90", "--recorder-device", "900", "--recorder-public-key",
                fleet.publicKey, "--key-file", keyFile.path, "--key-epoch", "3", "--display", "Recorder",
                "--job-id", "job-cli-1",
            ] + common
        )
        #expect(submitted.succeeded, "\(submitted.errorOutput)")
        #expect(submitted.output == "job-cli-1\n")
        #expect(!submitted.errorOutput.contains(keyHex))
        // Not the call's host and no --invitation: one line says what the recording will not do.
        #expect(
            submitted.errorOutput == "conclave: note: no invitation: the recording will not follow call 4242's key "
                + "rotations (only the call's host signs one; pass --invitation FILE)\n",
            "\(submitted.errorOutput)"
        )

        // A bad job is refused before anything is sent, naming the field.
        let outside = try await conclave(
            [
                "recorder", "submit", "--call-id", "1", "--room", "2", "--janus", "ws://h", "--crypto", "none",
                "--out", "../etc", "--until-empty",
            ] + common
        )
        #expect(!outside.succeeded)
        #expect(outside.errorOutput.contains("output: \"../etc\" leaves the storage root"), "\(outside.errorOutput)")
        let noStop = try await conclave(
            ["recorder", "submit", "--call-id", "1", "--room", "2", "--janus", "ws://h", "--out", "a"] + common
        )
        #expect(!noStop.succeeded)
        #expect(noStop.errorOutput.contains("--duration SECONDS or --until-empty"), "\(noStop.errorOutput)")

        // The fleet takes the job; its key opens with the fleet device's key.
        let recorder = try BrokerClient(broker, device: 900, passcode: recorderPasscode)
        try await recorder.connect()
        recorder.consumeJobs()
        let message = try #require(await recorder.messages.first(), "the job never arrived")
        let job = try RecordJob.decode(message.body)
        #expect(job.jobID == "job-cli-1")
        #expect(job.callID == 4242)
        #expect(job.room == 77)
        #expect(job.janusURL == "ws://198.18.0.1:8188")
        #expect(job.crypto == .ecall)
        #expect(job.keyEpoch == 3)
        #expect(job.recorderDeviceID == 900)
        #expect(job.output == "team/call-4242")
        #expect(job.stop == .after(seconds: 90))
        #expect(job.display == "Recorder")
        #expect(RecorderTime.parse(job.submittedAt) != nil)
        let wrapped = try #require(job.wrappedKey)
        #expect(!wrapped.contains(keyHex))
        let opened = try await conclave(["keys", "unwrap", wrapped, "--data-dir", fleet.dataDirectory])
        #expect(opened.succeeded, "\(opened.errorOutput)")
        #expect(opened.output.trimmingCharacters(in: .whitespacesAndNewlines) == keyHex)
        // The submitter's own device cannot open it: it was wrapped for the fleet only.
        let other = try await conclave(["keys", "unwrap", wrapped, "--data-dir", submitter.dataDirectory])
        #expect(!other.succeeded)
        try await recorder.ack(message)
        // Nothing else was queued: the refused submissions sent nothing.
        #expect(await waitFor(.seconds(20)) { (try? broker.readyMessages(in: RecorderTopology.jobQueueName)) == 0 })
        await recorder.connection.close()
    }

    /// `--invitation FILE`: the file's text becomes the job's invitation (never argv), checked as
    /// the services check it before anything is sent.
    @Test func submitCarriesTheInvitationFromItsFile() async throws {
        let broker = try RabbitMQTestBed.shared()
        defer { broker.stop() }
        let directory = try TestPaths.temporaryDirectory("conclave-recorder-invitation")
        let submitter = try await makeDevice("sub", id: 10, passcode: try broker.addSubmitter(10), in: directory)
        let recorderPasscode = try broker.addRecorder(900)
        let fleet = try await makeDevice("fleet", id: 900, passcode: recorderPasscode, in: directory)
        let keyFile = directory.appendingPathComponent("call.key")
        try Data(String(repeating: "7e", count: 32).utf8).write(to: keyFile)
        var invitation = sampleInvitationObject()
        invitation["callId"] = 4343
        let invitationFile = directory.appendingPathComponent("invitation.json")
        try Data((try text(invitation) + "\n").utf8).write(to: invitationFile)
        let arguments = [
            "recorder", "submit", "--call-id", "4343", "--room", "77", "--janus", "ws://198.18.0.1:8188",
            "--out", "team/call-4343", "--duration", "90", "--recorder-device", "900", "--recorder-public-key",
            fleet.publicKey, "--key-file", keyFile.path, "--job-id", "job-inv-1", "--data-dir",
            submitter.dataDirectory, "--broker", broker.webSocketURL, "--passcode-file", submitter.passcodeFile,
        ]
        let submitted = try await conclave(arguments + ["--invitation", invitationFile.path])
        #expect(submitted.succeeded, "\(submitted.errorOutput)")
        // An invitation for another call is refused before anything is sent, naming the field.
        invitation["callId"] = 1
        let otherFile = directory.appendingPathComponent("other.json")
        try Data(try text(invitation).utf8).write(to: otherFile)
        let refused = try await conclave(
            arguments.map { $0 == "job-inv-1" ? "job-inv-2" : $0 } + ["--invitation", otherFile.path]
        )
        #expect(!refused.succeeded)
        #expect(
            refused.errorOutput.contains("invitation: for call 1, not the job's call 4343"),
            "\(refused.errorOutput)"
        )

        let recorder = try BrokerClient(broker, device: 900, passcode: recorderPasscode)
        try await recorder.connect()
        recorder.consumeJobs()
        let message = try #require(await recorder.messages.first(), "the job never arrived")
        let job = try RecordJob.decode(message.body)
        #expect(job.jobID == "job-inv-1")
        #expect(job.invitation == (try text(invitation.merging(["callId": 4343]) { $1 })))
        try await recorder.ack(message)
        #expect(await waitFor(.seconds(20)) { (try? broker.readyMessages(in: RecorderTopology.jobQueueName)) == 0 })
        await recorder.connection.close()
    }

    /// The call's host needs no invitation file: the command signs one to the fleet device from
    /// the roster kept with the call, and the service's own check takes it.
    @Test func submitByTheHostSignsTheInvitationTheServiceAccepts() async throws {
        let broker = try RabbitMQTestBed.shared()
        defer { broker.stop() }
        let directory = try TestPaths.temporaryDirectory("conclave-recorder-host")
        let host = try await makeDevice("host", id: 10, passcode: try broker.addSubmitter(10), in: directory)
        let recorderPasscode = try broker.addRecorder(900)
        let fleet = try await makeDevice("fleet", id: 900, passcode: recorderPasscode, in: directory)
        let callID: UInt64 = 4545
        let store = KeyStore(dataDirectory: URL(fileURLWithPath: host.dataDirectory))
        let hostIdentity = try store.loadDeviceIdentity()
        let roster = [
            RosterEntry(userId: 10, deviceId: 10, displayName: "host", publicKey: host.publicKey, isHost: true),
            RosterEntry(userId: 900, deviceId: 900, displayName: "recorder", publicKey: fleet.publicKey),
        ]
        // What `call create --invite` keeps: the key, then one rotation, and the host's own
        // invitation without its wrapped key.
        var own = try SignalMessage.callInvitation(
            callId: callID,
            roomId: 88,
            caller: roster[0],
            recipient: roster[0],
            roster: roster,
            key: CallKey.random(),
            janusUrl: "ws://198.18.0.1:8188",
            crypto: .ecall,
            isVideo: true,
            signedBy: hostIdentity,
            at: Date()
        )
        own.encryptedAESKey = nil
        try store.calls.storeWrappedKey(
            try KeyWrapping.wrap(CallKey.random(), for: hostIdentity.publicKey),
            for: callID
        )
        let current = CallKey.random()
        try store.calls.storeWrappedKey(
            try KeyWrapping.wrap(current, for: hostIdentity.publicKey),
            for: callID,
            epoch: 2
        )
        try store.calls.storeRejoinDetails(
            for: callID,
            janusURL: "ws://198.18.0.1:8188",
            room: 88,
            cryptoFormat: .ecall,
            invitation: own.jsonBody()
        )
        let common = [
            "recorder", "submit", "--call-id", "\(callID)", "--out", "host/call", "--duration", "30",
            "--data-dir", host.dataDirectory, "--broker", broker.webSocketURL, "--passcode-file", host.passcodeFile,
        ]
        // No fleet key given: the roster's is used.
        let submitted = try await conclave(common + ["--recorder-device", "900", "--job-id", "job-host-1"])
        #expect(submitted.succeeded, "\(submitted.errorOutput)")
        #expect(submitted.errorOutput.isEmpty, "\(submitted.errorOutput)")

        // A fleet device the roster does not list: refused by name, unless --no-invitation.
        let stranger = try await makeDevice("stranger", id: 901, passcode: "unused", in: directory)
        let unlisted = common + ["--recorder-device", "901", "--recorder-public-key", stranger.publicKey]
        let refused = try await conclave(unlisted + ["--job-id", "job-host-2"])
        #expect(!refused.succeeded)
        #expect(
            refused.errorOutput.contains(
                "device 901 is not in call \(callID)'s roster: invite it with call create --invite --participant USER:NAME@901=KEY"
            ),
            "\(refused.errorOutput)"
        )
        // A key that is not the roster's for the fleet device: the service could not open the invitation.
        let wrongKey = try await conclave(
            common + [
                "--recorder-device", "900", "--recorder-public-key", stranger.publicKey, "--job-id", "job-host-4",
            ]
        )
        #expect(!wrongKey.succeeded)
        #expect(
            wrongKey.errorOutput.contains("is not the one call \(callID)'s roster lists"),
            "\(wrongKey.errorOutput)"
        )
        let oneEpoch = try await conclave(unlisted + ["--job-id", "job-host-3", "--no-invitation"])
        #expect(oneEpoch.succeeded, "\(oneEpoch.errorOutput)")
        #expect(
            oneEpoch.errorOutput
                == "conclave: note: --no-invitation: the recording keeps the key of epoch 2 and does not follow rotations\n",
            "\(oneEpoch.errorOutput)"
        )

        let recorder = try BrokerClient(broker, device: 900, passcode: recorderPasscode)
        try await recorder.connect()
        recorder.consumeJobs()
        let messages = await recorder.messages.matching(count: 2)
        try #require(messages.count == 2, "the jobs never arrived")
        let jobs = try messages.map { try RecordJob.decode($0.body) }
        #expect(jobs.map(\.jobID) == ["job-host-1", "job-host-3"])
        let signed = jobs[0]
        #expect(signed.keyEpoch == 2)
        #expect(signed.room == 88)
        #expect(signed.janusURL == "ws://198.18.0.1:8188")
        #expect(jobs[1].invitation == nil)
        #expect(jobs[1].recorderDeviceID == 901)

        // The service's own check: signed by the roster's host, addressed to the fleet device, its
        // key opening with the fleet's device key; the job's key is the current one.
        let fleetStore = KeyStore(dataDirectory: URL(fileURLWithPath: fleet.dataDirectory))
        let identity = FleetIdentity(deviceID: 900, identity: try fleetStore.loadDeviceIdentity())
        let text = try #require(signed.invitation)
        let checked = try CheckedInvitation.check(text, job: signed, identity: identity, ecallCompatible: false)
        #expect(checked.me == DeviceAddress(userId: 900, deviceId: 900))
        #expect(checked.roster == roster)
        #expect(try identity.unwrap(try #require(signed.wrappedKey), for: 900) == current)
        let opened = try SignalMessage(json: text).openInvitation(
            as: checked.me,
            with: try fleetStore.loadDeviceIdentity(),
            now: Date(),
            window: .infinity
        )
        #expect(opened.key == current)
        #expect(opened.caller == roster[0])
        for message in messages { try await recorder.ack(message) }
        #expect(await waitFor(.seconds(20)) { (try? broker.readyMessages(in: RecorderTopology.jobQueueName)) == 0 })
        await recorder.connection.close()
    }

    @Test func statusShowsEveryServiceAndRecentFailures() async throws {
        let broker = try RabbitMQTestBed.shared()
        defer { broker.stop() }
        let directory = try TestPaths.temporaryDirectory("conclave-recorder-status")
        let watcher = try await makeDevice("ops", id: 11, passcode: try broker.addSubmitter(11), in: directory)
        let recorderPasscode = try broker.addRecorder(900)
        let services = try BrokerClient(broker, device: 900, passcode: recorderPasscode)
        try await services.connect()
        // Two services announce themselves every 200 ms, as `recorder serve` does every 2 s.
        let announcer = Task {
            var round = 0
            while !Task.isCancelled {
                round += 1
                for event in statusEvents(round: round) {
                    try? await services.connection.send(
                        STOMPFrame(
                            .send,
                            headers: [.init("destination", RecorderTopology.eventDestination(event))],
                            body: event.encoded()
                        )
                    )
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        defer { announcer.cancel() }
        let common = [
            "--data-dir", watcher.dataDirectory, "--broker", broker.webSocketURL, "--passcode-file",
            watcher.passcodeFile,
        ]
        let text = try await conclave(["recorder", "status", "--seconds", "2"] + common)
        #expect(text.succeeded, "\(text.errorOutput)")
        #expect(text.output.contains("svc-a on rec-1: 1 calls, CPU 0.75 of 1.50 cores, disk free 1.0 TiB, taking jobs"))
        #expect(text.output.contains("  call 7 (job j1): 3 participants, 12 s"))
        #expect(text.output.contains("svc-b on rec-2: 0 calls, CPU 0.10 of 2.00 cores, disk free 512.0 MiB, draining"))
        #expect(text.output.contains("  problem: disk almost full"))
        #expect(text.output.contains("recent failures:"))
        #expect(text.output.contains("svc-b job bad-"))
        #expect(text.output.contains(": output: \"/x\" is absolute"))

        let json = try await conclave(["recorder", "status", "--seconds", "2", "--json"] + common)
        #expect(json.succeeded, "\(json.errorOutput)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        let listed = try #require(object["services"] as? [[String: Any]])
        #expect(listed.compactMap { $0["serviceId"] as? String } == ["svc-a", "svc-b"])
        #expect(listed.first?["cpuBudget"] as? Double == 1.5)
        let failures = try #require(object["failures"] as? [[String: Any]])
        #expect(!failures.isEmpty)
        #expect(failures.allSatisfy { ($0["reason"] as? String) == "output: \"/x\" is absolute" })
        await services.connection.close()
    }
}

/// What two services announce in one round.
func statusEvents(round: Int) -> [RecorderEvent] {
    let time = RecorderTime.format(Date())
    return [
        .serviceStatus(
            ServiceStatus(
                serviceID: "svc-a",
                host: "rec-1",
                calls: [ServiceCall(jobID: "j1", callID: 7, participants: 3, seconds: 12)],
                cpu: 0.75,
                cpuBudget: 1.5,
                diskFreeBytes: 1 << 40,
                draining: false,
                problems: [],
                time: time
            )
        ),
        .serviceStatus(
            ServiceStatus(
                serviceID: "svc-b",
                host: "rec-2",
                calls: [],
                cpu: 0.1,
                cpuBudget: 2,
                diskFreeBytes: 512 << 20,
                draining: true,
                problems: ["disk almost full"],
                time: time
            )
        ),
        .recordingFailed(
            RecordingFailed(
                jobID: "bad-\(round)",
                callID: nil,
                serviceID: "svc-b",
                reason: "output: \"/x\" is absolute",
                time: time
            )
        ),
    ]
}
