import ConclaveTestSupport
import JanusProtocol
import Testing

/// Messages as Janus 1.1.2 sent them to Conclave on the test bed (transactions and ids as captured).
enum RealJanus {
    static let createSuccess =
        #"{"janus":"success","transaction":"b82cbb2ecbe31d17e0211d48","data":{"id":7794596118321604}}"#
    static let attachSuccess =
        #"{"janus":"success","session_id":7794596118321604,"transaction":"9d0933414fdea22f0fce5ac5","data":{"id":2464845322473082}}"#
    static let roomCreated =
        #"{"janus":"success","session_id":7794596118321604,"transaction":"772bd7528a6925de48530187","sender":2464845322473082,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"created","room":5555,"permanent":false}}}"#
    static let ack = #"{"janus":"ack","session_id":7794596118321604,"transaction":"afeee3f84d1d77980b27be2b"}"#
    static let joined =
        #"{"janus":"event","session_id":7794596118321604,"transaction":"afeee3f84d1d77980b27be2b","sender":2464845322473082,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"joined","room":5555,"description":"Room 5555","id":728712613344473,"private_id":2140281118,"publishers":[]}}}"#
    static let participants =
        #"{"janus":"success","session_id":7794596118321604,"transaction":"0a47d14112f6a68e70ab01f8","sender":2464845322473082,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"participants","room":5555,"participants":[{"id":4951686904510440,"display":"1002:Bob","publisher":false},{"id":728712613344473,"display":"1001:Alice","publisher":false}]}}}"#
    static let leaving =
        #"{"janus":"event","session_id":7794596118321604,"sender":2464845322473082,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"leaving":4951686904510440}}}"#
    static let leftSelf =
        #"{"janus":"event","session_id":1458115199194145,"transaction":"13983b53c88211803bfeb782","sender":599682676592007,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"leaving":"ok"}}}"#
    static let alreadyJoined =
        #"{"janus":"event","session_id":7794596118321604,"transaction":"387e74316a4eca097d1e3a66","sender":2464845322473082,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","error_code":425,"error":"Already in as a publisher on this handle"}}}"#
    static let noSuchSession =
        #"{"janus":"error","session_id":4601680433657730,"transaction":"5d0a","error":{"code":458,"reason":"No such session 4601680433657730"}}"#
    // Shapes from the VideoRoom documentation (janus_videoroom.c), as Janus 1.1 sends them.
    static let publishers =
        #"{"janus":"event","session_id":1,"sender":2,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"publishers":[{"id":4951686904510440,"display":"1002:Bob","streams":[{"type":"audio","mindex":0,"mid":"0","codec":"opus"},{"type":"video","mindex":1,"mid":"1","codec":"vp8"}],"talking":false}]}}}"#
    static let attached =
        #"{"janus":"event","session_id":1,"transaction":"t","sender":3,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"attached","room":5555,"streams":[{"type":"audio","active":true,"mindex":0,"mid":"0","ready":false,"send":true,"feed_id":4951686904510440,"feed_display":"1002:Bob","feed_mid":"0","codec":"opus"},{"type":"video","active":true,"mindex":1,"mid":"1","ready":false,"send":true,"feed_id":4951686904510440,"feed_display":"1002:Bob","feed_mid":"1","codec":"vp8"}]}},"jsep":{"type":"offer","sdp":"v=0\r\n"}}"#
    static let webrtcup = #"{"janus":"webrtcup","session_id":1,"sender":3}"#
    static let media = #"{"janus":"media","session_id":1,"sender":3,"mid":"1","type":"video","receiving":true}"#
    static let slowlink =
        #"{"janus":"slowlink","session_id":1,"sender":3,"mid":"1","media":"video","uplink":false,"lost":12}"#
    static let hangup = #"{"janus":"hangup","session_id":1,"sender":3,"reason":"DTLS alert"}"#
    static let trickle =
        #"{"janus":"trickle","session_id":1,"sender":3,"candidate":{"sdpMid":"0","sdpMLineIndex":0,"candidate":"candidate:1 1 udp 2015363327 198.18.0.1 40000 typ host"}}"#
    static let timeout = #"{"janus":"timeout","session_id":4601680433657730}"#

    static let all =
        [
            createSuccess, attachSuccess, roomCreated, ack, joined, participants, leaving, leftSelf, alreadyJoined,
            noSuchSession, publishers, attached, webrtcup, media, slowlink, hangup, trickle, timeout,
        ] + SimulcastJanus.all
}

@Suite struct JanusMessageTests {
    @Test func readsRoutingFieldsOfRealReplies() throws {
        let created = try JanusMessage(text: RealJanus.createSuccess)
        #expect(created.kind == .success)
        #expect(created.transaction == "b82cbb2ecbe31d17e0211d48")
        #expect(created.createdID == 7_794_596_118_321_604)

        let ack = try JanusMessage(text: RealJanus.ack)
        #expect(ack.kind == .ack)
        #expect(ack.sender == nil, "Janus sends ack without a sender: it must be routed by transaction")
        #expect(ack.sessionID == 7_794_596_118_321_604)

        let joined = try JanusMessage(text: RealJanus.joined)
        #expect(joined.sender == 2_464_845_322_473_082)
        #expect(joined.plugin == VideoRoom.plugin)
    }

