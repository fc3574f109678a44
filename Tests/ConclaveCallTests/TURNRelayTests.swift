import ConclaveCall
import ConclaveCore
import ConclaveFormats
import ConclavePeerConnection
import ConclaveTestSupport
import Foundation
import JanusClient
import Logging
import Testing

/// Media through a TURN relay: publisher and subscriber both use relayed candidates only
/// (`iceTransportPolicy: relay`), with long-term credentials, against coturn on the test bed.
@Suite(.serialized) struct TURNRelayTests {
    @Test(arguments: ["udp", "tcp"])
    func publishAndSubscribeThroughTheRelay(turnTransport: String) async throws {
        let bed = try TestJanus.shared()
        let turn = try TurnServer(in: bed, port: turnTransport == "udp" ? 3478 : 3479)
        defer { turn.stop() }
        var logger = Logger(label: "test")
        logger.logLevel = .notice
        let transport = MediaTransport.Configuration(
            localAddresses: [bed.hostAddress],
            turnServers: [
                try ICEServerText.turn(
                    "turn:\(turn.address):\(turn.port)?transport=\(turnTransport)",
                    username: turn.username,
                    password: turn.password
                )
            ],
            iceTransportPolicy: .relay
        )
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))

        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(room: room, display: "1:Relayed", video: .vp8, transport: transport),
            logger: logger
        )
        let subscriber = try await Subscriber.subscribe(
            on: try await connection.createSession(),
            room: room,
            feeds: [publisher.feedID],
            transport: transport,
            logger: logger
        )

        // Both PeerConnections carry media over a relayed candidate of ours.
        for (name, media) in [("publisher", publisher.transport), ("subscriber", subscriber.transport)] {
            let pair = media.ice.selectedPair
            #expect(pair?.localType == .relayed, "\(name) selected \(pair.map { "\($0)" } ?? "no pair")")
            #expect(pair?.local.contains(" \(turn.address) ") == true, "\(name): \(pair?.local ?? "-")")
        }

        // 60 video frames (one keyframe first) and 100 Opus frames.
        var random = SystemRandomNumberGenerator()
        var sent: [MediaCodec: [[UInt8]]] = [:]
        for tick in 0..<100 {
            let opus = SyntheticFrames.opus(using: &random)
            publisher.send(EncodedFrame(codec: .opus, data: opus, rtpTimestamp: UInt32(tick * 960), isKeyframe: true))
            sent[.opus, default: []].append(opus)
            if tick % 5 < 3 {
                let index = tick / 5 * 3 + tick % 5
                let data = SyntheticFrames.vp8(index, size: [300, 1500, 5000][index % 3], using: &random)
                publisher.send(
                    EncodedFrame(codec: .vp8, data: data, rtpTimestamp: UInt32(index * 3000), isKeyframe: index == 0)
                )
                sent[.vp8, default: []].append(data)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let expected = sent.values.reduce(0) { $0 + $1.count }
        let received = await withDeadline(.seconds(10)) {
            var received: [MediaCodec: [[UInt8]]] = [:]
            var total = 0
            for await frame in subscriber.frames {
                received[frame.frame.codec, default: []].append(frame.frame.data)
                total += 1
                if total == expected { break }
            }
            return received
        }
        for codec in [MediaCodec.opus, .vp8] {
            let got = received[codec] ?? []
            #expect(got.count == sent[codec]?.count, "\(codec): \(got.count) of \(sent[codec]?.count ?? 0) frames")
            #expect(got == sent[codec], "\(codec) frames arrive byte-identical")
        }
        #expect(turn.log.contains("ALLOCATE"), "coturn logged no allocation:\n\(turn.log.suffix(2000))")

        await subscriber.close()
        await publisher.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
