import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenH264
import ConclavePeerConnection
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging
import Testing

/// Conclave publishes its pattern as three simulcast layers through the shared test Janus; a
/// Conclave subscriber receives the layer it asks for, and the top layer pauses when the bitrate
/// Janus allows (its REMB) no longer fits it, then resumes, each change landing at a keyframe.
/// End-to-end encrypted both times (VP8 in sframe, H264 in ECall's format): every layer is
/// sealed frame by frame like any video, and the subscriber decrypts whichever Janus forwards.
/// Without encryption the same layers reach Chromium in `BrowserInteropTests`.
@Suite(.serialized) struct SimulcastSendTests {
    @Test(arguments: [(MediaCodec.vp8, FrameCryptoFormat.sframe), (.h264, .ecall)])
    func theLayerAskedForArrivesAndTheTopOnePausesUnderALowEstimate(codec: MediaCodec, format: FrameCryptoFormat)
        async throws
    {
        let key = CallKey.random()
        let crypto = { @Sendable in
            let crypto = CallFrameCrypto(callID: 1, format: format, logger: Logger(label: "test"))
            crypto.keyRing.install(key, epoch: 0)
            return crypto
        }
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: [codec.rawValue]))
        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])

        let video = try #require(
            try CallMediaSources.video(
                .generated,
                settings: .init(codec: codec, width: 640, height: 480, frameRate: 30, simulcastLayers: 3)
            )
        )
        let sender = CallSession(
            configuration: .init(
                janusURL: bed.webSocketURL,
                room: room,
                callID: 1,
                display: "1:Sender",
                crypto: crypto(),
                transport: transport
            ),
            sources: [video],
            logger: logger
        )
        try await sender.join()
        let feed = try #require(await sender.feedID)

        let observer = SimulcastObserver()
        let listener = try await RoomListener.join(on: try await connection.createSession(), room: room, display: nil)
        let subscription = RoomSubscription(
            session: try await connection.createSession(),
            configuration: .init(
                room: room,
                ownFeedID: listener.joined.id,
                crypto: crypto(),
                transport: transport,
                layers: LayerSelection(standard: .fixed(.low))
            ),
            initialPublishers: listener.joined.publishers,
            roomEvents: listener.roomEvents,
            observers: [observer],
            logger: logger
        )

        /// Waits for `count` frames received since the last switch, which must be to `layer`.
        func frames(_ count: Int, of layer: VideoRoom.Substream, within limit: Duration = .seconds(20)) async throws {
            try await observer.wait(for: limit, "\(count) frames of the \(layer) layer") { seen in
                guard let last = seen.switches.last, last.substream == layer else { return false }
                return seen.frames.count >= last.afterFrames + count
            }
        }
        try await frames(30, of: .low)
        let askedHigh = observer.seen.withLock { $0.frames.count }
        #expect(try await subscription.selectLayer(.high, feedID: feed))
        try await frames(30, of: .high)

        /// Caps what the sender sends at `bitrate` and returns how long until Janus moved the
        /// subscriber onto `layer`.
        func cap(at bitrate: Int, until layer: VideoRoom.Substream) async throws -> Duration {
            let started = ContinuousClock.now
            let switchesBefore = observer.seen.withLock { $0.switches.count }
            try await sender.limitSentBitrate(bitrate)
            try await observer.wait(for: .seconds(10), "the \(layer) layer at \(bitrate) bit/s") { seen in
                seen.switches.dropFirst(switchesBefore).contains { $0.substream == layer }
            }
            return ContinuousClock.now - started
        }

        // 300 kbit/s leaves room for the low and medium layers only: the top one stops, and Janus
        // moves the subscriber, which still asks for it, down to what is sent.
        let down = try await cap(at: 300_000, until: .medium)
        let cappedStatus = await sender.status()
        #expect(cappedStatus.videoLayers == 3 && cappedStatus.videoLayersSent == 2, "under the cap")
        #expect(cappedStatus.terminalText().contains("layers 2/3"), "\(cappedStatus.terminalText())")
        try await frames(30, of: .medium)
        let up = try await cap(at: 2_000_000, until: .high)
        #expect(await sender.status().videoLayersSent == 3, "after the cap")
        try await frames(30, of: .high)

        await subscription.close()
        await listener.leave()
        await sender.leave()
        await connection.close()

        let (received, switches, undecryptable) = observer.seen.withLock { ($0.frames, $0.switches, $0.undecryptable) }
        #expect(undecryptable == 0, "frames that did not decrypt")
        print(
            "simulcast send (\(codec), \(format)): \(received.count) frames, switches \(switches.map(\.substream)),"
                + " medium \(down) after the cap, high again \(up) after it was lifted"
        )
        // Janus moves to the layer asked for (or back down) through the lower ones, a keyframe at
        // a time; every layer here makes its keyframes together, so the steps come at once.
        let fromHigh = switches.filter { $0.afterFrames >= askedHigh }.map(\.substream).drop { $0 != .high }
        let underCap = fromHigh.dropFirst().dropLast()
        #expect(
            fromHigh.first == .high && fromHigh.last == .high && underCap.last == .medium && !underCap.contains(.high),
            "switches after asking for high: \(switches)"
        )
        // Every frame from the first keyframe on decodes, and sizes change only at keyframes.
        let decoder: any VideoDecoding = codec == .vp8 ? try VP8Decoder() : try H264Decoder()
        var pictures: [(index: Int, size: String, number: Int?, keyframe: Bool)] = []
        for (index, frame) in received.enumerated().drop(while: { !$0.element.frame.isKeyframe }) {
            do {
                guard let picture = try decoder.decode(frame.frame) else { continue }
                let number = picture.width >= 320 ? PatternReader.read(picture)?.frameNumber : nil
                pictures.append((index, "\(picture.width)x\(picture.height)", number, frame.frame.isKeyframe))
            } catch {
                Issue.record("frame \(index) of \(received.count) does not decode: \(error)")
            }
        }
        for (before, after) in zip(pictures, pictures.dropFirst()) where before.size != after.size {
            #expect(after.keyframe, "the size changes at frame \(after.index), not a keyframe")
        }
        let sizes = pictures.map(\.size).reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
        let capSizes = sizes.drop { $0 != "640x480" }
        #expect(
            sizes.first == "160x120" && capSizes.contains("320x240") && sizes.last == "640x480",
            "sizes in turn: \(sizes)"
        )
        // The layers are encodings of the same pictures, so the numbers go on across every
        // switch. A number may come twice where Janus forwards two layers' keyframes of one
        // picture on its way up, and a few are missing once: those the paused layer would have
        // carried before Janus gave up waiting for it (250 ms).
        let numbers = pictures.compactMap(\.number)
        let steps = zip(numbers, numbers.dropFirst()).map { $1 - $0 }
        #expect(!numbers.isEmpty && steps.allSatisfy { $0 >= 0 }, "the numbers go forward: \(numbers)")
        #expect(steps.filter { $0 == 0 }.count <= switches.count, "numbers repeated: \(numbers)")
        let skipped = steps.filter { $0 > 1 }
        #expect(skipped.count <= 1 && skipped.allSatisfy { $0 <= 16 }, "numbers skipped: \(numbers)")
        print(
            "simulcast send (\(codec), \(format)): sizes \(sizes), numbers skipped at the pause \(skipped.map { $0 - 1 })"
        )
    }
}
