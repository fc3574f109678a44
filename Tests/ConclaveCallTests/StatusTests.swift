import ConclaveCore
import ConclaveE2EE
import Foundation
import Testing

@testable import ConclaveCall

@Suite struct StatusTests {

    @Test func aParticipantWhoRejoinsWithANewFeedKeepsOneRowAndItsCounters() {
        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 10, display: "42:Bob")
        tracker.frameArrived(feedID: 10, codec: .h264, bytes: 100)
        tracker.frameArrived(feedID: 10, codec: .opus, bytes: 100)
        tracker.participantLeft(feedID: 10)
        tracker.participantJoined(feedID: 11, display: "42:Bob (phone)")
        tracker.frameArrived(feedID: 11, codec: .h264, bytes: 100)
        tracker.received(.undecryptable(feedID: 11, mid: "1", codec: .h264, reason: .authenticationFailed))

        let status = Self.status(tracker)
        #expect(status.participants.count == 1)
        let bob = try! #require(status.participants.first)
        #expect(bob.id == "42" && bob.feeds == [10, 11] && bob.feed == 11 && bob.present)
        #expect(bob.framesDecrypted == 3 && bob.videoFrames == 2 && bob.audioFrames == 1)
        #expect(bob.undecryptable == 1)
        #expect(bob.decryptState == .partlyFailing)
        #expect(bob.audioCodec == "opus" && bob.videoCodec == "h264")
    }

    /// Frames are counted on the receive thread, so a new feed's first frames can arrive before
    /// the room announces it: they belong to the participant it then turns out to be.
    @Test func framesBeforeTheAnnouncementCountForTheParticipant() throws {
        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 10, display: "42:Bob")
        tracker.participantLeft(feedID: 10)
        tracker.frameArrived(feedID: 11, codec: .vp8, bytes: 100)
        tracker.frameArrived(feedID: 11, codec: .opus, bytes: 50)
        tracker.participantJoined(feedID: 11, display: "42:Bob")
        tracker.frameArrived(feedID: 11, codec: .vp8, bytes: 100)

        let status = Self.status(tracker)
        #expect(status.participants.map(\.id) == ["42"])
        let bob = try #require(status.participants.first)
        #expect(bob.feeds == [10, 11] && bob.present)
        #expect(bob.videoFrames == 2 && bob.audioFrames == 1)
        #expect(bob.audioCodec == "opus" && bob.videoCodec == "vp8")
    }

    @Test func participantsWithoutAUserIDAreKeptApart() {
        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 1, display: "Alice")
        tracker.participantJoined(feedID: 2, display: nil)
        tracker.frameArrived(feedID: 2, codec: .vp8, bytes: 100)
        let status = Self.status(tracker)
        #expect(status.participants.map(\.id) == ["Alice", "feed:2"])
        #expect(status.participants[0].decryptState == .waiting)
    }

    @Test func recoveryRecordsWhenMediaResumed() throws {
        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 1, display: "1:A")
        tracker.recoveryStarted(.claim)
        #expect(tracker.recoveryInProgress)
        tracker.frameArrived(feedID: 1, codec: .opus, bytes: 100)
        tracker.recoveryFinished(as: .newSession)
        #expect(!tracker.recoveryInProgress)
        var recovery = try #require(Self.status(tracker).recoveries.first)
        #expect(recovery.kind == .newSession && recovery.mediaResumedMs == nil, "frames before recovery do not count")
        tracker.frameArrived(feedID: 1, codec: .opus, bytes: 100)
        recovery = try #require(Self.status(tracker).recoveries.first)
        #expect(recovery.mediaResumedMs != nil)
        #expect(recovery.mediaResumedMs! >= recovery.recoveredMs!)
    }

    @Test func theJSONLineIsOneLineWithTheFieldsScriptsRead() throws {
        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 5, display: "7:Carol")
        tracker.frameArrived(feedID: 5, codec: .h264, bytes: 1000)
        let line = Self.status(tracker).jsonLine()
        #expect(!line.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let participants = try #require(object["participants"] as? [[String: Any]])
        #expect(participants.first?["framesDecrypted"] as? Int == 1)
        #expect(participants.first?["undecryptable"] as? Int == 0)
        #expect(object["state"] as? String == "live")
        #expect(Self.status(tracker).terminalText().contains("7:Carol"))
    }

    /// Scripts read `--status json` by these strings: the enums must write exactly what the
    /// String fields wrote before them, and read them back.
    @Test func theStateEnumsWriteTheStringsScriptsRead() throws {
        let phases: [CallSession.Phase: String] = [
            .idle: "idle", .connecting: "connecting", .live: "live", .recovering: "recovering", .leaving: "leaving",
            .left: "left",
        ]
        let janus: [JanusConnectionStatus: String] = [
            .connected: "connected", .reconnecting: "reconnecting", .closed: "closed",
        ]
        let kinds: [RecoveryKind: String] = [
            .claim: "claim", .newSession: "new-session", .iceRestart: "ice-restart", .media: "media",
            .mediaRejoin: "media-rejoin",
        ]
        let decrypt: [DecryptState: String] = [
            .ok: "ok", .partlyFailing: "partly failing", .failing: "failing", .waiting: "waiting",
        ]
        func json(_ value: some Encodable) throws -> String {
            String(decoding: try JSONEncoder().encode([value]), as: UTF8.self)
        }
        for (value, text) in phases { #expect(try json(value) == "[\"\(text)\"]") }
        for (value, text) in janus { #expect(try json(value) == "[\"\(text)\"]") }
        for (value, text) in kinds { #expect(try json(value) == "[\"\(text)\"]") }
        for (value, text) in decrypt { #expect(try json(value) == "[\"\(text)\"]") }

        let tracker = CallStatusTracker()
        tracker.participantJoined(feedID: 4, display: "4:Dan")
        tracker.recoveryStarted(.iceRestart)
        var status = Self.status(tracker)
        status.state = .recovering
        status.janus = .reconnecting
        let line = status.jsonLine()
        for field in [
            #""state":"recovering""#, #""janus":"reconnecting""#, #""kind":"ice-restart""#,
            #""decryptState":"waiting""#,
        ] {
            #expect(line.contains(field), "\(line)")
        }
        #expect(try JSONDecoder().decode(CallStatus.self, from: Data(line.utf8)) == status)
    }

    static func status(_ tracker: CallStatusTracker) -> CallStatus {
        let snapshot = tracker.snapshot(loss: [:])
        return CallStatus(
            elapsedMs: 0,
            startedAtUnixMs: 0,
            callId: "1",
            room: "2",
            display: "9:Me",
            state: .live,
            janus: .connected,
            feed: 3,
            framesSent: 0,
            encryptionFailures: 0,
            recording: snapshot.recording,
            participants: snapshot.participants,
            recoveries: snapshot.recoveries
        )
    }
}
