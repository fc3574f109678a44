import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import JanusClient
import Logging
import Testing

/// Interop with a third-party WebRTC stack (aiortc, Tests/Interop/aiortc_janus.py) through Janus.
@Suite(.serialized) struct AiortcInteropTests {
    static let script = TestPaths.packageRoot.appendingPathComponent("Tests/Interop/aiortc_janus.py").path

    /// Reads JSON lines from the aiortc peer until one has `key`.
    static func line(from peer: BackgroundProcess, with key: String) throws -> [String: Any] {
        for _ in 0..<10 {
            let text = try peer.readLine(timeout: .seconds(40))
            if let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                object[key] != nil
            {
                return object
            }
        }
        throw SubprocessError(description: "aiortc peer never printed \(key)")
    }

    @Test func conclaveReceivesAndDecodesAnAiortcPublisher() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))

        let peer = try BackgroundProcess(
            try TestPaths.python(),
            [
                Self.script, "publish", "--janus", bed.webSocketURL, "--room", "\(room)", "--address", bed.hostAddress,
                "--duration", "6",
            ]
        )
        defer { peer.stop() }
        let feed = try #require(Self.line(from: peer, with: "feed")["feed"] as? NSNumber).uint64Value

        let (listener, subscription, observer) = try await followRoom(
            room,
            on: connection,
            transport: .init(localAddresses: [bed.hostAddress]),
            crypto: nil,
            logger: logger
        )
        try await observer.wait(for: .seconds(15)) {
            ($0.frames[feed]?[.vp8]?.count ?? 0) >= 60 && ($0.frames[feed]?[.opus]?.count ?? 0) >= 100
        }

        // aiortc's VP8 and Opus decode without a single error in libvpx and libopus.
        let seen = observer.seen.withLock { $0 }
        let video = seen.frames[feed]?[.vp8] ?? []
        let audio = seen.frames[feed]?[.opus] ?? []
        #expect(video.count >= 60, "aiortc VP8 frames received: \(video.count)")
        #expect(audio.count >= 100, "aiortc Opus frames received: \(audio.count)")
        let decoder = try VP8Decoder()
        var pictures = 0
        for (index, data) in video.enumerated() {
            let frame = EncodedFrame(codec: .vp8, data: data, rtpTimestamp: UInt32(index * 3000), isKeyframe: false)
            if let picture = try decoder.decode(frame) {
                pictures += 1
                #expect(picture.width == 640 && picture.height == 480)
            }
        }
        #expect(pictures == video.count, "every VP8 frame decodes to a picture")
        let opus = try OpusAudioDecoder(channels: 2)
        for (index, packet) in audio.enumerated() {
            _ = try opus.decode(
                EncodedFrame(codec: .opus, data: packet, rtpTimestamp: UInt32(index * 960), isKeyframe: true)
            )
        }

        await subscription.close()
        await listener.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }

    @Test func aiortcReceivesAndDecodesConclavesPublisher() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))

        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: "1:Conclave",
                transport: .init(localAddresses: [bed.hostAddress])
            ),
            logger: logger
        )
        let video = MediaSender(
            source: EncodingVideoSource(
                raw: try PatternSource(width: 640, height: 480, frameRate: 30, frameLimit: 240),
                encoder: try VideoEncoderSettings(codec: .vp8).makeEncoder()
            ),
            encryptor: nil,
            publisher: publisher,
            logger: logger
        )
        let audio = MediaSender(
            source: EncodingAudioSource(raw: try ToneSource(frameLimit: 400), encoder: try OpusAudioEncoder()),
            encryptor: nil,
            publisher: publisher,
            logger: logger
        )
        let keyframes = Task {
            for await _ in publisher.keyframeRequests { video.requestKeyframe() }
        }
        defer { keyframes.cancel() }

        let peer = try BackgroundProcess(
            try TestPaths.python(),
            [
                Self.script, "subscribe", "--janus", bed.webSocketURL, "--room", "\(room)", "--feed",
                "\(publisher.feedID)",
                "--address", bed.hostAddress, "--duration", "6",
            ]
        )
        defer { peer.stop() }
        _ = try Self.line(from: peer, with: "subscribed")
        async let sendingVideo: Void = video.run(pacer: MediaPacer(mode: .realTime))
        async let sendingAudio: Void = audio.run(pacer: MediaPacer(mode: .realTime))
        let counts = try Self.line(from: peer, with: "video_frames")
        try await sendingVideo
        try await sendingAudio

        let decoded = (counts["video_frames"] as? Int) ?? 0
        #expect(decoded >= 120, "aiortc decoded \(decoded) of Conclave's VP8 frames in 6 s")
        #expect((counts["audio_frames"] as? Int) ?? 0 >= 150, "aiortc decoded audio: \(counts)")
        #expect(counts["width"] as? Int == 640)
        #expect(counts["height"] as? Int == 480)
        #expect(counts["decode_errors"] as? Int == 0)

        await publisher.leave()
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