    @Test func coreErrorsAreTypedWithTheirMeaning() throws {
        let message = try JanusMessage(text: RealJanus.noSuchSession)
        let error = try #require(message.error)
        #expect(error.code == JanusError.sessionNotFound)
        #expect(error.meaning == "no such session")
        #expect(error.description == "no such session (Janus 458: No such session 4601680433657730)")
    }

    @Test func videoRoomEventsOfRealReplies() throws {
        let joined = try VideoRoom.events(from: #require(JanusMessage(text: RealJanus.joined).pluginData))
        #expect(
            joined == [.joined(.init(room: 5555, id: 728_712_613_344_473, privateID: 2_140_281_118, publishers: []))]
        )
        let leaving = try VideoRoom.events(from: #require(JanusMessage(text: RealJanus.leaving).pluginData))
        #expect(leaving == [.leaving(4_951_686_904_510_440)])
        let leftSelf = try VideoRoom.events(from: #require(JanusMessage(text: RealJanus.leftSelf).pluginData))
        #expect(leftSelf == [.leaving(nil)])
        let error = try VideoRoom.events(from: #require(JanusMessage(text: RealJanus.alreadyJoined).pluginData))
        #expect(error == [.error(JanusError(code: 425, reason: "Already in as a publisher on this handle"))])
        #expect(JanusError(code: 425, reason: "").meaning.contains("new handle"))
    }

    @Test func participantsAndPublishers() throws {
        let participants = try VideoRoom.participants(
            from: #require(JanusMessage(text: RealJanus.participants).pluginData)
        )
        #expect(participants.map(\.id) == [4_951_686_904_510_440, 728_712_613_344_473])
        #expect(participants.map { $0.display.map(ParticipantDisplay.init(parsing:))?.userID } == ["1002", "1001"])

        let events = try VideoRoom.events(from: #require(JanusMessage(text: RealJanus.publishers).pluginData))
        guard case .publishers(let publishers) = try #require(events.first) else {
            Issue.record("expected publishers, got \(events)")
            return
        }
        #expect(publishers.count == 1)
        #expect(publishers[0].streams.map(\.codec) == ["opus", "vp8"])
        #expect(publishers[0].streams.map(\.mid) == ["0", "1"])
    }

    @Test func subscriberAttachedCarriesStreamsAndOffer() throws {
        let message = try JanusMessage(text: RealJanus.attached)
        #expect(message.jsep?.type == .offer)
        let events = try VideoRoom.events(from: #require(message.pluginData))
        guard case .attached(let room, let streams) = try #require(events.first) else {
            Issue.record("expected attached, got \(events)")
            return
        }
        #expect(room == 5555)
        #expect(streams.map(\.feedID) == [4_951_686_904_510_440, 4_951_686_904_510_440])
        #expect(streams.map(\.type) == ["audio", "video"])
    }

    @Test func handleEventsOfCoreMessages() throws {
        #expect(HandleEvent(try JanusMessage(text: RealJanus.webrtcup)) == .webrtcUp)
        #expect(
            HandleEvent(try JanusMessage(text: RealJanus.media)) == .media(type: "video", mid: "1", receiving: true)
        )
        #expect(HandleEvent(try JanusMessage(text: RealJanus.slowlink)) == .slowLink(mid: "1", uplink: false, lost: 12))
        #expect(HandleEvent(try JanusMessage(text: RealJanus.hangup)) == .hangup(reason: "DTLS alert"))
        #expect(
            HandleEvent(try JanusMessage(text: RealJanus.trickle))
                == .trickle(
                    .candidate("candidate:1 1 udp 2015363327 198.18.0.1 40000 typ host", sdpMid: "0", sdpMLineIndex: 0)
                )
        )
        #expect(try JanusMessage(text: RealJanus.timeout).kind == .timeout)
    }

    @Test func requestsCarryTransactionIdsAndCredentials() throws {
        let request = JanusRequest.message(
            session: 7_794_596_118_321_604,
            handle: 2_464_845_322_473_082,
            body: VideoRoom.joinPublisher(room: 5555, display: "1001:Alice"),
            jsep: JSEP(type: .offer, sdp: "v=0\r\n", e2ee: true)
        )
        let json = request.json(transaction: "abc", apiSecret: "s3cret", token: nil)
        #expect(json["janus"] == "message")
        #expect(json["transaction"] == "abc")
        #expect(json["apisecret"] == "s3cret")
        #expect(json["session_id"]?.uint64Value == 7_794_596_118_321_604)
        #expect(json["handle_id"]?.uint64Value == 2_464_845_322_473_082)
        #expect(json["body"]?["ptype"] == "publisher")
        #expect(json["body"]?["room"]?.intValue == 5555)
        #expect(json["jsep"]?["e2ee"] == true)
        #expect(json["token"] == nil)

        // The text Janus receives parses back to the same value, ids exact.
        let text = json.serialized()
        #expect(try JSONValue.parse(text) == json)
        #expect(text.contains("7794596118321604"))
    }

    @Test func trickleCandidatesAndEndOfCandidates() {
        let one = JanusRequest.trickle(
            session: 1,
            handle: 2,
            candidate: .candidate("candidate:1 1 udp 1 198.18.0.2 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)
        )
        #expect(one.json(transaction: "t")["candidate"]?["sdpMid"] == "0")
        let done = JanusRequest.trickle(session: 1, handle: 2, candidate: .completed)
        #expect(done.json(transaction: "t")["candidate"] == ["completed": true])
    }

    @Test func roomOptionsBecomeTheCreateBody() {
        let body = VideoRoom.create(.init(room: 42, publishers: 3, videoCodecs: ["h264"], requireE2EE: true))
        #expect(body["request"] == "create")
        #expect(body["room"]?.intValue == 42)
        #expect(body["videocodec"] == "h264")
        #expect(body["audiocodec"] == "opus")
        #expect(body["require_e2ee"] == true)
        #expect(body["publishers"]?.intValue == 3)
    }

    @Test func subscriberJoinUsesMultistreamAPI() {
        let body = VideoRoom.joinSubscriber(room: 7, streams: [.init(feed: 10), .init(feed: 11, mid: "1")])
        #expect(body["ptype"] == "subscriber")
        #expect(body["use_msid"] == true)
        #expect(body["streams"] == [["feed": 10], ["feed": 11, "mid": "1"]])
    }

    @Test func displayConvention() {
        #expect(ParticipantDisplay(parsing: "42:Alice") == ParticipantDisplay(userID: "42", name: "Alice"))
        #expect(ParticipantDisplay(parsing: "42:Alice:Smith").name == "Alice:Smith")
        #expect(ParticipantDisplay(parsing: "Alice") == ParticipantDisplay(userID: nil, name: "Alice"))
        #expect(ParticipantDisplay(parsing: ":Alice").userID == nil)
        #expect(ParticipantDisplay(userID: "7", name: "Bo").description == "7:Bo")
    }

    @Test func aScreenShareHasAUserIDOfItsOwn() {
        let screen = ParticipantDisplay(parsing: "42:Alice").screenShare
        #expect(screen.description == "42-screen:Alice (screen)")
        #expect(ParticipantDisplay(parsing: screen.description) == screen)
        // ECall maps feeds to users by a numeric id: the screen's is not one.
        #expect(UInt64(screen.userID ?? "") == nil)
        #expect(ParticipantDisplay(parsing: "Alice").screenShare.description == "Alice (screen)")
    }

    @Test func malformedInputGivesTypedErrors() {
        #expect(throws: JanusProtocolError.self) { try JanusMessage(text: "not json") }
        #expect(throws: JanusProtocolError.missingField("janus", in: "message")) { try JanusMessage(text: "{}") }
        #expect(throws: JanusProtocolError.unknownKind("bogus")) { try JanusMessage(text: #"{"janus":"bogus"}"#) }
        #expect(throws: JanusProtocolError.self) { try JanusMessage(text: #"{"janus":"error"}"#) }
        #expect(throws: JanusProtocolError.self) { try JanusMessage(text: "[1,2]") }
        #expect(throws: JanusProtocolError.self) {
            try VideoRoom.events(from: ["videoroom": "joined", "room": 1])
        }
    }
}

@Suite struct JanusMessageFuzzTests {

