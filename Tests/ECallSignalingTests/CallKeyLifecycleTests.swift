import ConclaveCore
import ConclaveE2EE
import ECallSignaling
import Foundation
import Testing

/// Several devices' lifecycles wired together: sent messages go through JSON to their device.
struct Network {
    typealias Action = CallKeyLifecycle.Action

    var devices: [UInt64: CallKeyLifecycle] = [:]
    var identities: [UInt64: DeviceIdentity] = [:]
    var roster: [RosterEntry] = []
    /// Every action each device produced, in order.
    var actions: [UInt64: [Action]] = [:]
    var now = Date(timeIntervalSince1970: 1_763_942_400)
    let key = CallKey.random()

    /// The recorder's address when there is one: user 0 sorts before every participant, so it
    /// would be the first in the host succession if it counted itself.
    static let recorder = DeviceAddress(userId: 0, deviceId: 901)

    /// Users 1, 2, 3 (… `count`) with devices 11, 21, 31; user 1 is host. `recorder`: the roster
    /// also has ``recorder``, which never publishes, with `mayHoldKeyRole` as given.
    init(
        count: Int = 3,
        ecallCompatible: Bool = false,
        keyless: Set<UInt64> = [],
        recorder recorderMayHoldKeyRole: Bool? = nil
    ) throws {
        for index in 1...UInt64(count) {
            let identity = try DeviceIdentity.generate(.p256)
            identities[index * 10 + 1] = identity
            roster.append(
                RosterEntry(
                    userId: index,
                    deviceId: index * 10 + 1,
                    displayName: "user \(index)",
                    publicKey: identity.publicKeyString,
                    isHost: index == 1
                )
            )
        }
        if recorderMayHoldKeyRole != nil {
            let identity = try DeviceIdentity.generate(.p256)
            identities[Self.recorder.deviceId] = identity
            roster.append(
                RosterEntry(
                    userId: Self.recorder.userId,
                    deviceId: Self.recorder.deviceId,
                    displayName: "recorder",
                    publicKey: identity.publicKeyString
                )
            )
        }
        for entry in roster {
            let configuration = CallKeyLifecycle.Configuration(
                callId: 7,
                me: entry.device,
                rotationPeriod: 20,
                ecallCompatible: ecallCompatible,
                mayHoldKeyRole: entry.device == Self.recorder ? recorderMayHoldKeyRole ?? true : true
            )
            var lifecycle = CallKeyLifecycle(
                configuration: configuration,
                identity: identities[entry.deviceId]!,
                roster: roster,
                key: keyless.contains(entry.deviceId) ? nil : key
            )
            actions[entry.deviceId] = lifecycle.start(now: now)
            devices[entry.deviceId] = lifecycle
        }
        // The recorder subscribes and never publishes: nobody sees it in the room.
        for device in devices.keys {
            for user in roster.map(\.userId) where user != Self.recorder.userId {
                feed(device, .participantJoined(userId: user))
            }
        }
    }

    /// Gives `input` to `device` and delivers what it sends (and what that causes), breadth first.
    @discardableResult
    mutating func feed(_ device: UInt64, _ input: CallKeyLifecycle.Input) -> [Action] {
        var queue: [(UInt64, CallKeyLifecycle.Input)] = [(device, input)]
        var first: [Action]?
        while !queue.isEmpty {
            let (target, next) = queue.removeFirst()
            guard var lifecycle = devices[target] else { continue }
            let produced = lifecycle.handle(next, now: now)
            devices[target] = lifecycle
            actions[target, default: []] += produced
            if first == nil { first = produced }
            for case .send(let message, let to) in produced {
                queue.append((to, .message(try! SignalMessage(json: message.jsonBody()))))
            }
        }
        return first ?? []
    }

    /// Like ``feed(_:_:)``, but what is sent to the devices in `held` is held up on its way: it
    /// never arrives (a test takes it from ``sends(_:_:)`` and delivers it later).
    mutating func feed(_ device: UInt64, _ input: CallKeyLifecycle.Input, holdingUp held: Set<UInt64>) {
        let away = held.compactMap { id in devices.removeValue(forKey: id).map { (id, $0) } }
        feed(device, input)
        for (id, lifecycle) in away { devices[id] = lifecycle }
    }

