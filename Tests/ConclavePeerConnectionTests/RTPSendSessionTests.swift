import ConclaveCore
import ConclavePeerConnection
import ConclaveRTP
import ConclaveSDP
import Logging
import Testing

@Suite struct RTPSendSessionTests {
    static let audio = PublisherTrack(codec: .opus, ssrc: 0x1111, trackID: "audio0")
    static let video = PublisherTrack(codec: .vp8, ssrc: 0x2222, trackID: "video0")

    /// A session on a transport that never connects: packets are numbered and counted, and the
    /// transport drops them (it has no SRTP keys).
    static func session() throws -> (RTPSendSession, MediaTransport) {
        let transport = try MediaTransport(
            configuration: .init(localAddresses: ["127.0.0.1"]),
            controlling: true,
            logger: Logger(label: "test")
        )
        return (RTPSendSession(audio: audio, video: video, transport: transport), transport)
    }

    @Test func framesArePacketizedOnTheTrackOfTheirCodec() async throws {
        let (session, transport) = try Self.session()
        _ = session.send(EncodedFrame(codec: .opus, data: [1, 2, 3], rtpTimestamp: 0, isKeyframe: true))
        // A VP8 frame larger than one packet.
        _ = session.send(
            EncodedFrame(codec: .vp8, data: [UInt8](repeating: 7, count: 3000), rtpTimestamp: 0, isKeyframe: true)
        )
        // No H264 track: ignored.
        _ = session.send(EncodedFrame(codec: .h264, data: [0, 0, 0, 1, 0x65], rtpTimestamp: 0, isKeyframe: true))
        let statistics = session.statistics
        #expect(statistics.map(\.codec) == [.opus, .vp8])
        #expect(statistics[0].packets == 1)
        #expect(statistics[1].packets >= 3, "3000 bytes of VP8 take several packets")
        await transport.close()
    }

    @Test func feedbackAsksForKeyframesAndLimitsTheBitrate() async throws {
        let (session, transport) = try Self.session()
        _ = session.send(EncodedFrame(codec: .vp8, data: [1, 2, 3], rtpTimestamp: 0, isKeyframe: true))
        let pli = RTCPCompound.serialize([.pictureLossIndication(.init(senderSSRC: 9, mediaSSRC: Self.video.ssrc))])
        #expect(session.receiveRTCP(pli) == .init(keyframe: .vp8, bitrateLimit: nil))
        let remb = RTCPCompound.serialize([
            .receiverEstimatedMaxBitrate(.init(senderSSRC: 9, bitrate: 300_000, ssrcs: [Self.video.ssrc]))
        ])
        #expect(session.receiveRTCP(remb) == .init(keyframe: nil, bitrateLimit: 300_000))
        let other = RTCPCompound.serialize([.pictureLossIndication(.init(senderSSRC: 9, mediaSSRC: 0x3333))])
        #expect(session.receiveRTCP(other) == .init(), "a PLI about a stream we do not send asks for nothing")
        #expect(session.receiveRTCP([1, 2, 3]) == .init(), "garbage is ignored")
        #expect(session.statistics.first { $0.codec == .vp8 }?.pliReceived == 1)
        await transport.close()
    }
}
