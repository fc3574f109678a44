import JanusProtocol
import Testing

/// Simulcast messages of the VideoRoom, in the shapes janus_videoroom.c (1.1.2) builds them.
enum SimulcastJanus {
    /// A substream switch on the subscriber's m-line "1" (sent after the keyframe that switched).
    static let substreamSwitched =
        #"{"janus":"event","session_id":1,"sender":3,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"mid":"1","substream":2}}}"#
    static let temporalSwitched =
        #"{"janus":"event","session_id":1,"sender":3,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"mid":"1","temporal":1}}}"#
    static let configured =
        #"{"janus":"event","session_id":1,"transaction":"t","sender":3,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"event","room":5555,"configured":"ok"}}}"#
    /// The streams summary of `attached` for a simulcast publisher (substream -1: nothing yet).
    static let attached =
        #"{"janus":"event","session_id":1,"transaction":"t","sender":3,"plugindata":{"plugin":"janus.plugin.videoroom","data":{"videoroom":"attached","room":5555,"streams":[{"type":"audio","active":true,"mindex":0,"mid":"0","ready":false,"send":true,"feed_id":9,"feed_display":"b:B","feed_mid":"0","codec":"opus"},{"type":"video","active":true,"mindex":1,"mid":"1","ready":false,"send":true,"feed_id":9,"feed_display":"b:B","feed_mid":"1","codec":"vp8","simulcast":{"substream":-1,"substream-target":0,"temporal-layer":-1,"temporal-layer-target":2}}]}},"jsep":{"type":"offer","sdp":"v=0\r\n"}}"#

    static let all = [substreamSwitched, temporalSwitched, configured, attached]
}

@Suite struct SimulcastMessageTests {
    func events(_ text: String) throws -> [VideoRoom.Event] {
        try VideoRoom.events(from: #require(JanusMessage(text: text).pluginData))
    }

    @Test func switchEventsNameTheMidAndTheLayer() throws {
        #expect(
            try events(SimulcastJanus.substreamSwitched) == [.layerSwitched(mid: "1", substream: .high, temporal: nil)]
        )
        #expect(try events(SimulcastJanus.temporalSwitched) == [.layerSwitched(mid: "1", substream: nil, temporal: 1)])
        #expect(try events(SimulcastJanus.configured) == [.configured])
    }

    @Test func attachedStreamsCarryTheirSimulcastState() throws {
        guard case .attached(_, let streams) = try #require(events(SimulcastJanus.attached).first) else {
            Issue.record("expected attached")
            return
        }
        #expect(streams[0].simulcast == nil, "audio is never simulcast")
        #expect(streams[1].simulcast == .init(substream: nil, target: .low, temporal: nil, temporalTarget: 2))
        // Streams of publishers without simulcast have none.
        guard case .attached(_, let plain) = try #require(events(RealJanus.attached).first) else {
            Issue.record("expected attached")
            return
        }
        #expect(plain.allSatisfy { $0.simulcast == nil })
    }

    @Test func configureAsksPerMid() {
        let body = VideoRoom.configureSubscriber(layers: [
            .init(mid: "1", substream: .low, temporal: 2), .init(mid: "3", substream: .high),
            .init(mid: "5", substream: nil, temporal: 7),
        ])
        #expect(body["request"] == "configure")
        #expect(
            body["streams"] == [
                ["mid": "1", "substream": 0, "temporal": 2], ["mid": "3", "substream": 2], ["mid": "5", "temporal": 2],
            ]
        )
        let join = VideoRoom.joinSubscriber(room: 7, streams: [.init(feed: 10, substream: .high), .init(feed: 11)])
        #expect(join["streams"] == [["feed": 10, "substream": 2], ["feed": 11]])
    }

    @Test func substreamsAreOrderedAndStep() {
        #expect(VideoRoom.Substream.allCases.sorted() == [.low, .medium, .high])
        #expect(VideoRoom.Substream.low.lower == nil && VideoRoom.Substream.low.higher == .medium)
        #expect(VideoRoom.Substream.high.higher == nil && VideoRoom.Substream.high.lower == .medium)
        #expect(VideoRoom.Substream.allCases.map(\.description) == ["low", "medium", "high"])
    }

    @Test func badSwitchEventsAreTypedErrors() {
        for data: JSONValue in [
            ["videoroom": "event", "substream": 1],  // no mid
            ["videoroom": "event", "mid": "1", "substream": 3],
            ["videoroom": "event", "mid": "1", "substream": -1],
            ["videoroom": "event", "mid": "1", "substream": "2"],
            ["videoroom": "event", "mid": "1", "temporal": 1.5],
            ["videoroom": "event", "mid": 1, "temporal": 1],
        ] {
            #expect(throws: JanusProtocolError.self, "\(data)") { try VideoRoom.events(from: data) }
        }
    }
}
