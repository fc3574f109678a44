import ConclaveCall
import ConclaveE2EE
import ECallSignaling
import Foundation
import Logging
import SignalingTesting
import Synchronization
import Testing

/// The coordinator without Janus: room changes come in as its observer would see them, messages
/// through the in-memory hub.
@Suite struct CallKeyCoordinatorTests {
    final class Lines: Sendable {
        let lines = Mutex<[(Logger.Level, String)]>([])
        func count(_ level: Logger.Level, containing text: String) -> Int {
            lines.withLock { $0.filter { $0.0 == level && $0.1.contains(text) }.count }
        }
        var all: [String] { lines.withLock { $0.map(\.1) } }
    }

    struct Capturing: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.lines.withLock { $0.append((event.level, "\(event.message)")) } }
    }

    struct Device {
        var coordinator: CallKeyCoordinator
        var ring: CallKeyRing
        var lines: Lines
    }

    /// Users 1… `count` (device `10 × user + 1`), user 1 hosting; `keyless` devices start without a
    /// key; `channels` replaces the hub's channel of some devices.
    static func devices(
        _ count: Int,
        hub: InMemorySignalingHub,
        keyless: Set<UInt64> = [],
        channels: [UInt64: any SignalingChannel] = [:]
    ) async throws -> (devices: [UInt64: Device], identities: [UInt64: DeviceIdentity], key: CallKey) {
        let testRoster = try TestRoster(count: count)
        let identities = testRoster.identities
        let roster = testRoster.entries
        let key = CallKey.random()
        var devices: [UInt64: Device] = [:]
        for entry in roster {
            let ring = CallKeyRing()
            let own = keyless.contains(entry.userId) ? nil : key
            if let own { ring.install(own, epoch: 0) }
            let lines = Lines()
            let logger = Logger(label: "coordinator-\(entry.userId)") { _ in Capturing(lines: lines) }
            let coordinator = CallKeyCoordinator(
                lifecycle: CallKeyLifecycle(
                    configuration: .init(callId: 77, me: entry.device, rotationPeriod: 300, rotationLead: 0.5),
                    identity: try DeviceIdentity(
                        type: .p256,
                        privateKeyBytes: identities[entry.userId]!.privateKeyBytes
                    ),
                    roster: roster,
                    key: own
                ),
                channel: channels[entry.deviceId] ?? hub.channel(forDevice: entry.deviceId),
                keyRing: ring,
                storage: nil,
                logger: logger
            )
            await coordinator.start(crypto: nil)
            for other in roster {
                coordinator.participantObserver.participantJoined(
                    feedID: other.userId * 1000,
                    display: "\(other.userId):user \(other.userId)"
                )
            }
            devices[entry.userId] = Device(coordinator: coordinator, ring: ring, lines: lines)
        }
        return (devices, identities, key)
    }

    /// Polls `condition` every 20 ms for up to ten seconds.
    static func eventually(_ condition: () async -> Bool) async -> Bool {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(10) {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test func undecodableMessagesAndUnknownTypesAreDroppedWithOneLineEach() async throws {
        let hub = InMemorySignalingHub()
        let (devices, identities, _) = try await Self.devices(2, hub: hub)
        let bob = devices[2]!
        hub.deliver("{not json", toDevice: 21)
        hub.deliver(#"{"type":"key_rotation","callId":"seventy-seven"}"#, toDevice: 21)
        hub.deliver(#"{"type":"group_hug","callId":77}"#, toDevice: 21)
        // Then a forged rotation: still processed, and rejected.
        var forged = SignalMessage(type: .keyRotation)
        forged.callId = 77
        forged.participantId = 2
        forged.participantDeviceId = 21
        forged.epoch = 9
        forged.encryptedAESKey = try KeyWrapping.wrap(.random(), for: identities[2]!.publicKey)
        forged.senderId = 1
        forged.senderDeviceId = 11
        hub.deliver(try forged.signed(by: try DeviceIdentity.generate(.p256), at: Date()).jsonBody(), toDevice: 21)
        #expect(await Self.eventually { await bob.coordinator.rejectedMessages == 1 })
        #expect(bob.lines.count(.notice, containing: "dropped a signaling message: signaling message is not") == 1)
        #expect(bob.lines.count(.notice, containing: "field 'callId' must be") == 1)
        #expect(bob.lines.count(.notice, containing: "unknown type 'group_hug'") == 1)
        #expect(bob.lines.count(.warning, containing: "rejected key_rotation from 1_11") == 1)
        #expect(bob.ring.current()?.epoch == 0)
        for line in bob.lines.all { #expect(!line.contains("\n")) }
        for device in devices.values { await device.coordinator.stop() }
    }

    @Test func aDeviceWithoutTheKeyRejoinsByRequest() async throws {
        let hub = InMemorySignalingHub()
        let (devices, _, key) = try await Self.devices(3, hub: hub, keyless: [3])
        let carol = devices[3]!
        #expect(carol.ring.current() == nil)
        await carol.coordinator.requestRejoin()
        #expect(await Self.eventually { carol.ring.current()?.key == key })
        #expect(await carol.coordinator.appliedEpochs.count == 1, "the first answer only")
        for device in devices.values { await device.coordinator.stop() }
    }

    @Test func aReplacedFeedIsNotALeaveButTheLastFeedLeavingIs() async throws {
        let hub = InMemorySignalingHub()
        let (devices, _, _) = try await Self.devices(3, hub: hub)
        let host = devices[1]!.coordinator.participantObserver
        // User 3 publishes again with a new feed (a recovery), then the old feed goes.
        host.participantJoined(feedID: 3001, display: "3:user 3")
        host.participantLeft(feedID: 3000)
        host.participantLeft(feedID: 9999)
        // A message queued after those events: once it is handled, they were too.
        hub.deliver(#"{"type":"marker","callId":77}"#, toDevice: 11)
        #expect(await Self.eventually { devices[1]!.lines.count(.notice, containing: "type 'marker'") == 1 })
        #expect(devices[1]!.lines.count(.notice, containing: "rotated") == 0)
        host.participantLeft(feedID: 3001)
        #expect(await Self.eventually { devices[1]!.lines.count(.notice, containing: "participant 3 left") == 1 })
        #expect(await Self.eventually { devices[2]!.ring.current()?.epoch == 1 }, "user 2 switched")
        #expect(hub.deliveredCount(toDevice: 31) == 0, "the leaver got nothing")
        for device in devices.values { await device.coordinator.stop() }
    }

    @Test func whenTheHostLeavesTheNextDeviceTakesOverAndRotates() async throws {
        let hub = InMemorySignalingHub()
        let (devices, _, _) = try await Self.devices(3, hub: hub)
        await devices[1]!.coordinator.stop()
        for user: UInt64 in [3, 2] { devices[user]!.coordinator.participantObserver.participantLeft(feedID: 1000) }
        #expect(await Self.eventually { await devices[2]!.coordinator.isHost })
        #expect(await devices[3]!.coordinator.host == DeviceAddress(userId: 2, deviceId: 21))
        #expect(await Self.eventually { devices[3]!.ring.current()?.epoch == 1 }, "the new host's key applies")
        #expect(await devices[3]!.coordinator.rejectedMessages == 0)
        for device in devices.values { await device.coordinator.stop() }
    }

    /// A rejoining device asks everyone for the key, and the key host as its first frames fail.
    /// The host's answer comes first, then a rotation applies, and only then a participant's
    /// rejoin answer, written under the older epoch (a loaded broker delivered them so; the device
    /// then applied epochs 3, 4, 3). That answer is kept for decryption only: the newer epoch stays
    /// the sending key and is the last epoch applied. Every input goes through the one ordered
    /// stream of messages, so the order is the test's, whatever the timing.
    @Test func aRejoinAnswerOvertakenByARotationDoesNotTakeTheKeyBack() async throws {
        let hub = InMemorySignalingHub()
        let testRoster = try TestRoster(count: 3)
        let identities = testRoster.identities
        let carol = try #require(testRoster.entries.first { $0.userId == 3 })
        let ring = CallKeyRing()
        let lines = Lines()
        let coordinator = CallKeyCoordinator(
            lifecycle: CallKeyLifecycle(
                configuration: .init(callId: 77, me: carol.device),
                identity: try DeviceIdentity(type: .p256, privateKeyBytes: identities[3]!.privateKeyBytes),
                roster: testRoster.entries,
                key: nil
            ),
            channel: hub.channel(forDevice: carol.deviceId),
            keyRing: ring,
            storage: nil,
            logger: Logger(label: "coordinator-3") { _ in Capturing(lines: lines) }
        )
        await coordinator.start(crypto: nil)
        await coordinator.requestRejoin()
        coordinator.submit(
            .keyNeeded(KeyNeededEvent(callID: 77, senderID: 1, codec: .h264, reason: .authenticationFailed))
        )
        // The rejoin request and the key request are out: both answers are awaited.
        #expect(await Self.eventually { hub.deliveredCount(toDevice: 11) == 2 })

        let first = CallKey.random()
        let second = CallKey.random()
        func message(_ type: SignalMessageType, key: CallKey, epoch: UInt64, from sender: UInt64) throws -> String {
            var message = SignalMessage(type: type)
            message.callId = 77
            message.participantId = 3
            message.participantDeviceId = 31
            message.calleeDeviceId = type == .participantAcceptRejoin ? 31 : nil
            message.epoch = epoch
            message.keyRotationTimestamp = type == .keyRotation ? Date().timeIntervalSince1970 : nil
            message.encryptedAESKey = try KeyWrapping.wrap(key, for: identities[3]!.publicKey)
            message.senderId = sender
            message.senderDeviceId = sender * 10 + 1
            return try message.signed(by: identities[sender]!, at: Date()).jsonBody()
        }
        let lateRejoinAnswer = try message(.participantAcceptRejoin, key: first, epoch: 0, from: 2)
        hub.deliver(try message(.sendAESKey, key: first, epoch: 0, from: 1), toDevice: 31)
        #expect(await Self.eventually { ring.current()?.epoch == 0 })
        // A rotation due at once: the ring applies it as soon as it is asked for the current key.
        hub.deliver(try message(.keyRotation, key: second, epoch: 1, from: 1), toDevice: 31)
        #expect(await Self.eventually { ring.current()?.epoch == 1 })
        hub.deliver(lateRejoinAnswer, toDevice: 31)
        hub.deliver(#"{"type":"marker","callId":77}"#, toDevice: 31)
        #expect(await Self.eventually { lines.count(.notice, containing: "type 'marker'") == 1 })

        #expect(ring.current() == KeyRingEntry(key: second, epoch: 1), "epoch 1 stays the sending key")
        #expect(ring.candidates(for: .video).contains(KeyRingEntry(key: first, epoch: 0)), "epoch 0 still decrypts")
        #expect(await coordinator.appliedEpochs.map(\.epoch) == [0, 1])
        #expect(await coordinator.rejectedMessages == 0)
        #expect(lines.count(.notice, containing: "kept the key of epoch 0") == 1, "\(lines.all)")
        await coordinator.stop()
        hub.close()
    }

    /// A hub channel whose sends wait until the test opens the gate: a broker that is away.
    final class StalledChannel: SignalingChannel {
        let inner: InMemorySignalingChannel
        let gate: AsyncStream<Void>
        let stalled = Mutex(0)
        init(inner: InMemorySignalingChannel, gate: AsyncStream<Void>) {
            self.inner = inner
            self.gate = gate
        }
        var messages: AsyncStream<String> { inner.messages }
        func send(_ body: String, toDevice deviceID: UInt64) async throws {
            stalled.withLock { $0 += 1 }
            for await _ in gate { break }
            try await inner.send(body, toDevice: deviceID)
        }
    }

    @Test func aSendWaitingForTheBrokerDoesNotHoldUpIncomingKeys() async throws {
        let hub = InMemorySignalingHub()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let stalled = StalledChannel(inner: hub.channel(forDevice: 21), gate: gate)
        let (devices, _, _) = try await Self.devices(3, hub: hub, channels: [21: stalled])
        let bob = devices[2]!
        // Bob's key request to the host cannot go out...
        bob.coordinator.submit(
            .keyNeeded(KeyNeededEvent(callID: 77, senderID: 1, codec: .opus, reason: .authenticationFailed))
        )
        #expect(await Self.eventually { stalled.stalled.withLock { $0 } == 1 })
        // ...yet the rotation the host makes when carol leaves reaches him and is scheduled.
        devices[1]!.coordinator.participantObserver.participantLeft(feedID: 3000)
        #expect(await Self.eventually { await bob.coordinator.appliedEpochs.contains { $0.epoch == 1 } })
        open.finish()
    }

}
