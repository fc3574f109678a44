import ConclaveE2EE
import ECallSignaling
import Foundation
import Testing

@Suite struct CallInvitationMessageTests {
    static let now = Date(timeIntervalSince1970: 1_763_942_400)

    static func party() throws -> (ann: DeviceIdentity, bo: DeviceIdentity, roster: [RosterEntry]) {
        let ann = try DeviceIdentity.generate(.p256)
        let bo = try DeviceIdentity.generate(.rsa)
        let roster = [
            RosterEntry(userId: 5, deviceId: 51, displayName: "Ann", publicKey: ann.publicKeyString, isHost: true),
            RosterEntry(userId: 6, deviceId: 61, displayName: "Bo", publicKey: bo.publicKeyString),
        ]
        return (ann, bo, roster)
    }

    @Test func aSignedInvitationOpensForItsRecipientWithTheRoster() throws {
        let (ann, bo, roster) = try Self.party()
        let key = CallKey.random()
        let message = try SignalMessage.callInvitation(
            callId: 9_007_199_254_740_993,
            roomId: 1234,
            caller: roster[0],
            recipient: roster[1],
            roster: roster,
            key: key,
            janusUrl: "ws://127.0.0.1:8188",
            crypto: .sframe,
            isVideo: true,
            signedBy: ann,
            at: Self.now
        )
        let body = message.jsonBody()
        #expect(body.contains("\"callerId\":5") && body.contains("\"callId\":9007199254740993"))
        let received = try SignalMessage(json: body).openInvitation(
            as: DeviceAddress(userId: 6, deviceId: 61),
            with: bo,
            now: Self.now.addingTimeInterval(3)
        )
        #expect(received.key == key && received.roster == roster && received.crypto == .sframe)
        #expect(received.caller.displayName == "Ann" && !received.unsigned && received.roomId == 1234)
    }

    @Test func forgedMisaddressedAndUnsignedInvitationsAreRefused() throws {
        let (ann, bo, roster) = try Self.party()
        let signed = try SignalMessage.callInvitation(
            callId: 7,
            roomId: 1,
            caller: roster[0],
            recipient: roster[1],
            roster: roster,
            key: .random(),
            janusUrl: nil,
            crypto: .ecall,
            isVideo: false,
            signedBy: ann,
            at: Self.now
        )
        let bob = DeviceAddress(userId: 6, deviceId: 61)
        // A roster with the attacker's key in place of Bo's is a changed field.
        var swapped = signed
        swapped.roster?[1].publicKey = try DeviceIdentity.generate(.p256).publicKeyString
        #expect(throws: InvitationMessageError.signature(.invalid)) {
            try swapped.openInvitation(as: bob, with: bo, now: Self.now)
        }
        #expect(throws: InvitationMessageError.otherDevice) {
            try signed.openInvitation(as: DeviceAddress(userId: 6, deviceId: 62), with: bo, now: Self.now)
        }
        var unsigned = signed
        unsigned.signature = nil
        #expect(throws: InvitationMessageError.signature(.unsigned)) {
            try unsigned.openInvitation(as: bob, with: bo, now: Self.now)
        }
        // ECall's own invitation (no roster, no signature) in ECall-compatible mode.
        var ecall = unsigned
        ecall.roster = nil
        let received = try ecall.openInvitation(as: bob, with: bo, now: Self.now, acceptUnsigned: true)
        #expect(received.unsigned && received.roster.isEmpty && received.caller.userId == 5)
        var stranger = signed
        stranger.callerDeviceId = 99
        #expect(throws: InvitationMessageError.callerNotInRoster) {
            try stranger.openInvitation(as: bob, with: bo, now: Self.now)
        }
    }
}