    /// Parses `text` fully, as the client does: message, handle event, VideoRoom events.
    func parse(_ text: String) {
        do {
            let message = try JanusMessage(text: text)
            _ = HandleEvent(message)
            if let data = message.pluginData {
                _ = try? VideoRoom.events(from: data)
                _ = try? VideoRoom.rooms(from: data)
                _ = try? VideoRoom.participants(from: data)
            }
        } catch {
            // The parsers use typed throws, so the compiler already guarantees the failure is a
            // JanusProtocolError; what this loop checks is that nothing traps or hangs.
            _ = error.description
        }
    }

    @Test func randomBytesNeverCrash() {
        var random = SeededGenerator(seed: 1)
        for _ in 0..<3000 {
            let length = Int.random(in: 0..<200, using: &random)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            parse(String(decoding: bytes, as: UTF8.self))
        }
    }

    @Test func mutatedRealMessagesNeverCrash() {
        var random = SeededGenerator(seed: 2)
        let alphabet = Array(#"{}[]":,0123456789.-eE truefalsnul\"#.utf8)
        for _ in 0..<5000 {
            var bytes = Array(RealJanus.all.randomElement(using: &random)!.utf8)
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                guard !bytes.isEmpty else { break }
                let index = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[index] = alphabet.randomElement(using: &random)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet.randomElement(using: &random)!, at: index)
                }
            }
            parse(String(decoding: bytes, as: UTF8.self))
        }
    }
}
