import ConclaveCall
import ConclaveE2EE
import ConclaveKeyStore
import ConclaveRecorder
import ConclaveTestSupport
import ECallSignaling
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging
import SignalingTesting
import Testing

/// The call key's lifecycle through a real Janus, with signaling through the in-memory hub:
/// rotations, a leave, a forged rotation and an emergency request, while media keeps flowing.
@Suite(.serialized) struct CallKeyRotationTests {
    static let patience = Duration.seconds(40)

    /// One participant: its session, coordinator, ring and key store.
    struct Member {
        var userId: UInt64
        var session: CallSession
        var coordinator: CallKeyCoordinator
        var ring: CallKeyRing
        var store: KeyStore
    }

    static func logger() -> Logger {
        var logger = Logger(label: "call-keys-test")
        logger.logLevel = ProcessInfo.processInfo.environment["CALL_TEST_LOG"] == nil ? .error : .info
        return logger
    }

    /// Users 1… `count` (device `10 × user + 1`), user 1 hosting, in a new room of `bed`. Each
    /// device's channel comes from `channels` (by device id) or else from `hub`; its coordinator logs
    /// to `loggers[device]` when given.
    static func startCall(
        on bed: JanusTestBed,
        count: Int,
        hub: InMemorySignalingHub? = nil,
        channels: [UInt64: any SignalingChannel] = [:],
        loggers: [UInt64: Logger] = [:],
        rotationPeriod: Double,
        folder: URL,
        recordingOf recordedUser: UInt64? = nil,
        recording: RecordingSession? = nil
    ) async throws -> (members: [Member], identities: [UInt64: DeviceIdentity]) {
        let room = TestJanus.uniqueRoomID()
        let admin = try await JanusConnection.connect(to: bed.webSocketURL)
        let handle = try await VideoRoomHandle.attach(to: try await admin.createSession())
        let options = VideoRoom.RoomOptions(room: room, videoCodecs: ["h264", "vp8"])
        _ = try await handle.createRoom(options)
        await admin.close()

        let testRoster = try TestRoster(count: count)
        let identities = testRoster.identities
        let roster = testRoster.entries
        let key = CallKey.random()
        var members: [Member] = []
        for entry in roster {
            let ring = CallKeyRing()
            ring.install(key, epoch: 0)
            let lifecycle = CallKeyLifecycle(
                configuration: .init(
                    callId: 77,
                    me: entry.device,
                    rotationPeriod: rotationPeriod,
                    rotationLead: 1
                ),
                // A copy of its own: the lifecycle is handed to the coordinator's actor.
                identity: try DeviceIdentity(type: .p256, privateKeyBytes: identities[entry.userId]!.privateKeyBytes),
                roster: roster,
                key: key
            )
            let store = KeyStore(dataDirectory: folder.appendingPathComponent("\(entry.userId)"))
            var onEpoch: (@Sendable (CallKeyCoordinator.AppliedEpoch) -> Void)?
            var observers: [any CallMediaObserver] = []
            if entry.userId == recordedUser, let recording {
                onEpoch = { recording.keyEpochApplied($0.epoch, validFrom: $0.validFrom) }
                observers.append(recording)
            }
            let channel: any SignalingChannel = try #require(
                channels[entry.deviceId] ?? hub?.channel(forDevice: entry.deviceId),
                "a channel for device \(entry.deviceId)"
            )
            let coordinator = CallKeyCoordinator(
                lifecycle: lifecycle,
                channel: channel,
                keyRing: ring,
                storage: store.calls,
                logger: loggers[entry.deviceId] ?? logger(),
                epochApplied: onEpoch
            )
            let crypto = CallFrameCrypto(
                callID: 77,
                format: .ecall,
                keyRing: ring,
                logger: logger(),
                onKeyNeeded: coordinator.keyNeededHandler
            )
            await coordinator.start(crypto: crypto)
            let video = try #require(
                try CallMediaSources.video(
                    .generated,
                    settings: .init(codec: .h264, width: 320, height: 240, frameRate: 15)
                )
            )
            let audio = try #require(try CallMediaSources.audio(.generated))
            let session = CallSession(
                configuration: .init(
                    janusURL: bed.webSocketURL,
                    room: room,
                    callID: 77,
                    display: "\(entry.userId):user \(entry.userId)",
                    crypto: crypto,
                    transport: .init(localAddresses: [bed.hostAddress]),
                    roomOptions: options
                ),
                sources: [audio, video],
                observers: [coordinator.participantObserver] + observers,
                logger: logger()
            )
            try await session.join()
            members.append(
                Member(userId: entry.userId, session: session, coordinator: coordinator, ring: ring, store: store)
            )
        }
        return (members, identities)
    }

    static func participant(_ userID: UInt64, at member: Member) async -> CallStatus.Participant? {
        await member.session.status().participants.first { $0.id == "\(userID)" }
    }

    static func frames(from userID: UInt64, at member: Member) async -> Int {
        await participant(userID, at: member)?.framesDecrypted ?? 0
    }

    static func undecryptable(at member: Member) async -> Int {
        await member.session.status().participants.reduce(0) { $0 + $1.undecryptable }
    }

    /// Polls `condition` every 50 ms; how long it took, or nil after `patience`.
    static func waitUntil(_ condition: () async -> Bool) async -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < patience {
            if await condition() { return ContinuousClock.now - start }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Every member receives more than `margin` new frames from every other.
    static func mediaFlows(among members: [Member], margin: Int = 15) async -> Bool {
        var before: [String: Int] = [:]
        for receiver in members {
            for sender in members where sender.userId != receiver.userId {
                before["\(receiver.userId)<\(sender.userId)"] = await frames(from: sender.userId, at: receiver)
            }
        }
        return await waitUntil {
            for receiver in members {
                for sender in members where sender.userId != receiver.userId {
                    let now = await frames(from: sender.userId, at: receiver)
                    if now <= before["\(receiver.userId)<\(sender.userId)"]! + margin { return false }
                }
            }
            return true
        } != nil
    }

    @Test func rotationsALeaveAndAForgedRotationKeepMediaDecryptable() async throws {
        let bed = try TestJanus.shared()
        let folder = try TestPaths.temporaryDirectory("conclave-call-keys")
        defer { try? FileManager.default.removeItem(at: folder) }
        let hub = InMemorySignalingHub()
        // User 2 also records what it receives: the recording follows the rotations.
        let recording = try RecordingSession(
            configuration: .init(
                directory: folder.appendingPathComponent("recording").path,
                callID: "77",
                recorderVersion: "test",
                cryptoFormat: "ecall",
                keyEpochs: [0]
            ),
            logger: Self.logger()
        )
        let (members, identities) = try await Self.startCall(
            on: bed,
            count: 3,
            hub: hub,
            rotationPeriod: 3,
            folder: folder,
            recordingOf: 2,
            recording: recording
        )
        #expect(await Self.mediaFlows(among: members), "media flows before any rotation")

        // Two periodic rotations reach everyone and apply.
        let rotated = await Self.waitUntil {
            members.allSatisfy { ($0.ring.current()?.epoch ?? 0) >= 2 }
        }
        #expect(rotated != nil, "two rotations applied everywhere")
        #expect(await Self.mediaFlows(among: members), "media flows after two rotations")

        // A forged rotation from a participant who is not the host changes nothing.
        let before = members[1].ring.current()
        var forged = SignalMessage(type: .keyRotation)
        forged.callId = 77
        forged.participantId = 2
        forged.participantDeviceId = 21
        forged.encryptedAESKey = try KeyWrapping.wrap(.random(), for: identities[2]!.publicKey)
        forged.keyRotationTimestamp = Date().timeIntervalSince1970
        forged.epoch = 1000
        forged.senderId = 3
        forged.senderDeviceId = 31
        hub.deliver(try forged.signed(by: identities[3]!, at: Date()).jsonBody(), toDevice: 21)
        let rejected = await Self.waitUntil { await members[1].coordinator.rejectedMessages == 1 }
        #expect(rejected != nil, "the forged rotation is rejected")
        #expect((members[1].ring.current()?.epoch ?? 0) < 1000)
        #expect(members[1].ring.current()?.epoch ?? 0 >= before?.epoch ?? 0)
        #expect(await Self.mediaFlows(among: members), "media flows under the real key")

        // User 3 leaves: the host rotates at once, and the two left switch to it.
        let epochBeforeLeave = members[0].ring.snapshot().next?.epoch ?? members[0].ring.current()?.epoch ?? 0
        await members[2].session.leave()
        await members[2].coordinator.stop()
        let leaveRotation = await Self.waitUntil {
            members[0...1].allSatisfy { ($0.ring.current()?.epoch ?? 0) > epochBeforeLeave }
        }
        #expect(leaveRotation != nil, "the key rotated after the leave")
        // Later rotations go to user 2 only: the departed device gets no key.
        let toDeparted = hub.deliveredCount(toDevice: 31)
        let toRemaining = hub.deliveredCount(toDevice: 21)
        let epochAfterLeave = members[0].ring.current()?.epoch ?? 0
        let another = await Self.waitUntil {
            members[0...1].allSatisfy { ($0.ring.current()?.epoch ?? 0) > epochAfterLeave }
        }
        #expect(another != nil, "rotations go on")
        #expect(hub.deliveredCount(toDevice: 31) == toDeparted)
        #expect(hub.deliveredCount(toDevice: 21) > toRemaining)
        #expect(await Self.mediaFlows(among: Array(members[0...1])), "media flows after the leave")

        for member in members[0...1] {
            #expect(await Self.undecryptable(at: member) == 0, "user \(member.userId) decrypted every frame")
            #expect(await member.coordinator.rejectedMessages == (member.userId == 2 ? 1 : 0))
        }
        let stored = try #require(try members[1].store.calls.record(for: 77))
        #expect(stored.history.count >= 3, "each epoch is stored")
        #expect(stored.history.dropLast().allSatisfy { $0.validUntil != nil })
        for member in members[0...1] {
            await member.coordinator.stop()
            await member.session.leave()
        }
        let manifest = await recording.finish()
        let epochs = try #require(manifest.keyEpochTimes)
        let lastEpoch = members[1].ring.snapshot().current?.epoch ?? 0
        #expect(epochs.map(\.epoch) == Array(1...UInt64(epochs.count)), "every rotation, in order")
        #expect(UInt64(epochs.count) >= lastEpoch)
        #expect(zip(epochs, epochs.dropFirst()).allSatisfy { $0.offset < $1.offset })
        let recorded = manifest.participants.filter(\.recorded)
        #expect(recorded.count == 2, "users 1 and 3 were recorded")
        #expect(recorded.allSatisfy { $0.framesUndecryptable == 0 }, "no frame lost to a rotation")
        let tracks = recorded.flatMap(\.segments).flatMap(\.tracks)
        #expect(tracks.allSatisfy { $0.framesUndecryptable == 0 && $0.framesWritten > 0 })
        #expect(Set(tracks.flatMap { $0.keyEpochs ?? [] }).count >= 3, "frames under several epochs")
        #expect(try members[1].store.calls.record(for: 77)?.history.count == 2, "after the call: current and previous")
        hub.close()
    }

    @Test func aCorruptedKeyRecoversByAskingTheHost() async throws {
        let bed = try TestJanus.shared()
        let folder = try TestPaths.temporaryDirectory("conclave-call-keys")
        defer { try? FileManager.default.removeItem(at: folder) }
        let hub = InMemorySignalingHub()
        let (members, _) = try await Self.startCall(on: bed, count: 2, hub: hub, rotationPeriod: 300, folder: folder)
        #expect(await Self.mediaFlows(among: members), "media flows before the corruption")

        // Bob's key is replaced by a wrong one: he can decrypt nothing from Alice.
        let bob = members[1]
        let corruptedAt = Date()
        bob.ring.removeAll()
        bob.ring.install(.random(), epoch: 0)
        let recovered = await Self.waitUntil {
            await bob.coordinator.appliedEpochs.contains { $0.validFrom >= corruptedAt }
        }
        #expect(recovered != nil, "the host's key arrived")
        let installedAt = try #require(await bob.coordinator.appliedEpochs.last?.validFrom)
        let delay = installedAt.timeIntervalSince(corruptedAt)
        print("emergency redistribution: key back \(Int(delay * 1000)) ms after the corruption")
        #expect(delay < 1, "within a second of the first failure")
        #expect(await Self.mediaFlows(among: members), "media flows again")
        for member in members {
            await member.coordinator.stop()
            await member.session.leave()
        }
        hub.close()
    }
}
