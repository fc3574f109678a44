import ConclaveE2EE
import ConclaveTestSupport
import ECallSignaling
import Foundation
import Testing

@Suite struct SignalMessageTests {
    /// One message of every type in ECall's table (interop spec §4.3), shaped as ECall sends it.
    static let ecallVectors: [(String, SignalMessageType)] = [
        (
            #"{"type":"call_invitation","callerId":5,"callerDeviceId":51,"callerName":"Ann","encryptedAESKey":"k","callId":9007199254740993,"roomId":1234,"isVideo":true,"isOnGoing":false}"#,
            .callInvitation
        ),
        (#"{"type":"call_ended","callId":7}"#, .callEnded),
        (#"{"type":"call_cancelled","callId":7}"#, .callCancelled),
        (#"{"type":"participant_joined","participantId":3,"participantName":"Bo"}"#, .participantJoined),
        (#"{"type":"participant_left","participantId":3,"participantName":"Bo"}"#, .participantLeft),
        (#"{"type":"participant_invited","participantId":3,"participantName":"Bo"}"#, .participantInvited),
        (#"{"type":"participant_rejected","participantId":3,"participantName":"Bo"}"#, .participantRejected),
        (
            #"{"type":"participant_feedId_updated","participantId":3,"participantName":"Bo"}"#,
            .participantFeedIdUpdated
        ),
        (
            #"{"type":"participant_updated","participantId":3,"status":"connected","feedId":77,"isMuted":true,"isVideoEnabled":false}"#,
            .participantUpdated
        ),
        (#"{"type":"handover_host","participantId":4,"callId":7}"#, .handoverHost),
        (
            #"{"type":"participant_request_rejoin","callId":7,"participantId":3,"calleeDeviceId":31}"#,
            .participantRequestRejoin
        ),
        (
            #"{"type":"participant_accept_rejoin","callId":7,"participantId":3,"calleeDeviceId":31,"encryptedAESKey":"k"}"#,
            .participantAcceptRejoin
        ),
        (
            #"{"type":"key_rotation","callId":7,"participantId":3,"participantDeviceId":31,"participantName":"Bo","encryptedAESKey":"k","keyRotationTimestamp":1763942400.25}"#,
            .keyRotation
        ),
        (
            #"{"type":"request_aes_key","participantId":1,"participantDeviceId":11,"callId":7,"senderId":3,"senderDeviceId":31}"#,
            .requestAESKey
        ),
        (
            #"{"type":"send_aes_key","encryptedAESKey":"k","participantId":3,"participantDeviceId":31,"callId":7}"#,
            .sendAESKey
        ),
    ]

    @Test func everyECallTypeDecodes() throws {
        #expect(Self.ecallVectors.count == SignalMessageType.allKnown.count)
        for (json, type) in Self.ecallVectors {
            let message = try SignalMessage(json: json)
            #expect(message.type == type, "\(json)")
            #expect(message.callId != nil || message.participantId != nil)
        }
        let invitation = try SignalMessage(json: Self.ecallVectors[0].0)
        #expect(invitation.callId == 9_007_199_254_740_993 && invitation.callerId == 5)
        #expect(invitation.isVideo == true && invitation.callerName == "Ann")
        let rotation = try SignalMessage(json: Self.ecallVectors[12].0)
        #expect(rotation.keyRotationTimestamp == 1_763_942_400.25 && rotation.participantDeviceId == 31)
        let updated = try SignalMessage(json: Self.ecallVectors[8].0)
        #expect(updated.status == .connected && updated.feedId == 77 && updated.isMuted == true)
    }

    @Test func encodeWritesNumbersLeavesOutNilsAndRoundTrips() throws {
        var message = SignalMessage(type: .callInvitation)
        message.callId = 9_007_199_254_740_993
        message.callerId = 5
        message.callerDeviceId = 51
        message.callerName = "Ann \"A\" Ünal"
        message.encryptedAESKey = "abc:def"
        message.isVideo = true
        message.janusUrl = "ws://127.0.0.1:8188/"
        message.crypto = .sframe
        message.roster = [
            RosterEntry(userId: 5, deviceId: 51, displayName: "Ann", publicKey: "pk1", isHost: true),
            RosterEntry(userId: 6, deviceId: 61, displayName: "Bo", publicKey: "pk2"),
        ]
        message.epoch = 3
        message.keyRotationTimestamp = 1_763_942_400.123456
        message.status = .other("ringing")
        message.candidate = .init(candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host", sdpMid: "0", sdpMLineIndex: 0)
        let body = message.jsonBody()
        #expect(body.contains("\"callId\":9007199254740993"))
        #expect(body.contains("\"callerId\":5"))
        #expect(body.contains("\"type\":\"call_invitation\""))
        #expect(!body.contains("participantId") && !body.contains("null"))
        #expect(try SignalMessage(json: body) == message)
        for type in SignalMessageType.allKnown + [.unknown("future_thing")] {
            #expect(try SignalMessage(json: SignalMessage(type: type).jsonBody()).type == type)
        }
    }

    @Test func idsAlsoReadFromDigitStringsAndUnknownsAreKept() throws {
        let message = try SignalMessage(
            json: #"{"type":"brand_new","callId":"18446744073709551615","senderId":2,"extra":{"a":[1]},"x":null}"#
        )
        #expect(message.type == .unknown("brand_new"))
        #expect(message.callId == UInt64.max && message.senderId == 2)
    }

    @Test func wrongTypedFieldsNameTheField() {
        let cases: [(String, SignalMessageError)] = [
            ("[]", .notJSON),
            ("not json", .notJSON),
            (#"{"callId":1}"#, .missingType),
            (#"{"type":5}"#, .missingType),
            (#"{"type":"call_ended","callId":-1}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","callId":1.5}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","callId":"12a"}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","callId":"+12"}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","callId":true}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","callId":"99999999999999999999"}"#, .wrongType(field: "callId", expected: "")),
            (#"{"type":"call_ended","isVideo":"yes"}"#, .wrongType(field: "isVideo", expected: "")),
            (#"{"type":"call_ended","encryptedAESKey":3}"#, .wrongType(field: "encryptedAESKey", expected: "")),
            (
                #"{"type":"key_rotation","keyRotationTimestamp":"soon"}"#,
                .wrongType(field: "keyRotationTimestamp", expected: "")
            ),
            (#"{"type":"call_invitation","crypto":"rot13"}"#, .wrongType(field: "crypto", expected: "")),
            (#"{"type":"call_invitation","roster":{}}"#, .wrongType(field: "roster", expected: "")),
            (
                #"{"type":"call_invitation","roster":[{"userId":"x","deviceId":1,"publicKey":"k"}]}"#,
                .wrongType(field: "roster.userId", expected: "")
            ),
            (
                #"{"type":"call_invitation","roster":[{"userId":1,"deviceId":1}]}"#,
                .wrongType(field: "roster.publicKey", expected: "")
            ),
            (#"{"type":"participant_updated","status":1}"#, .wrongType(field: "status", expected: "")),
            (#"{"type":"participant_updated","candidate":"c"}"#, .wrongType(field: "candidate", expected: "")),
        ]
        for (json, expected) in cases {
            do {
                _ = try SignalMessage(json: json)
                Issue.record("decoded \(json)")
            } catch {
                switch (error, expected) {
                case (.wrongType(let field, _), .wrongType(let wanted, _)):
                    #expect(field == wanted, "\(json): \(error)")
                    #expect(error.description.contains("'\(wanted)'"))
                default:
                    #expect(error == expected, "\(json): \(error)")
                }
                #expect(!error.description.contains("\n"))
            }
        }
    }

    @Test func mutatedMessagesNeverTrap() throws {
        var random = SeededGenerator(seed: 0x5167_4A1E)
        let seeds = Self.ecallVectors.map { Array($0.0.utf8) }
        var decoded = 0
        for iteration in 0..<4000 {
            var bytes: [UInt8]
            if iteration % 4 == 0 {
                bytes = random.bytes(Int.random(in: 0...120, using: &random))
            } else {
                bytes = seeds[Int.random(in: 0..<seeds.count, using: &random)]
                for _ in 0..<Int.random(in: 1...6, using: &random) where !bytes.isEmpty {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                    case 1: bytes.remove(at: index)
                    case 2: bytes.insert(Array(#"0123456789"-.e{}[]:,"#.utf8).randomElement(using: &random)!, at: index)
                    default: bytes.insert(UInt8.random(in: 32...126, using: &random), at: index)
                    }
                }
            }
            do {
                let message = try SignalMessage(json: String(decoding: bytes, as: UTF8.self))
                decoded += 1
                _ = message.signingBytes
                #expect(try SignalMessage(json: message.jsonBody()) == message)
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
        #expect(decoded > 100, "many mutations stay valid messages")
    }
}
