import ConclaveCall
import ConclaveCore
import ConclavePeerConnection
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Testing

/// Media through a real Janus: Conclave publishers and a Conclave subscriber over ICE, DTLS-SRTP
/// and RTP on the test bed's veth link.
@Suite(.serialized) struct MediaThroughJanusTests {
    @Test func threePublishersReachOneSubscriberByteIdentical() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .notice
        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))

        let videoCodecs: [MediaCodec] = [.vp8, .vp8, .h264]
        var publishers: [Publisher] = []
        for (index, codec) in videoCodecs.enumerated() {
            let session = try await connection.createSession()
            publishers.append(
                try await Publisher.publish(
                    on: session,
                    configuration: .init(
                        room: room,
                        display: "\(index + 1):Publisher \(index + 1)",
                        video: codec,
                        transport: transport
                    ),
                    logger: logger
                )
            )
        }

        let subscriber = try await Subscriber.subscribe(
            on: try await connection.createSession(),
            room: room,
            feeds: publishers.map(\.feedID),
            transport: transport,
            logger: logger
        )
        #expect(subscriber.streams.count == 6, "audio and video of three feeds: \(subscriber.streams)")

        // Every publisher sends 90 video frames (30 fps) and 150 Opus frames (20 ms).
        var random = SystemRandomNumberGenerator()
        var sent: [UInt64: [MediaCodec: [[UInt8]]]] = [:]
        let audioFrames = 150
        for tick in 0..<audioFrames {
            for (index, publisher) in publishers.enumerated() {
                let opus = SyntheticFrames.opus(using: &random)
                publisher.send(
                    EncodedFrame(codec: .opus, data: opus, rtpTimestamp: UInt32(tick * 960), isKeyframe: true)
                )
                sent[publisher.feedID, default: [:]][.opus, default: []].append(opus)
                // Video at 30 fps: three of every five 20 ms ticks.
                guard tick % 5 < 3 else { continue }
                let frameIndex = tick / 5 * 3 + tick % 5
                let codec = videoCodecs[index]
                // Sizes from a few bytes to several MTUs, so fragmentation is exercised.
                let size = [50, 900, 1500, 4000, 12000][frameIndex % 5]
                let data =
                    codec == .vp8
                    ? SyntheticFrames.vp8(frameIndex, size: size, using: &random)
                    : SyntheticFrames.h264(frameIndex, size: size, using: &random)
                publisher.send(
                    EncodedFrame(
                        codec: codec,
                        data: data,
                        rtpTimestamp: UInt32(frameIndex * 3000),
                        isKeyframe: frameIndex % 30 == 0
                    )
                )
                sent[publisher.feedID, default: [:]][codec, default: []].append(data)
            }
            try await Task.sleep(for: .milliseconds(20))
        }

        // Collect until everything arrived or 10 s passed.
        let expected = sent.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } }
        var received: [UInt64: [MediaCodec: [[UInt8]]]] = [:]
        var count = 0
        (received, count) = await withDeadline(.seconds(10)) {
            var result: [UInt64: [MediaCodec: [[UInt8]]]] = [:]
            var total = 0
            for await frame in subscriber.frames {
                result[frame.feedID, default: [:]][frame.frame.codec, default: []].append(frame.frame.data)
                total += 1
                if total == expected { break }
            }
            return (result, total)
        }

        #expect(count == expected, "received \(count) of \(expected) frames")
        for publisher in publishers {
            for (codec, frames) in sent[publisher.feedID] ?? [:] {
                let got = received[publisher.feedID]?[codec] ?? []
                #expect(got.count == frames.count, "feed \(publisher.feedID) \(codec): \(got.count) of \(frames.count)")
                #expect(got == frames, "feed \(publisher.feedID) \(codec) frames differ")
            }
        }

        await subscriber.close()
        for publisher in publishers { await publisher.leave() }
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