    mutating func advance(by seconds: Double) { now = now.addingTimeInterval(seconds) }

    /// The last key `device` scheduled or installed, with its epoch.
    func lastKey(_ device: UInt64) -> (CallKey, UInt64)? {
        for action in (actions[device] ?? []).reversed() {
            switch action {
            case .schedule(let key, let epoch, _), .install(let key, let epoch): return (key, epoch)
            default: continue
            }
        }
        return nil
    }

    func warnings(_ device: UInt64) -> [String] {
        (actions[device] ?? []).compactMap {
            if case .log(.warning, let line) = $0 { return line }
            return nil
        }
    }

    func sends(_ device: UInt64, _ type: SignalMessageType) -> [(SignalMessage, UInt64)] {
        (actions[device] ?? []).compactMap {
            if case .send(let message, let to) = $0, message.type == type { return (message, to) }
            return nil
        }
    }
}

@Suite struct CallKeyLifecycleTests {
    @Test func theHostRotatesEveryPeriodAndEveryoneSchedulesTheSameKey() throws {
        var net = try Network()
        #expect(net.actions[11]?.contains(.becameHost) == true)
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(20))
        #expect(net.devices[21]?.nextDeadline == nil)
        net.advance(by: 19.9)
        net.feed(11, .tick)
        #expect(net.sends(11, .keyRotation).isEmpty, "not yet due")
        net.advance(by: 0.1)
        net.feed(11, .tick)
        let sent = net.sends(11, .keyRotation)
        #expect(Set(sent.map(\.1)) == [21, 31])
        let rotationTime = net.now.addingTimeInterval(10)
        #expect(sent.allSatisfy { $0.0.keyRotationTimestamp == rotationTime.timeIntervalSince1970 })
        #expect(sent.allSatisfy { $0.0.epoch == 1 && $0.0.signature != nil })
        let (hostKey, hostEpoch) = try #require(net.lastKey(11))
        #expect(hostKey != net.key && hostEpoch == 1)
        for device: UInt64 in [21, 31] {
            let scheduled = net.actions[device]?.contains(.schedule(hostKey, epoch: 1, at: rotationTime))
            #expect(scheduled == true, "device \(device)")
            #expect(net.warnings(device).isEmpty)
            #expect(
                net.actions[device]?.contains { if case .store(1, _, rotationTime) = $0 { true } else { false } }
                    == true
            )
        }
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(20))
        net.advance(by: 20)
        net.feed(11, .tick)
        #expect(net.sends(11, .keyRotation).count == 4)
        #expect(try #require(net.lastKey(21)).1 == 2)
    }

    @Test func aRotationDueWhileSignalingIsDownIsMadeAfterItComesBack() throws {
        var net = try Network()
        net.feed(11, .signaling(available: false))
        net.advance(by: 20)
        let postponed = net.feed(11, .tick)
        #expect(net.sends(11, .keyRotation).isEmpty, "nothing is sent into the outage")
        #expect(net.lastKey(11) == nil, "the host keeps the key everyone has")
        #expect(
            postponed.contains { if case .log(.notice, let line) = $0 { line.contains("postponed") } else { false } }
        )
        #expect(net.devices[11]?.nextDeadline == nil, "no timer while signaling is down")
        // A departure during the outage is owed too, and does not make a second rotation.
        net.feed(11, .participantLeft(userId: 3))
        #expect(net.sends(11, .keyRotation).isEmpty)

        net.advance(by: 4)
        net.feed(11, .signaling(available: true))
        #expect(net.sends(11, .keyRotation).isEmpty, "the others may not have subscribed again yet")
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(2))
        net.advance(by: 2)
        net.feed(11, .tick)
        #expect(net.sends(11, .keyRotation).map(\.1) == [21], "one rotation, not to the departed device")
        #expect(net.lastKey(21)?.1 == 1 && net.lastKey(11)?.1 == 1)
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(20), "the period restarts")
        // Up again without an owed rotation: nothing happens.
        net.feed(11, .signaling(available: false))
        #expect(net.feed(11, .signaling(available: true)).isEmpty)
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(20))
    }

    @Test func aLeaveRotatesAndTheLeaverGetsNoKey() throws {
        var net = try Network()
        net.advance(by: 3)
        net.feed(11, .participantLeft(userId: 3))
        let sent = net.sends(11, .keyRotation)
        #expect(sent.map(\.1) == [21], "only the remaining device")
        #expect(net.lastKey(21)?.1 == 1)
        #expect(net.lastKey(31) == nil)
        #expect(net.devices[11]?.nextDeadline == net.now.addingTimeInterval(20), "the period restarts")
        // A non-host seeing the leave does nothing but note it.
        #expect(net.feed(21, .participantLeft(userId: 3)).isEmpty)
    }

    @Test func whenTheHostLeavesTheLowestRemainingDeviceTakesOverAndRotates() throws {
        var net = try Network()
        net.advance(by: 5)
        let actions2 = net.feed(21, .participantLeft(userId: 1))
        #expect(actions2.contains(.becameHost))
        #expect(net.devices[21]?.isHost == true)
        #expect(net.sends(21, .keyRotation).map(\.1) == [31], "the old host is gone")
        let actions3 = net.feed(31, .participantLeft(userId: 1))
        #expect(!actions3.contains(.becameHost))
        #expect(net.devices[31]?.host == DeviceAddress(userId: 2, deviceId: 21))
        #expect(net.lastKey(31)?.1 == 1 && net.warnings(31).isEmpty, "the new host's rotation is accepted")
        // The old host's rotation is no longer accepted.
        net.advance(by: 1)
        net.feed(11, .tick)
        var stale = SignalMessage(type: .keyRotation)
        stale.callId = 7
        stale.participantId = 3
        stale.participantDeviceId = 31
        stale.epoch = 9
        stale.encryptedAESKey = try KeyWrapping.wrap(.random(), for: net.identities[31]!.publicKey)
        stale.senderId = 1
        stale.senderDeviceId = 11
        net.feed(31, .message(try stale.signed(by: net.identities[11]!, at: net.now)))
        #expect(net.warnings(31).last?.contains("may not send it") == true)
        #expect(net.lastKey(31)?.1 == 1)
    }

    @Test func aRotationFromTheNextHostIsHeldOnlyUntilTheHostIsSeenLeaving() throws {
        var net = try Network()
        var early = SignalMessage(type: .keyRotation)
        early.callId = 7
        early.participantId = 3
        early.participantDeviceId = 31
        early.epoch = 1
        early.keyRotationTimestamp = net.now.timeIntervalSince1970 + 10
        early.encryptedAESKey = try KeyWrapping.wrap(.random(), for: net.identities[31]!.publicKey)
        early.senderId = 2
        early.senderDeviceId = 21
        net.feed(31, .message(try early.signed(by: net.identities[21]!, at: net.now)))
        #expect(net.lastKey(31) == nil && net.warnings(31).isEmpty, "held, not applied")
        // The host never leaves: after five seconds it is rejected and the key stays.
        net.advance(by: 5.1)
        net.feed(31, .tick)
        #expect(net.warnings(31).last?.contains("did not leave") == true)
        net.feed(31, .participantLeft(userId: 1))
        #expect(net.lastKey(31) == nil, "an expired rotation is gone for good")
    }

    /// The succession the participants compute leaves the recorder out (they never see it
    /// publish); a recorder that counted itself would name itself host and refuse their keys.
    @Test func aRecorderStaysOutOfTheHostSuccessionAndFollowsTheParticipantsChoice() throws {
        var careless = try Network(recorder: true)
        #expect(
            careless.feed(Network.recorder.deviceId, .participantLeft(userId: 1)).contains(.becameHost),
            "counted as present, the recorder would take the role"
        )

        var net = try Network(recorder: false)
        let recorder = Network.recorder.deviceId
        let left = net.feed(recorder, .participantLeft(userId: 1))
        #expect(!left.contains(.becameHost))
        #expect(net.devices[recorder]?.isHost == false)
        #expect(net.devices[recorder]?.host == DeviceAddress(userId: 2, deviceId: 21))
        // The participants' successor rotates; the recorder takes that key.
        net.advance(by: 1)
        #expect(net.feed(21, .participantLeft(userId: 1)).contains(.becameHost))
        #expect(Set(net.sends(21, .keyRotation).map(\.1)) == [31, recorder])
        #expect(net.lastKey(recorder)?.1 == 1)
        #expect(net.lastKey(recorder)?.0 == net.lastKey(21)?.0)
        #expect(net.warnings(recorder).isEmpty, "\(net.warnings(recorder))")
        // It never rotates, and asks the new host when a frame fails.
        net.advance(by: 60)
        #expect(net.devices[recorder]?.nextDeadline == nil)
        #expect(net.feed(recorder, .tick).isEmpty)
        let event = KeyNeededEvent(callID: 7, senderID: 2, codec: .vp8, reason: .authenticationFailed)
        net.feed(recorder, .keyNeeded(event))
        #expect(net.sends(recorder, .requestAESKey).map(\.1) == [21])
    }

    @Test func aRecorderRefusesTheKeyRoleByHandoverOrRoster() throws {
        var net = try Network(recorder: false)
        let recorder = Network.recorder.deviceId
        var handover = SignalMessage(type: .handoverHost)
        handover.callId = 7
        handover.participantId = Network.recorder.userId
        handover.participantDeviceId = recorder
        handover.senderId = 1
        handover.senderDeviceId = 11
        let signed = try handover.signed(by: net.identities[11]!, at: net.now)
        #expect(!net.feed(recorder, .message(signed)).contains(.becameHost))
        #expect(net.devices[recorder]?.host == DeviceAddress(userId: 1, deviceId: 11))
        #expect(net.warnings(recorder).last?.contains("may not hold the key role") == true)
        // A roster naming it host leaves it without a host rather than holding the role.
        let identity = try DeviceIdentity.generate(.p256)
        var named = CallKeyLifecycle(
            configuration: .init(callId: 7, me: Network.recorder, mayHoldKeyRole: false),
            identity: identity,
            roster: [
                RosterEntry(
                    userId: Network.recorder.userId,
                    deviceId: recorder,
                    displayName: "recorder",
                    publicKey: identity.publicKeyString,
                    isHost: true
                )
            ],
            key: .random()
        )
        #expect(named.start(now: net.now).isEmpty)
        #expect(!named.isHost && named.host == nil && named.nextDeadline == nil)
    }

    @Test func aSignedHandoverFromTheHostMovesTheRole() throws {
        var net = try Network()
        var handover = SignalMessage(type: .handoverHost)
        handover.callId = 7
        handover.participantId = 3
        handover.senderId = 1
        handover.senderDeviceId = 11
        let signed = try handover.signed(by: net.identities[11]!, at: net.now)
        #expect(net.feed(31, .message(signed)).contains(.becameHost))
        #expect(net.feed(11, .message(signed)).contains(.stoppedBeingHost))
        // From anyone else it is refused.
        var forged = handover
        forged.participantId = 2
        forged.senderId = 2
        forged.senderDeviceId = 21
        #expect(!net.feed(21, .message(try forged.signed(by: net.identities[21]!, at: net.now))).contains(.becameHost))
        #expect(net.warnings(21).count == 1)
    }

    @Test func emergencyRequestGoesToTheHostWhoAnswersWithTheCurrentKeyForThatDevice() throws {
        var net = try Network()
        // Rotate, and let the rotation apply.
        net.advance(by: 20)
        net.feed(11, .tick)
        let (rotated, _) = try #require(net.lastKey(11))
        net.advance(by: 10)
        let event = KeyNeededEvent(callID: 7, senderID: 1, codec: .h264, reason: .authenticationFailed)
        net.feed(31, .keyNeeded(event))
        let request = try #require(net.sends(31, .requestAESKey).first)
        #expect(request.1 == 11 && request.0.participantId == 1 && request.0.senderDeviceId == 31)
        let answer = try #require(net.sends(11, .sendAESKey).first)
        #expect(answer.1 == 31 && answer.0.participantDeviceId == 31 && answer.0.epoch == 1)
        #expect(net.actions[31]?.contains(.install(rotated, epoch: 1)) == true, "the current key, not the first")
        #expect(net.actions[31]?.contains(.keyRequestCompleted) == true)
        #expect(try KeyWrapping.unwrap(answer.0.encryptedAESKey!, with: net.identities[31]!) == rotated)
        // A second, unrequested answer is refused.
        net.feed(31, .message(answer.0))
        #expect(net.warnings(31).last?.contains("no key request is pending") == true)
    }

    @Test func theHostNeverAsksAndNobodyAsksWithoutAHost() throws {
        var net = try Network()
        let event = KeyNeededEvent(callID: 7, senderID: 2, codec: .opus, reason: .authenticationFailed)
        #expect(net.feed(11, .keyNeeded(event)).allSatisfy { if case .send = $0 { false } else { true } })
        // A roster without a host: nobody to ask.
        let identity = try DeviceIdentity.generate(.p256)
        var lonely = CallKeyLifecycle(
            configuration: .init(callId: 7, me: DeviceAddress(userId: 2, deviceId: 21)),
            identity: identity,
            roster: [RosterEntry(userId: 2, deviceId: 21, displayName: "b", publicKey: identity.publicKeyString)],
            key: .random()
        )
        let actions = lonely.handle(.keyNeeded(event), now: net.now)
        #expect(actions.allSatisfy { if case .send = $0 { false } else { true } })
    }

    @Test func aDeviceWithoutTheKeyRejoinsByRequestAndUsesTheFirstAnswer() throws {
        var net = try Network(keyless: [31])
        net.feed(31, .rejoinNeeded)
        #expect(Set(net.sends(31, .participantRequestRejoin).map(\.1)) == [11, 21])
        #expect(net.sends(11, .participantAcceptRejoin).count == 1)
        #expect(net.sends(21, .participantAcceptRejoin).count == 1)
        let installs = (net.actions[31] ?? []).filter { if case .install = $0 { true } else { false } }
        #expect(installs == [.install(net.key, epoch: 0)], "the first answer only")
        // A rejoin request from a device that is not in the roster gets nothing.
        var stranger = SignalMessage(type: .participantRequestRejoin)
        stranger.callId = 7
        stranger.participantId = 9
        stranger.calleeDeviceId = 91
        net.feed(21, .message(stranger))
        #expect(net.sends(21, .participantAcceptRejoin).count == 1)
        #expect(net.warnings(21).last?.contains("not in the call's roster") == true)
    }

    /// Answers overtaken by a rotation, as a loaded broker delivered them to a rejoining device
    /// (which then applied epochs 3, 4, 3): each is kept for decryption only, and the newer epoch
    /// stays current and stored.
    @Test func answersOvertakenByARotationNeverMakeTheirOlderEpochCurrentAgain() throws {
        var net = try Network(keyless: [31])
        let failed = KeyNeededEvent(callID: 7, senderID: 1, codec: .h264, reason: .authenticationFailed)
        // Carol asks everyone for the key (a rejoin), and the host as her first frames fail.
        net.feed(31, .rejoinNeeded, holdingUp: [11, 21])
        net.feed(31, .keyNeeded(failed), holdingUp: [11])
        let rejoinRequest = try #require(net.sends(31, .participantRequestRejoin).first { $0.1 == 21 }?.0)
        let keyRequest = try #require(net.sends(31, .requestAESKey).first?.0)
        // Bob answers the rejoin under epoch 0, and his answer is held up on its way.
        net.feed(21, .message(rejoinRequest), holdingUp: [31])
        let lateRejoin = try #require(net.sends(21, .participantAcceptRejoin).first?.0)
        #expect(lateRejoin.epoch == 0)
        // The host's answer arrives: carol has epoch 0. Then epoch 1 is rotated in and applies.
        net.feed(11, .message(keyRequest))
        #expect(net.lastKey(31)?.1 == 0)
        net.advance(by: 20)
        net.feed(11, .tick)
        let (rotated, rotatedEpoch) = try #require(net.lastKey(11))
        #expect(rotatedEpoch == 1 && net.lastKey(31)?.0 == rotated)
        net.advance(by: 10)

        // Bob's answer arrives now.
        let rejoin = net.feed(31, .message(lateRejoin))
        #expect(rejoin.contains(.retain(net.key, epoch: 0)), "\(rejoin)")
        #expect(!rejoin.contains { Self.changesTheKey($0) }, "\(rejoin)")
        #expect(net.lastKey(31)?.1 == 1, "epoch 1 stays current")

        // A key request answered under epoch 1 arrives after epoch 2 applied: kept the same way,
        // and it completes the request without counting as a rejected message.
        net.feed(31, .keyNeeded(failed), holdingUp: [11])
        let secondRequest = try #require(net.sends(31, .requestAESKey).last?.0)
        net.feed(11, .message(secondRequest), holdingUp: [31])
        let lateAnswer = try #require(net.sends(11, .sendAESKey).last?.0)
        #expect(lateAnswer.epoch == 1)
        net.advance(by: 10)
        net.feed(11, .tick)
        net.advance(by: 10)
        let answer = net.feed(31, .message(lateAnswer))
        #expect(answer.contains(.retain(rotated, epoch: 1)), "\(answer)")
        #expect(answer.contains(.keyRequestCompleted))
        #expect(!answer.contains { Self.changesTheKey($0) }, "\(answer)")
        #expect(net.lastKey(31)?.1 == 2)
        #expect(net.warnings(31).isEmpty, "\(net.warnings(31))")

        // What carol hands on is the newest key: her answer to a rejoin names epoch 2.
        var request = SignalMessage(type: .participantRequestRejoin)
        request.callId = 7
        request.participantId = 2
        request.calleeDeviceId = 21
        net.feed(31, .message(try request.signed(by: net.identities[21]!, at: net.now)), holdingUp: [21])
        #expect(net.sends(31, .participantAcceptRejoin).last?.0.epoch == 2)
    }

    /// A second answer with the current key while the next one is scheduled (a rejoin answer and a
    /// key answer both on their way) is installed again, as a repair, but not stored: the store's
    /// last entry stays the scheduled key.
    @Test func theCurrentKeyAnsweredAgainBeforeAScheduledOneIsNotStoredOverIt() throws {
        var net = try Network(keyless: [31])
        net.feed(31, .rejoinNeeded, holdingUp: [11, 21])
        let rejoinRequest = try #require(net.sends(31, .participantRequestRejoin).first { $0.1 == 11 }?.0)
        net.feed(11, .message(rejoinRequest))
        #expect(net.lastKey(31)?.1 == 0)
        net.advance(by: 20)
        net.feed(11, .tick)
        #expect(net.lastKey(31)?.1 == 1, "scheduled, ten seconds ahead")
        let failed = KeyNeededEvent(callID: 7, senderID: 1, codec: .opus, reason: .authenticationFailed)
        net.feed(31, .keyNeeded(failed), holdingUp: [11])
        let before = net.actions[31]?.count ?? 0
        net.feed(11, .message(try #require(net.sends(31, .requestAESKey).last?.0)))
        let answered = Array((net.actions[31] ?? []).dropFirst(before))
        #expect(answered.contains(.install(net.key, epoch: 0)), "\(answered)")
        #expect(!answered.contains { if case .store = $0 { true } else { false } }, "\(answered)")
        #expect(net.devices[31]?.latestEpoch == 1)
    }

    /// Whether `action` installs, schedules or stores a key.
    static func changesTheKey(_ action: CallKeyLifecycle.Action) -> Bool {
        switch action {
        case .install, .schedule, .store: true
        default: false
        }
    }

    @Test func rejoinAnswersMustMatchThePendingRequest() throws {
        var net = try Network(keyless: [31])
        var answer = SignalMessage(type: .participantAcceptRejoin)
        answer.callId = 7
        answer.participantId = 3
        answer.calleeDeviceId = 31
        answer.epoch = 0
        answer.encryptedAESKey = try KeyWrapping.wrap(.random(), for: net.identities[31]!.publicKey)
        answer.senderId = 2
        answer.senderDeviceId = 21
        let unrequested = try answer.signed(by: net.identities[21]!, at: net.now)
        net.feed(31, .message(unrequested))
        #expect(net.lastKey(31) == nil, "no pending request")
        net.feed(31, .rejoinNeeded)
        let (key, _) = try #require(net.lastKey(31))
        #expect(key == net.key)
        var wrongDevice = answer
        wrongDevice.calleeDeviceId = 32
        net.feed(31, .message(try wrongDevice.signed(by: net.identities[21]!, at: net.now)))
        #expect(net.warnings(31).last?.contains("addressed to another device") == true)
    }

    @Test func aForgedRotationIsRejectedSignedOrNot() throws {
        var net = try Network()
        let stranger = try DeviceIdentity.generate(.p256)
        let evil = CallKey.random()
        var forged = SignalMessage(type: .keyRotation)
        forged.callId = 7
        forged.participantId = 2
        forged.participantDeviceId = 21
        forged.encryptedAESKey = try KeyWrapping.wrap(evil, for: net.identities[21]!.publicKey)
        forged.keyRotationTimestamp = net.now.timeIntervalSince1970 + 10
        forged.epoch = 5
        // Unsigned, as ECall would accept it.
        net.feed(21, .message(forged))
        #expect(net.warnings(21).last?.contains("not signed") == true)
        // Signed by a stranger claiming to be the host.
        forged.senderId = 1
        forged.senderDeviceId = 11
        net.feed(21, .message(try forged.signed(by: stranger, at: net.now)))
        #expect(net.warnings(21).last?.contains("signature does not match") == true)
        // Signed by a stranger under its own name.
        forged.senderId = 9
        forged.senderDeviceId = 91
        net.feed(21, .message(try forged.signed(by: stranger, at: net.now)))
        #expect(net.warnings(21).last?.contains("not in the call's roster") == true)
        // Signed by a participant who is not the host.
        forged.senderId = 3
        forged.senderDeviceId = 31
        net.feed(21, .message(try forged.signed(by: net.identities[31]!, at: net.now)))
        #expect(net.warnings(21).last?.contains("may not send it") == true)
        #expect(net.lastKey(21) == nil, "the key never changed")
        #expect(net.warnings(21).count == 4, "one line each")
    }

    @Test func aReplayedRotationIsRejected() throws {
        var net = try Network()
        net.advance(by: 20)
        net.feed(11, .tick)
        let rotation = try #require(net.sends(11, .keyRotation).first { $0.1 == 21 }?.0)
        // Again at once: not a newer epoch.
        net.feed(21, .message(rotation))
        #expect(net.warnings(21).last?.contains("not newer") == true)
        // Much later: outside the signature window.
        net.advance(by: 120)
        net.feed(21, .message(rotation))
        #expect(net.warnings(21).last?.contains("replay window") == true)
    }

    @Test func ecallCompatibleModeAcceptsUnsignedKeysFromTheRostersHostOnlyWithAWarning() throws {
        var net = try Network(ecallCompatible: true)
        let next = CallKey.random()
        var rotation = SignalMessage(type: .keyRotation)
        rotation.callId = 7
        rotation.participantId = 2
        rotation.participantDeviceId = 21
        rotation.encryptedAESKey = try KeyWrapping.wrap(next, for: net.identities[21]!.publicKey)
        rotation.keyRotationTimestamp = net.now.timeIntervalSince1970 + 10
        net.feed(21, .message(rotation))
        #expect(net.lastKey(21)?.0 == next && net.lastKey(21)?.1 == 1, "ECall's unsigned rotation, epoch + 1")
        #expect(net.warnings(21).last?.contains("unsigned") == true)
        // Claiming another sender device: refused.
        var other = rotation
        other.senderDeviceId = 31
        net.feed(21, .message(other))
        #expect(net.warnings(21).last?.contains("not from the roster's host") == true)
        // After the roster's host left, unsigned keys are refused.
        net.feed(21, .participantLeft(userId: 1))
        net.feed(21, .message(rotation))
        #expect(net.warnings(21).last?.contains("no longer holds the key role") == true)
    }

    @Test func unknownTypesAndOtherCallsAreDroppedWithOneLine() throws {
        var net = try Network()
        let unknown = net.feed(21, .message(try SignalMessage(json: #"{"type":"party_time","callId":7}"#)))
        #expect(unknown == [.log(.notice, "dropped a signaling message of unknown type 'party_time'")])
        var other = SignalMessage(type: .keyRotation)
        other.callId = 8
        #expect(net.feed(21, .message(other)).count == 1)
        #expect(net.lastKey(21) == nil)
    }
}
