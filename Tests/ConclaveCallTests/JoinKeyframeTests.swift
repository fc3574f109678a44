import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclavePeerConnection
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import JanusClient
import Logging
import Testing

/// A subscriber that joins a room where video is already flowing must get a decodable picture
/// from keyframe requests alone, however many others joined just before it.
///
/// The publisher here encodes live VP8 and makes keyframes only when asked (its automatic
/// interval is far longer than the test), so nothing but the keyframe requests of Janus and the
/// subscribers can bring the video up. It publishes audio too (silent here), so the video is not
/// the subscription's first m-line, as in every real call: Janus files feedback it cannot
/// attribute under the first m-line, which is how keyframe requests used to get lost.
@Suite(.serialized) struct JoinKeyframeTests {
    @Test func backToBackJoinsEachGetADecodableKeyframe() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .notice
        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))

        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(room: room, display: "1:Pattern", audio: .opus, video: .vp8, transport: transport),
            logger: logger
        )
        let encoder = try VP8Encoder(
            configuration: VP8EncoderConfiguration(width: 320, height: 240, frameRate: 30, bitrate: 500_000)
        )
        #expect(encoder.configuration.keyframeInterval >= 3_000, "no automatic keyframe during the test")
        let sender = MediaSender(
            source: EncodingVideoSource(
                raw: try PatternSource(width: 320, height: 240, frameRate: 30),
                encoder: encoder
            ),
            encryptor: nil,
            publisher: publisher,
            logger: logger
        )
        let keyframes = Task { for await _ in publisher.keyframeRequests { sender.requestKeyframe() } }
        let sending = Task { try await sender.run(pacer: MediaPacer(mode: .realTime)) }
        try await Task.sleep(for: .seconds(1))  // past the first keyframe: joins start mid-stream

        // Joins follow each other as fast as they complete, so most keyframe requests of one join
        // fall within the publisher's throttle interval after the previous one's.
        let joins = 6
        var pliSent: UInt64 = 0
        for join in 0..<joins {
            let subscriber = try await Subscriber.subscribe(
                on: try await connection.createSession(),
                room: room,
                feeds: [publisher.feedID],
                transport: transport,
                logger: logger
            )
            // Generous: a keyframe takes one request round trip and one frame interval.
            let frame = await withDeadline(.seconds(3)) { () -> SubscribedFrame? in
                for await frame in subscriber.frames where frame.frame.codec == .vp8 { return frame }
                return nil
            }
            let video = await subscriber.statistics.values.first { $0.packets > 0 }
            #expect(
                frame != nil,
                "join \(join): no video frame in 3 s; \(video.map { "\($0.packets) packets, \($0.framesDropped) frames dropped, \($0.pliSent) PLIs" } ?? "no packets")"
            )
            if let frame {
                #expect(frame.frame.isKeyframe, "join \(join): the first frame delivered is a keyframe")
                let decoder = try VP8Decoder()
                let picture = try decoder.decode(frame.frame)
                #expect(picture?.width == 320 && picture?.height == 240, "join \(join): the first frame decodes")
            }
            pliSent += await subscriber.statistics.values.reduce(0) { $0 + $1.pliSent }
            await subscriber.close()
        }
        // Every keyframe request a subscriber sent reached the publisher through Janus (which also
        // asks once per joining subscriber on its own).
        let pliReceived = publisher.statistics.reduce(0) { $0 + $1.pliReceived }
        #expect(pliReceived >= pliSent, "publisher received \(pliReceived) PLIs; subscribers sent \(pliSent)")

        sending.cancel()
        keyframes.cancel()
        await publisher.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
