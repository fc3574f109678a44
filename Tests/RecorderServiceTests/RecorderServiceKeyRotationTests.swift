import ConclaveCall
import ConclaveE2EE
import ConclaveRecorder
import ConclaveTestSupport
import ECallSignaling
import Foundation
import JanusClient
import Logging
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import Testing

@testable import ConclaveRecorderService

#if canImport(Glibc)
    import Glibc
#endif

/// The host's broker channel, with every message it receives also collected: the test sees the
/// recorder's key requests arrive.
final class WatchedChannel: SignalingChannel {
    private let channel: STOMPSignalingChannel
    let messages: AsyncStream<String>
    let received: StreamCollector<SignalMessage>
    private let forwarder: Task<Void, Never>

    init(_ channel: STOMPSignalingChannel) {
        self.channel = channel
        let (messages, continuation) = AsyncStream.makeStream(of: String.self)
        let (decoded, decodedContinuation) = AsyncStream.makeStream(of: SignalMessage.self)
        self.messages = messages
        received = StreamCollector(decoded)
        let incoming = channel.messages
        forwarder = Task {
            for await body in incoming {
                if let message = try? SignalMessage(json: body) { decodedContinuation.yield(message) }
                continuation.yield(body)
            }
            continuation.finish()
            decodedContinuation.finish()
        }
    }

    deinit { forwarder.cancel() }

    var availability: AsyncStream<SignalingAvailability> { channel.availability }

    func send(_ body: String, toDevice deviceID: UInt64) async throws {
        try await channel.send(body, toDevice: deviceID)
    }

    /// The key requests the recorder device sent so far.
    var recorderRequests: Int {
        received.items.filter { $0.type == .requestAESKey && $0.senderDeviceId == Fleet.deviceID }.count
    }
}

/// The call's host over the broker: a device whose ``CallKeyCoordinator`` holds the key role and,
/// once ``startRotating()``, rotates every few seconds; its frame crypto encrypts under the current key.
struct CallHost {
    static let address = DeviceAddress(userId: 1, deviceId: 11)
    let identity: DeviceIdentity
    let entry: RosterEntry
    let roster: [RosterEntry]
    let key: CallKey
    let channel: STOMPSignalingChannel
    let watched: WatchedChannel
    let coordinator: CallKeyCoordinator
    let crypto: CallFrameCrypto
    let epochs: StreamCollector<CallKeyCoordinator.AppliedEpoch>

    static func start(_ fleet: Fleet, callID: UInt64, rotationPeriod: Double, logger: Logger) async throws -> CallHost {
        let identity = try DeviceIdentity.generate(.p256)
        let entry = RosterEntry(
            userId: address.userId,
            deviceId: address.deviceId,
            displayName: "host",
            publicKey: identity.publicKeyString,
            isHost: true
        )
        let recorder = RosterEntry(
            userId: Fleet.deviceID,
            deviceId: Fleet.deviceID,
            displayName: "recorder",
            publicKey: fleet.fleetKey.publicKeyString
        )
        let roster = [entry, recorder]
        let passcode = try fleet.broker.addDevice(address.deviceId)
        let channel = try STOMPSignalingChannel(
            configuration: .init(url: fleet.broker.webSocketURL, deviceID: address.deviceId, passcode: passcode),
            logger: logger
        )
        let connected = await firstWithin(.seconds(20)) { (try? await channel.connect()) != nil }
        try #require(connected == true, "the host's signaling channel did not connect")
        let watched = WatchedChannel(channel)
        let key = CallKey.random()
        let ring = CallKeyRing()
        ring.install(key, epoch: 0)
        let (applied, appliedContinuation) = AsyncStream.makeStream(of: CallKeyCoordinator.AppliedEpoch.self)
        let coordinator = CallKeyCoordinator(
            lifecycle: CallKeyLifecycle(
                configuration: .init(callId: callID, me: address, rotationPeriod: rotationPeriod, rotationLead: 1),
                identity: try DeviceIdentity(type: .p256, privateKeyBytes: identity.privateKeyBytes),
                roster: roster,
                key: key
            ),
            channel: watched,
            keyRing: ring,
            storage: nil,
            logger: logger,
            epochApplied: { appliedContinuation.yield($0) }
        )
        let crypto = CallFrameCrypto(
            callID: callID,
            format: .ecall,
            keyRing: ring,
            logger: logger,
            onKeyNeeded: coordinator.keyNeededHandler
        )
        return CallHost(
            identity: identity,
            entry: entry,
            roster: roster,
            key: key,
            channel: channel,
            watched: watched,
            coordinator: coordinator,
            crypto: crypto,
            epochs: StreamCollector(applied)
        )
    }

