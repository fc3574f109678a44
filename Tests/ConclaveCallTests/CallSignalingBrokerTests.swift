import ConclaveCall
import ConclaveE2EE
import ConclaveTestSupport
import ECallSignaling
import Foundation
import JanusTestBed
import Logging
import RabbitMQTestBed
import STOMPClient
import Testing

/// The call key's lifecycle over a real RabbitMQ (one broker user per device) and a real Janus:
/// rotations, the broker restarting and a device's credentials revoked mid-call, a stranger with
/// broker access forging keys and sending garbage, and an emergency key request. Media must keep
/// flowing under the real key throughout.
@Suite(.serialized) struct CallSignalingBrokerTests {
    typealias Member = CallKeyRotationTests.Member
    typealias Lines = CallKeyCoordinatorTests.Lines

    /// A call of users 1… `count` whose channels are STOMP connections to the shared broker, or
    /// with `privateBroker` to one of its own (which the test may stop and start).
    struct BrokerCall {
        var broker: RabbitMQTestBed
        var members: [Member]
        var identities: [UInt64: DeviceIdentity]
        /// Each device's coordinator log, by user id.
        var lines: [UInt64: Lines]
        var channels: [STOMPSignalingChannel]

        func member(_ userId: UInt64) -> Member { members[Int(userId) - 1] }

        /// The newest epoch `member` knows (scheduled or current).
        static func latestEpoch(_ member: Member) -> UInt64 {
            let snapshot = member.ring.snapshot()
            return snapshot.next?.epoch ?? snapshot.current?.epoch ?? 0
        }

        func end() async {
            for member in members {
                await member.coordinator.stop()
                await member.session.leave()
            }
            for channel in channels { await channel.close() }
            broker.stop()
        }
    }

    /// A quiet logger for the STOMP connections themselves.
    static let stompLogger: Logger = {
        var logger = Logger(label: "broker-call-stomp")
        logger.logLevel = .critical
        return logger
    }()

