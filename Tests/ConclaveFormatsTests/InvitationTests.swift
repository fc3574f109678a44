import ConclaveE2EE
import ConclaveFormats
import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct InvitationTests {
    static func sample(for identity: DeviceIdentity, key: CallKey) throws -> CallInvitation {
        CallInvitation(
            callID: 9_007_199_254_740_993,  // 2^53 + 1: lost by parsers that read numbers as doubles
            roomID: 1234,
            encryptedAESKey: try KeyWrapping.wrap(key, for: identity.publicKey),
            callerID: 17,
            callerName: "Alice \"A\" Ünal",
            janusURL: "ws://127.0.0.1:8188",
            crypto: .sframe,
            recipient: .init(display: "42:Bob", publicKeyHash: identity.publicKey.publicKeyHash)
        )
    }

    @Test func writtenInvitationsReadBackAndOpenWithTheRecipientsKey() throws {
        let identity = try DeviceIdentity.generate(.p256)
        let key = CallKey.random()
        let invitation = try Self.sample(for: identity, key: key)
        let text = invitation.jsonText()
        #expect(text.contains("\"callId\": 9007199254740993"), "ids are JSON numbers, as ECall writes them")
        #expect(text.contains("\"callerId\": 17,"), "the caller's id too")
        let read = try CallInvitation(json: text, path: "test.json")
        #expect(read == invitation)
        #expect(try read.openKey(with: identity, path: "test.json") == key)
    }

    @Test func invitationsFromOtherToolsNeedOnlyECallsFields() throws {
        let identity = try DeviceIdentity.generate(.rsa)
        let key = CallKey.random()
        let wrapped = try KeyWrapping.wrap(key, for: identity.publicKey)
        let text = """
            {"callId": "77", "roomId": 5, "encryptedAESKey": "\(wrapped)", "callerId": "1", "callerName": "X", "isVideo": false}
            """
        let invitation = try CallInvitation(json: text, path: "other.json")
        #expect(invitation.callID == 77 && invitation.roomID == 5 && !invitation.isVideo)
        #expect(invitation.janusURL == nil && invitation.crypto == nil && invitation.recipient == nil)
        #expect(try invitation.openKey(with: identity, path: "other.json") == key)
    }

    @Test func anInvitationForAnotherDeviceIsRefusedBeforeAnyKeyIsTried() throws {
        let bob = try DeviceIdentity.generate(.p256)
        let carol = try DeviceIdentity.generate(.p256)
        let invitation = try Self.sample(for: bob, key: .random())
        #expect {
            _ = try invitation.openKey(with: carol, path: "bob.json")
        } throws: { error in
            guard case .otherDevice(let path, _, _) = error as? InvitationError else { return false }
            return path == "bob.json"
        }
        // Without the recipient hint the wrapped key itself does not open.
        var anonymous = invitation
        anonymous.recipient = nil
        #expect {
            _ = try anonymous.openKey(with: carol, path: "bob.json")
        } throws: { error in
            guard case .keyDoesNotOpen = error as? InvitationError else { return false }
            return "\(error)".contains("bob.json")
        }
    }

    @Test func aCorruptKeyIsAClearErrorWithoutKeyBytes() throws {
        let bob = try DeviceIdentity.generate(.rsa)
        var invitation = try Self.sample(for: bob, key: .random())
        var characters = Array(invitation.encryptedAESKey)
        characters[10] = characters[10] == "A" ? "B" : "A"
        invitation.encryptedAESKey = String(characters)
        #expect {
            _ = try invitation.openKey(with: bob, path: "bad.json")
        } throws: { error in
            guard case .keyDoesNotOpen = error as? InvitationError else { return false }
            return !"\(error)".contains(invitation.encryptedAESKey)
        }
    }

    @Test func badFieldsNameTheField() throws {
        let cases: [(String, String)] = [
            ("[]", "not a JSON object"),
            ("{\"roomId\": 1, \"encryptedAESKey\": \"k\"}", "'callId'"),
            ("{\"callId\": -1, \"roomId\": 1, \"encryptedAESKey\": \"k\"}", "'callId'"),
            ("{\"callId\": 1, \"roomId\": \"x\", \"encryptedAESKey\": \"k\"}", "'roomId'"),
            ("{\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": \"\"}", "'encryptedAESKey'"),
            ("{\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": \"k\", \"crypto\": \"rot13\"}", "'crypto'"),
            ("{\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": \"k\", \"janusUrl\": \"http://x\"}", "'janusUrl'"),
            ("{\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": \"k\", \"isVideo\": 1}", "'isVideo'"),
        ]
        for (text, expected) in cases {
            #expect(throws: InvitationError.self) { try CallInvitation(json: text, path: "f.json") }
            do {
                _ = try CallInvitation(json: text, path: "f.json")
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error)")
            }
        }
    }

    @Test func wrongTypesNameTheField() throws {
        let base = "\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": \"k\""
        let cases: [(String, String)] = [
            (
                "{\(base), \"callerId\": true}",
                "invitation f.json: field 'callerId' must be a non-negative integer (number or decimal string) or a user name"
            ),
            ("{\(base), \"callerId\": -5}", "invitation f.json: field 'callerId' must be a non-negative integer"),
            (
                "{\(base), \"callerId\": \"99999999999999999999\"}",
                "invitation f.json: field 'callerId' must be an id below 2^64"
            ),
            ("{\(base), \"callerName\": \"\"}", "invitation f.json: field 'callerName' must be a non-empty string"),
            ("{\(base), \"isVideo\": \"yes\"}", "invitation f.json: field 'isVideo' must be true or false"),
            ("{\(base), \"recipient\": \"42:Bob\"}", "invitation f.json: field 'recipient' must be an object"),
            (
                "{\(base), \"recipient\": {\"display\": 42}}",
                "invitation f.json: field 'recipient.display' must be a string"
            ),
            (
                "{\"callId\": 1.5, \"roomId\": 1, \"encryptedAESKey\": \"k\"}",
                "field 'callId' must be a non-negative integer"
            ),
            (
                "{\"callId\": true, \"roomId\": 1, \"encryptedAESKey\": \"k\"}",
                "field 'callId' must be a non-negative integer"
            ),
            (
                "{\"callId\": 1, \"roomId\": 1, \"encryptedAESKey\": 3}",
                "field 'encryptedAESKey' must be a non-empty string"
            ),
        ]
        for (text, expected) in cases {
            do {
                _ = try CallInvitation(json: text, path: "f.json")
                Issue.record("read \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error)")
                #expect(!error.description.contains("\n"), "one line: \(error)")
            }
        }
    }

    @Test func ecallsNumericCallerIdIsRead() throws {
        // ECall's ids are JSON numbers; this was refused as "must be a non-empty string".
        let text = """
            {"callId": 7, "roomId": 5, "encryptedAESKey": "k", "callerId": 5, "callerName": "Ann", "callerDeviceId": 51}
            """
        let invitation = try CallInvitation(json: text, path: "ecall.json")
        #expect(invitation.callerID == 5 && invitation.callerName == "Ann")
        let decimal = try CallInvitation(
            json: #"{"callId": 7, "roomId": 5, "encryptedAESKey": "k", "callerId": "18446744073709551615"}"#,
            path: "f.json"
        )
        #expect(decimal.callerID == UInt64.max)
        #expect(decimal.jsonText().contains("\"callerId\": 18446744073709551615,"))
    }

    @Test func olderInvitationsWithAUserNameAsCallerIdStillRead() throws {
        let named = try CallInvitation(
            json: #"{"callId": 7, "roomId": 5, "encryptedAESKey": "k", "callerId": "alice"}"#,
            path: "old.json"
        )
        #expect(named.callerID == nil && named.callerName == "alice")
        let both = try CallInvitation(
            json: #"{"callId": 7, "roomId": 5, "encryptedAESKey": "k", "callerId": "alice", "callerName": "Alice A"}"#,
            path: "old.json"
        )
        #expect(both.callerID == nil && both.callerName == "Alice A")
        let old = try CallInvitation(
            json: #"{"callId": 7, "roomId": 5, "encryptedAESKey": "k", "callerId": "", "callerName": "Alice"}"#,
            path: "old.json"
        )
        #expect(old.callerID == nil && old.callerName == "Alice")
        // Written again, the id is left out rather than invented, and the name stays.
        let rewritten = named.jsonText()
        #expect(!rewritten.contains("callerId") && rewritten.contains("\"callerName\": \"alice\""))
        #expect(try CallInvitation(json: rewritten, path: "new.json") == named)
    }

    @Test func unknownKeysAndNullsAreIgnored() throws {
        let text = """
            {"callId": 1, "roomId": "2", "encryptedAESKey": "k", "callerName": null, "isVideo": null,
             "janusUrl": null, "crypto": null, "recipient": {"display": null, "deviceName": "x"}, "ecallVersion": 3}
            """
        let invitation = try CallInvitation(json: text, path: "f.json")
        #expect(invitation.callID == 1 && invitation.roomID == 2)
        #expect(invitation.callerName == "" && invitation.isVideo && invitation.janusURL == nil)
        #expect(invitation.crypto == nil)
        #expect(invitation.recipient == CallInvitation.Recipient(display: nil, publicKeyHash: nil))
        for text in ["", "{", "\"text\"", "null"] {
            #expect(throws: InvitationError.notJSON(path: "f.json")) { try CallInvitation(json: text, path: "f.json") }
        }
    }

    @Test func randomAndMutatedInvitationsNeverCrash() throws {
        let identity = try DeviceIdentity.generate(.p256)
        let valid = Array(try Self.sample(for: identity, key: .random()).jsonText().utf8)
        var random = SeededGenerator(seed: 0x1A71_7A71)
        var parsed = 0
        for iteration in 0..<3000 {
            var bytes: [UInt8]
            if iteration % 3 == 0 {
                bytes = random.bytes(Int.random(in: 0...200, using: &random))
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...6, using: &random) {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(UInt8.random(in: 32...126, using: &random), at: index)
                    }
                    if bytes.isEmpty { break }
                }
            }
            do {
                let invitation = try CallInvitation(json: String(decoding: bytes, as: UTF8.self), path: "fuzz")
                parsed += 1
                _ = try? invitation.openKey(with: identity, path: "fuzz")
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
        #expect(parsed > 0, "some mutations keep the invitation valid")
    }

    /// A FIFO would block a plain read until a writer came; a folder gave a framework error code.
    @Test(arguments: SpecialFile.allCases)
    func anInvitationThatIsNotARegularFileIsRefusedAtOnce(kind: SpecialFile) throws {
        let directory = try TestPaths.temporaryDirectory("conclave-invitation")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("invitation.json").path
        try kind.make(path)
        let start = ContinuousClock.now
        do {
            _ = try CallInvitation.read(from: path)
            Issue.record("read a \(kind)")
        } catch {
            #expect(error.description.contains("refusing \(path): it is a \(kind.word), not a regular file"))
            #expect(!error.description.contains("NSCocoaErrorDomain"))
        }
        #expect(ContinuousClock.now - start < .seconds(2))
    }

}