    /// The signed `call_invitation` to the fleet device, signed by `signer` (the host's own key,
    /// unless the test forges one).
    func invitation(callID: UInt64, room: UInt64, janusURL: String, signedBy signer: DeviceIdentity? = nil) throws
        -> String
    {
        try SignalMessage.callInvitation(
            callId: callID,
            roomId: room,
            caller: entry,
            recipient: roster[1],
            roster: roster,
            key: key,
            janusUrl: janusURL,
            crypto: .ecall,
            isVideo: true,
            signedBy: signer ?? identity,
            at: Date()
        ).jsonBody()
    }

    /// Starts the coordinator: it reads its messages and rotates from now on.
    func startRotating() async { await coordinator.start(crypto: crypto) }

    func stop() async {
        await coordinator.stop()
        await channel.close()
    }
}

/// `conclave recorder serve` following a call's key rotations over the broker as the fleet device.
@Suite("Recorder service key rotations", .serialized)
struct RecorderServiceKeyRotationTests {
    let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }()

    @Test(
        "a job with the invitation records across rotations; a job taken after a rotation asks the host; a forged invitation is refused"
    )
    func followsRotations() async throws {
        let fleet = try await Fleet()
        let service = try fleet.startService("keys")
        #expect(await fleet.awaitService("keys"), "\(service.errors)")
        let callID: UInt64 = 31
        let (room, connection) = try await fleet.createRoom()
        let host = try await CallHost.start(fleet, callID: callID, rotationPeriod: 4, logger: logger)
        let publisher = try await CallPublisher.start(
            on: connection,
            room: room,
            display: "\(CallHost.address.userId):host",
            crypto: host.crypto,
            seconds: 60,
            address: fleet.janus.hostAddress,
            // Each frame under the key current when it goes out: the key rotates every 4 s.
            sealAhead: false,
            logger: logger
        )
        let invitation = try host.invitation(callID: callID, room: room, janusURL: fleet.janus.webSocketURL)
        // The first rotation is four seconds away: the recorder of the first job has joined by then.
        await host.startRotating()

        // Signed by someone else than the roster's host: refused, nothing written.
        var forged = try fleet.job(
            "keys-forged",
            callID: callID,
            room: room,
            key: host.key,
            output: "keys/forged",
            stop: .after(seconds: 5)
        )
        forged.invitation = try host.invitation(
            callID: callID,
            room: room,
            janusURL: fleet.janus.webSocketURL,
            signedBy: try DeviceIdentity.generate(.p256)
        )
        try await fleet.submit(forged.encoded())
        let refused = try #require(await fleet.log.failed { $0.jobID == "keys-forged" }, "\(service.errors)")
        #expect(refused.reason.hasPrefix("invitation: call invitation: signature does not match"), "\(refused.reason)")
        #expect(!refused.reason.contains("\n"))
        #expect(!FileManager.default.fileExists(atPath: fleet.storage.appendingPathComponent("keys/forged").path))
        #expect(await fleet.log.started("keys-forged", within: .zero) == nil)

        // From the first key: every rotation reaches the recorder as it reaches any participant.
        var first = try fleet.job(
            "keys-a",
            callID: callID,
            room: room,
            key: host.key,
            output: "keys/a",
            stop: .after(seconds: 13)
        )
        first.invitation = invitation
        try await fleet.submit(first.encoded())
        let finishedA = try #require(await fleet.log.finished("keys-a"), "\(service.errors)")
        #expect(finishedA.summary.problems.isEmpty, "\(finishedA.summary)")
        let manifestA = try RecordingManifest.read(from: finishedA.path)
        let epochsA = try recordedEpochs(manifestA, undecryptable: 0)
        #expect(epochsA.count >= 2, "frames of at least two epochs: \(epochsA)")
        // The manifest lists the job's epoch and, with their times, the epochs applied since.
        let times = manifestA.keyEpochTimes ?? []
        let listed = Set(manifestA.keyEpochs).union(times.map(\.epoch))
        #expect(manifestA.keyEpochs == [0], "\(manifestA.keyEpochs)")
        #expect(epochsA.isSubset(of: listed) && listed.count >= 3, "\(listed)")
        #expect(times.map(\.epoch) == times.map(\.epoch).sorted(), "\(times)")

        // Taken after rotations with the first key: the frames do not open, so the recorder asks the
        // host, which answers with the current key.
        let hostEpoch = try #require(await host.epochs.first(within: .seconds(10)) { $0.epoch >= 2 })
        let requestsBefore = host.watched.recorderRequests
        let seen = host.watched.received.items.count
        var late = try fleet.job(
            "keys-b",
            callID: callID,
            room: room,
            key: host.key,
            output: "keys/b",
            stop: .after(seconds: 6)
        )
        late.invitation = invitation
        try await fleet.submit(late.encoded())
        let request = await host.watched.received.first(after: seen, within: .seconds(30)) {
            $0.type == .requestAESKey && $0.senderDeviceId == Fleet.deviceID
        }
        #expect(request != nil)
        let finishedB = try #require(await fleet.log.finished("keys-b"), "\(service.errors)")
        #expect(host.watched.recorderRequests > requestsBefore, "the late job asked the host for the key")
        #expect(finishedB.summary.problems.isEmpty && finishedB.summary.framesWritten > 0, "\(finishedB.summary)")
        let manifestB = try RecordingManifest.read(from: finishedB.path)
        let epochsB = try recordedEpochs(manifestB, undecryptable: nil)
        #expect(!epochsB.contains(0) && epochsB.allSatisfy { $0 >= hostEpoch.epoch }, "\(epochsB)")

        await publisher.stop()
        await host.stop()
        service.signal(SIGTERM)
        #expect(await service.waitForExit(within: .seconds(20)) == 0, "\(service.errors)")
        await connection.close()
    }

    /// One channel as the fleet device per service: each job's view carries its call's messages
    /// only, and sends through the shared channel.
    @Test("the service's signaling channel hands each call's messages to that call's views only")
    func signalingHubRoutesByCall() async throws {
        let broker = try RabbitMQTestBed.shared()
        defer { broker.stop() }
        let passcode = try broker.addRecorder(Fleet.deviceID)
        let hub = CallSignalingHub(
            deviceID: Fleet.deviceID,
            broker: STOMPClientConfiguration(
                url: broker.webSocketURL,
                virtualHost: RabbitMQTestBed.virtualHost,
                credentials: STOMPCredentials(
                    login: RabbitMQTestBed.login(forDevice: Fleet.deviceID),
                    passcode: passcode
                )
            ),
            logger: logger
        )
        let first = try await hub.view(callID: 1, timeout: .seconds(20))
        let second = try await hub.view(callID: 2, timeout: .seconds(20))
        let alsoFirst = try await hub.view(callID: 1, timeout: .seconds(20))
        let views = [first, second, alsoFirst].map { StreamCollector($0.messages) }
        let sender = try STOMPSignalingChannel(
            configuration: .init(url: broker.webSocketURL, deviceID: 11, passcode: try broker.addDevice(11)),
            logger: logger
        )
        let connected = await firstWithin(.seconds(20)) { (try? await sender.connect()) != nil }
        try #require(connected == true)
        func message(call: UInt64, epoch: UInt64) -> String {
            var message = SignalMessage(type: .keyRotation)
            message.callId = call
            message.epoch = epoch
            return message.jsonBody()
        }
        for body in [message(call: 2, epoch: 1), "not json", message(call: 3, epoch: 1), message(call: 1, epoch: 1)]
            + [message(call: 2, epoch: 2)]
        {
            try await sender.send(body, toDevice: Fleet.deviceID)
        }
        #expect(await views[1].matching(count: 2).count == 2)
        #expect(await views[0].matching(count: 1).count == 1)
        #expect(await views[2].matching(count: 1).count == 1)
        #expect(views[0].items == [message(call: 1, epoch: 1)])
        #expect(views[2].items == [message(call: 1, epoch: 1)])
        #expect(views[1].items == [message(call: 2, epoch: 1), message(call: 2, epoch: 2)])

        // A view sends through the shared channel.
        let answers = StreamCollector(sender.messages)
        try await second.send(message(call: 2, epoch: 9), toDevice: 11)
        #expect(await answers.first(within: .seconds(20)) == message(call: 2, epoch: 9))

        // A released view hears nothing more; the other view of its call still does.
        first.release()
        try await sender.send(message(call: 1, epoch: 2), toDevice: Fleet.deviceID)
        #expect(await views[2].matching(count: 2).count == 2)
        #expect(views[0].items.count == 1)
        await hub.close()
        await sender.close()
    }

    /// The key epochs the frames of `manifest`'s one participant were decrypted with; checks that
    /// it was recorded with audio and video written, and, given `undecryptable`, that count.
    func recordedEpochs(_ manifest: RecordingManifest, undecryptable: Int?) throws -> Set<UInt64> {
        #expect(manifest.status == "finished")
        let recorded = manifest.participants.filter(\.recorded)
        let participant = try #require(recorded.first, "\(manifest.participants)")
        let tracks = participant.segments.flatMap(\.tracks)
        #expect(Set(tracks.map(\.kind)) == [.audio, .video], "\(tracks)")
        #expect(tracks.allSatisfy { $0.framesWritten > 0 && $0.error == nil }, "\(tracks)")
        if let undecryptable {
            #expect(participant.framesUndecryptable == undecryptable, "every frame decrypts")
            #expect(tracks.allSatisfy { $0.framesUndecryptable == undecryptable }, "\(tracks)")
        }
        return Set(tracks.flatMap { $0.keyEpochs ?? [] })
    }
}
