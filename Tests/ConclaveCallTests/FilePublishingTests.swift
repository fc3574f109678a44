import ConclaveAV
import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclavePeerConnection
import ConclaveTestSupport
import Foundation
import JanusClient
import Logging
import Testing

/// Media files published through Janus without transcoding arrive as they are in the file.
@Suite(.serialized) struct FilePublishingTests {
    /// Makes a short test file with ffmpeg: VP8+Opus WebM or H264+Opus Matroska.
    static func makeFile(_ codec: MediaCodec, seconds: Int, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent(codec == .vp8 ? "media.webm" : "media.mkv").path
        let video =
            codec == .vp8
            ? ["-c:v", "libvpx", "-b:v", "400k", "-deadline", "realtime", "-cpu-used", "8", "-g", "30"]
            : [
                "-c:v", "libx264", "-profile:v", "baseline", "-preset", "veryfast", "-tune", "zerolatency", "-g", "30",
                "-bf", "0", "-pix_fmt", "yuv420p",
            ]
        let result = try runProcess(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-f", "lavfi", "-i",
                "sine=frequency=440:sample_rate=48000", "-t", "\(seconds)",
            ] + video
                + ["-c:a", "libopus", "-b:a", "32k", "-y", path]
        )
        guard result.succeeded else { throw SubprocessError(description: "ffmpeg failed: \(result.errorOutput)") }
        return path
    }

    /// The encoded frames of a file, per codec, as the demuxer reads them.
    static func frames(in path: String) throws -> [MediaCodec: [[UInt8]]] {
        let demuxer = try MediaDemuxer(path: path)
        var result: [MediaCodec: [[UInt8]]] = [:]
        while let packet = try demuxer.readPacket() {
            guard let codec = demuxer.streams.first(where: { $0.index == packet.streamIndex })?.codec else { continue }
            result[codec, default: []].append(packet.data)
        }
        return result
    }

    @Test func threePublishersStreamFilesThatArriveAsInTheFile() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("files")
        defer { try? FileManager.default.removeItem(at: directory) }
        let webm = try Self.makeFile(.vp8, seconds: 3, in: directory)
        let mkv = try Self.makeFile(.h264, seconds: 3, in: directory)
        let sources: [(path: String, video: MediaCodec)] = [(webm, .vp8), (webm, .vp8), (mkv, .h264)]

        let transport = MediaTransport.Configuration(localAddresses: [bed.hostAddress])
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))

        var publishers: [Publisher] = []
        for (index, source) in sources.enumerated() {
            publishers.append(
                try await Publisher.publish(
                    on: try await connection.createSession(),
                    configuration: .init(
                        room: room,
                        display: "\(index):File \(index)",
                        video: source.video,
                        transport: transport
                    ),
                    logger: logger
                )
            )
        }
        let (listener, subscription, observer) = try await followRoom(
            room,
            on: connection,
            transport: transport,
            crypto: nil,
            logger: logger
        )
        try await observer.wait { $0.joined.count == 3 }
        let subscriber = try #require(subscription.subscriber)
        try await subscriber.transport.waitUntilConnected(within: .seconds(10))
        // A publisher that joins after the subscription was made is added by a renegotiation that
        // ends after `joined` is reported: wait until the receive session has all six streams, or
        // the first frames of that publisher arrive before its stream exists (and are dropped).
        let deadline = ContinuousClock.now + .seconds(10)
        let wanted = Set(publishers.map(\.feedID))
        while ContinuousClock.now < deadline {
            let feeds = Set(subscriber.streams.filter(\.isActive).compactMap(\.feedID))
            if wanted.isSubset(of: feeds), await subscriber.statistics.count >= 6 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await subscriber.statistics.count >= 6, "streams configured: \(subscriber.streams)")

        // Stream every file in real time, audio and video, all publishers at once.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (publisher, source) in zip(publishers, sources) {
                for codec in [MediaCodec.opus, source.video] {
                    let sender = MediaSender(
                        source: try FileMediaSource(path: source.path, codec: codec),
                        encryptor: nil,
                        publisher: publisher,
                        logger: logger
                    )
                    group.addTask { try await sender.run(pacer: MediaPacer(mode: .realTime)) }
                }
            }
            try await group.waitForAll()
        }

        var expected: [UInt64: [MediaCodec: [[UInt8]]]] = [:]
        for (publisher, source) in zip(publishers, sources) {
            expected[publisher.feedID] = try Self.frames(in: source.path)
        }
        let total = expected.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } }
        try await observer.wait { seen in
            seen.frames.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } } >= total
        }

        let seen = observer.seen.withLock { $0 }
        for (feed, streams) in expected {
            for (codec, frames) in streams {
                let got = seen.frames[feed]?[codec] ?? []
                #expect(frames.count > 0)
                #expect(got.count == frames.count, "feed \(feed) \(codec): \(got.count) of \(frames.count) frames")
                #expect(got == frames, "feed \(feed) \(codec): frames differ from the file")
            }
        }

        await subscription.close()
        await listener.leave()
        for publisher in publishers { await publisher.leave() }
        try await admin.destroyRoom(room)
        await connection.close()
    }
}
