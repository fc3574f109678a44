import ConclaveE2EE
import ECallSignaling
import Foundation
import Testing

@Suite struct MessageSignatureTests {
    static let now = Date(timeIntervalSince1970: 1_763_942_400)

    static func rotation() -> SignalMessage {
        var message = SignalMessage(type: .keyRotation)
        message.callId = 7
        message.senderId = 1
        message.senderDeviceId = 11
        message.participantId = 3
        message.participantDeviceId = 31
        message.participantName = "Bo"
        message.encryptedAESKey = "wrapped-key"
        message.keyRotationTimestamp = now.timeIntervalSince1970 + 10
        message.epoch = 4
        return message
    }

    @Test(arguments: DeviceKeyType.allCases)
    func aSignedMessageVerifiesAfterTheWire(type: DeviceKeyType) throws {
        let host = try DeviceIdentity.generate(type)
        let signed = try Self.rotation().signed(by: host, at: Self.now)
        let received = try SignalMessage(json: signed.jsonBody())
        try received.verifySignature(publicKey: host.publicKeyString, now: Self.now.addingTimeInterval(2))
    }

    @Test(arguments: DeviceKeyType.allCases)
    func anyChangedFieldIsRejected(type: DeviceKeyType) throws {
        let host = try DeviceIdentity.generate(type)
        let signed = try Self.rotation().signed(by: host, at: Self.now)
        let changes: [(String, (inout SignalMessage) -> Void)] = [
            ("type", { $0.type = .sendAESKey }),
            ("callId", { $0.callId = 8 }),
            ("senderId", { $0.senderId = 2 }),
            ("senderDeviceId", { $0.senderDeviceId = 12 }),
            ("participantId", { $0.participantId = 4 }),
            ("participantDeviceId", { $0.participantDeviceId = 32 }),
            ("calleeDeviceId", { $0.calleeDeviceId = 31 }),
            ("encryptedAESKey", { $0.encryptedAESKey = "wrapped-kez" }),
            ("keyRotationTimestamp", { $0.keyRotationTimestamp = ($0.keyRotationTimestamp ?? 0) + 0.001 }),
            ("epoch", { $0.epoch = 5 }),
            ("sentAt", { $0.sentAt = ($0.sentAt ?? 0) - 1 }),
            ("roster", { $0.roster = [] }),
            ("janusUrl", { $0.janusUrl = "ws://127.0.0.1:1/" }),
        ]
        for (name, change) in changes {
            var forged = signed
            change(&forged)
            #expect(throws: SignatureError.invalid, "\(name)") {
                try forged.verifySignature(publicKey: host.publicKeyString, now: Self.now)
            }
        }
    }

    @Test func anotherDevicesKeyIsRejected() throws {
        let host = try DeviceIdentity.generate(.p256)
        let stranger = try DeviceIdentity.generate(.p256)
        let strangerRSA = try DeviceIdentity.generate(.rsa)
        let signedByStranger = try Self.rotation().signed(by: stranger, at: Self.now)
        #expect(throws: SignatureError.invalid) {
            try signedByStranger.verifySignature(publicKey: host.publicKeyString, now: Self.now)
        }
        let signedByHost = try Self.rotation().signed(by: host, at: Self.now)
        #expect(throws: SignatureError.invalid) {
            try signedByHost.verifySignature(publicKey: strangerRSA.publicKeyString, now: Self.now)
        }
    }

    @Test func replaysOutsideTheWindowAndUnsignedMessagesAreRejected() throws {
        let host = try DeviceIdentity.generate(.p256)
        let signed = try Self.rotation().signed(by: host, at: Self.now)
        for offset in [-61.0, 61, 3600] {
            #expect {
                try signed.verifySignature(publicKey: host.publicKeyString, now: Self.now.addingTimeInterval(offset))
            } throws: { error in
                guard case .outsideWindow = error as? SignatureError else { return false }
                return true
            }
        }
        try signed.verifySignature(publicKey: host.publicKeyString, now: Self.now.addingTimeInterval(-59))
        #expect(throws: SignatureError.unsigned) {
            try Self.rotation().verifySignature(publicKey: host.publicKeyString, now: Self.now)
        }
        var garbled = signed
        garbled.signature = "***"
        #expect(throws: SignatureError.malformed("not base64")) {
            try garbled.verifySignature(publicKey: host.publicKeyString, now: Self.now)
        }
        garbled.signature = "AAAA"
        #expect(throws: SignatureError.invalid) {
            try garbled.verifySignature(publicKey: host.publicKeyString, now: Self.now)
        }
    }
}