    /// A connected channel for device `id`, with a short reconnect backoff so that a restarted
    /// broker is found again quickly.
    static func channel(_ broker: RabbitMQTestBed, device id: UInt64) async throws -> STOMPSignalingChannel {
        var configuration = STOMPSignalingChannel.Configuration(
            url: broker.webSocketURL,
            deviceID: id,
            passcode: try broker.addDevice(id)
        )
        configuration.tuning = {
            $0.reconnect = STOMPReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1))
        }
        let channel = try STOMPSignalingChannel(configuration: configuration, logger: stompLogger)
        try await channel.connect()
        return channel
    }

    static func startCall(
        count: Int,
        rotationPeriod: Double,
        folder: URL,
        privateBroker: Bool = false
    ) async throws -> BrokerCall {
        let bed = try TestJanus.shared()
        let broker = try privateBroker ? RabbitMQTestBed() : RabbitMQTestBed.shared()
        var channels: [UInt64: any SignalingChannel] = [:]
        var stompChannels: [STOMPSignalingChannel] = []
        var loggers: [UInt64: Logger] = [:]
        var lines: [UInt64: Lines] = [:]
        for user in 1...UInt64(count) {
            let device = user * 10 + 1
            let channel = try await channel(broker, device: device)
            channels[device] = channel
            stompChannels.append(channel)
            let captured = Lines()
            lines[user] = captured
            var logger = Logger(label: "broker-call-\(user)") { _ in
                CallKeyCoordinatorTests.Capturing(lines: captured)
            }
            logger.logLevel = .notice
            loggers[device] = logger
        }
        let (members, identities) = try await CallKeyRotationTests.startCall(
            on: bed,
            count: count,
            channels: channels,
            loggers: loggers,
            rotationPeriod: rotationPeriod,
            folder: folder
        )
        return BrokerCall(
            broker: broker,
            members: members,
            identities: identities,
            lines: lines,
            channels: stompChannels
        )
    }

    static func waitUntil(_ condition: () async -> Bool) async -> Duration? {
        await CallKeyRotationTests.waitUntil(condition)
    }

    static func mediaFlows(among members: [Member]) async -> Bool {
        await CallKeyRotationTests.mediaFlows(among: members)
    }

    static func undecryptable(at member: Member) async -> Int {
        await CallKeyRotationTests.undecryptable(at: member)
    }

    @Test func rotationsOverTheBrokerReachEveryDeviceWithTheSameEpochs() async throws {
        let folder = try TestPaths.temporaryDirectory("conclave-broker-call")
        defer { try? FileManager.default.removeItem(at: folder) }
        let call = try await Self.startCall(count: 3, rotationPeriod: 3, folder: folder)
        #expect(await Self.mediaFlows(among: call.members), "media flows before any rotation")

        let rotated = await Self.waitUntil { call.members.allSatisfy { ($0.ring.current()?.epoch ?? 0) >= 3 } }
        #expect(rotated != nil, "three rotations applied everywhere")
        #expect(await Self.mediaFlows(among: call.members), "media flows after the rotations")
        let hostEpochs = await call.member(1).coordinator.appliedEpochs
        #expect(Array(hostEpochs.map(\.epoch).prefix(3)) == [1, 2, 3])
        for member in call.members {
            let applied = await member.coordinator.appliedEpochs
            #expect(
                Array(applied.map(\.epoch).prefix(3)) == [1, 2, 3],
                "user \(member.userId) applied each epoch once"
            )
            // Each arrived before its switch time, so every device switches at the host's instant
            // (as the message carries it: to the millisecond).
            let switches = zip(applied.prefix(3), hostEpochs.prefix(3))
            #expect(
                switches.allSatisfy { abs($0.validFrom.timeIntervalSince($1.validFrom)) <= 0.001 },
                "user \(member.userId) switches when the host does"
            )
            #expect(await Self.undecryptable(at: member) == 0, "user \(member.userId) decrypted every frame")
            #expect(await member.coordinator.rejectedMessages == 0)
        }
        await call.end()
    }

    @Test func aBrokerRestartMidCallKeepsMediaFlowingAndTheOwedRotationFollows() async throws {
        let folder = try TestPaths.temporaryDirectory("conclave-broker-call")
        defer { try? FileManager.default.removeItem(at: folder) }
        let call = try await Self.startCall(count: 3, rotationPeriod: 4, folder: folder, privateBroker: true)
        let first = await Self.waitUntil { call.members.allSatisfy { ($0.ring.current()?.epoch ?? 0) >= 1 } }
        #expect(first != nil, "a rotation before the outage")

        try call.broker.stopBroker()
        // A rotation falls due during the outage: the host owes it instead of switching alone.
        let postponed = await Self.waitUntil { call.lines[1]!.count(.notice, containing: "postponed") == 1 }
        #expect(postponed != nil, "the host postponed the rotation due during the outage")
        let epochInOutage = BrokerCall.latestEpoch(call.member(1))
        #expect(call.members.allSatisfy { BrokerCall.latestEpoch($0) == epochInOutage }, "nobody switched alone")
        #expect(await Self.mediaFlows(among: call.members), "media flows while the broker is down")
        #expect(call.members.allSatisfy { BrokerCall.latestEpoch($0) == epochInOutage })

        try call.broker.startBroker()
        let resumed = await Self.waitUntil {
            call.members.allSatisfy { ($0.ring.current()?.epoch ?? 0) > epochInOutage }
        }
        #expect(resumed != nil, "the owed rotation reached everyone once the broker was back")
        #expect(call.lines[1]!.count(.notice, containing: "signaling is back") == 1)
        #expect(await Self.mediaFlows(among: call.members), "media flows after the restart")
        for member in call.members {
            #expect(await Self.undecryptable(at: member) == 0, "user \(member.userId) decrypted every frame")
            #expect(await member.coordinator.signalingFailure == nil)
        }
        await call.end()
    }

    @Test func forgedAndMalformedMessagesFromAStrangerWithBrokerAccessChangeNothing() async throws {
        let folder = try TestPaths.temporaryDirectory("conclave-broker-call")
        defer { try? FileManager.default.removeItem(at: folder) }
        let call = try await Self.startCall(count: 3, rotationPeriod: 300, folder: folder)
        #expect(await Self.mediaFlows(among: call.members), "media flows before the attack")
        let bob = call.member(2)
        let lines = call.lines[2]!

        // A device user of the broker who is not in the call, with a key pair of its own.
        let stranger = try await Self.channel(call.broker, device: 91)
        let strangerIdentity = try DeviceIdentity.generate(.p256)
        var forged = SignalMessage(type: .keyRotation)
        forged.callId = 77
        forged.participantId = 2
        forged.participantDeviceId = 21
        forged.encryptedAESKey = try KeyWrapping.wrap(.random(), for: call.identities[2]!.publicKey)
        forged.keyRotationTimestamp = Date().timeIntervalSince1970
        forged.epoch = 1000
        forged.senderId = 9
        forged.senderDeviceId = 91
        try await stranger.send(try forged.signed(by: strangerIdentity, at: Date()).jsonBody(), toDevice: 21)
        // The same unsigned, claiming to come from the host.
        var unsigned = forged
        unsigned.senderId = 1
        unsigned.senderDeviceId = 11
        try await stranger.send(unsigned.jsonBody(), toDevice: 21)
        let rejected = await Self.waitUntil { await bob.coordinator.rejectedMessages == 2 }
        #expect(rejected != nil, "both forged rotations are rejected")
        #expect(lines.count(.warning, containing: "rejected key_rotation from 9_91") == 1)
        #expect(lines.count(.warning, containing: "rejected key_rotation from 1_11") == 1)

        // Garbage: not JSON, an unknown type, a field of the wrong type.
        try await stranger.send("{\"type\":", toDevice: 21)
        try await stranger.send("{\"type\":\"quantum_teleport\",\"callId\":77}", toDevice: 21)
        try await stranger.send("{\"type\":\"key_rotation\",\"callId\":77,\"participantId\":\"two\"}", toDevice: 21)
        let dropped = await Self.waitUntil { lines.count(.notice, containing: "dropped a signaling message") == 3 }
        #expect(dropped != nil, "each is dropped with one line")
        #expect(lines.count(.notice, containing: "not a JSON object") == 1)
        #expect(lines.count(.notice, containing: "unknown type 'quantum_teleport'") == 1)
        #expect(lines.count(.notice, containing: "field 'participantId' must be") == 1)
        #expect(lines.all.count == 5, "two rejections and three drops, nothing else: \(lines.all)")

        #expect(await Self.mediaFlows(among: call.members), "media flows under the real key")
        for member in call.members {
            #expect(member.ring.current()?.epoch == 0 && member.ring.snapshot().next == nil, "key epoch unchanged")
            #expect(await member.coordinator.appliedEpochs.isEmpty)
            #expect(await Self.undecryptable(at: member) == 0, "user \(member.userId) decrypted every frame")
        }
        #expect(await bob.coordinator.rejectedMessages == 2)
        await stranger.close()
        await call.end()
    }

    @Test func aCorruptedKeyRecoversOverTheBrokerWithinASecond() async throws {
        let folder = try TestPaths.temporaryDirectory("conclave-broker-call")
        defer { try? FileManager.default.removeItem(at: folder) }
        let call = try await Self.startCall(count: 2, rotationPeriod: 300, folder: folder)
        #expect(await Self.mediaFlows(among: call.members), "media flows before the corruption")

        let bob = call.member(2)
        let corruptedAt = Date()
        bob.ring.removeAll()
        bob.ring.install(.random(), epoch: 0)
        let recovered = await Self.waitUntil {
            await bob.coordinator.appliedEpochs.contains { $0.validFrom >= corruptedAt }
        }
        #expect(recovered != nil, "the host's key arrived over the broker")
        let installedAt = try #require(await bob.coordinator.appliedEpochs.last?.validFrom)
        let delay = installedAt.timeIntervalSince(corruptedAt)
        print("emergency redistribution over RabbitMQ: key back \(Int(delay * 1000)) ms after the corruption")
        #expect(delay < 1, "within a second of the first failure")
        #expect(call.lines[2]!.count(.notice, containing: "asked the key host") >= 1)
        #expect(call.lines[1]!.count(.notice, containing: "sent the current key (epoch 0) to 2_21") >= 1)
        #expect(await Self.mediaFlows(among: call.members), "media flows again")
        await call.end()
    }

    @Test func revokedCredentialsStopOneDevicesSignalingButNotTheCall() async throws {
        let folder = try TestPaths.temporaryDirectory("conclave-broker-call")
        defer { try? FileManager.default.removeItem(at: folder) }
        let call = try await Self.startCall(count: 3, rotationPeriod: 300, folder: folder)
        #expect(await Self.mediaFlows(among: call.members), "media flows before the revocation")
        let carol = call.member(3)

        try call.broker.revokeDevice(31)
        let failed = await Self.waitUntil { await carol.coordinator.signalingFailure != nil }
        #expect(failed != nil, "the revoked device's signaling failed")
        let failure = await carol.coordinator.signalingFailure
        #expect((failure as? STOMPError)?.code == .connectRefused, "a typed refusal: \(String(describing: failure))")
        #expect(call.lines[3]!.count(.error, containing: "call signaling failed for good") == 1)
        #expect(await Self.mediaFlows(among: call.members), "media flows for everyone, the revoked device too")

        // The others go on: Carol leaves, and the host's rotation reaches Bob over the broker.
        await carol.coordinator.stop()
        await carol.session.leave()
        let remaining = Array(call.members[0...1])
        let rotated = await Self.waitUntil { remaining.allSatisfy { ($0.ring.current()?.epoch ?? 0) >= 1 } }
        #expect(rotated != nil, "the rotation after the leave reached the others")
        #expect(await Self.mediaFlows(among: remaining), "media flows between the others")
        for member in remaining {
            #expect(await Self.undecryptable(at: member) == 0, "user \(member.userId) decrypted every frame")
            #expect(await member.coordinator.signalingFailure == nil)
        }
        await call.end()
    }
}
