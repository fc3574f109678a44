import ConclaveAV
import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave record --composite`: the call's composite written while it runs, checked by
/// decoding it.
@Suite("Live composite through Janus", .serialized)
struct LiveCompositeTests {
    /// Two 320x240 publishers in the default 1280x720 grid: each gets a 640x720 tile, in which
    /// its picture is scaled 2x to 640x480 and centred, so the pattern's frame number reads back.
    static let pictureRows = 120..<600

    /// Every picture of `path` that decodes; a file cut by a kill ends where it is cut.
    static func decodedPictures(_ path: String) throws -> [VideoFrame] {
        let demuxer = try MediaDemuxer(path: path)
        let stream = try #require(demuxer.firstStream(of: .video))
        let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: stream)
        var frames: [VideoFrame] = []
        func take(_ outputs: [MediaStreamDecoder.Output]) {
            for case .video(let frame, _) in outputs { frames.append(frame) }
        }
        while let packet = try? demuxer.readPacket() {
            guard packet.streamIndex == stream.index else { continue }
            guard let outputs = try? decoder.decode(packet) else { break }
            take(outputs)
        }
        if let outputs = try? decoder.decode(nil) { take(outputs) }
        return frames
    }

    /// The pattern reading of tile `column` (0 left, 1 right) of a two-tile picture.
    static func reading(_ picture: VideoFrame, column: Int) -> PatternReading? {
        let x = column * 640
        var data: [UInt8] = []
        for row in pictureRows {
            let start = row * picture.width + x
            data += picture.data[start..<(start + 640)]
        }
        for offset in [picture.uOffset, picture.vOffset] {
            for row in (pictureRows.lowerBound / 2)..<(pictureRows.upperBound / 2) {
                let start = offset + row * (picture.width / 2) + x / 2
                data += picture.data[start..<(start + 320)]
            }
        }
        guard let tile = try? VideoFrame(width: 640, height: 480, data: data, rtpTimestamp: 0) else { return nil }
        return PatternReader.read(tile)
    }

    struct Call {
        var webSocketURL: String
        var hostAddress: String
        var connection: JanusConnection
        var admin: VideoRoomHandle
        var room: UInt64
        var key: CallKey
        var directory: URL
        var logger: Logger

        static func make() async throws -> Call {
            let bed = try TestJanus.shared()
            var logger = Logger(label: "test")
            logger.logLevel = .warning
            let directory = try TestPaths.temporaryDirectory("conclave-live-composite")
            let connection = try await JanusConnection.connect(to: bed.webSocketURL)
            let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
            let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))
            return Call(
                webSocketURL: bed.webSocketURL,
                hostAddress: bed.hostAddress,
                connection: connection,
                admin: admin,
                room: room,
                key: .random(),
                directory: directory,
                logger: logger
            )
        }

        var output: URL { directory.appendingPathComponent("rec") }

        func startRecorder(callID: UInt64) throws -> BackgroundProcess {
            let keyFile = directory.appendingPathComponent("call.key").path
            _ = FileManager.default.createFile(
                atPath: keyFile,
                contents: Data(key.hexString.utf8),
                attributes: [.posixPermissions: 0o600]
            )
            return try BackgroundProcess(
                try TestPaths.conclave(),
                [
                    "record", "--janus", webSocketURL, "--room", "\(room)", "--call-id", "\(callID)",
                    "--key-file", keyFile, "--out", output.path, "--ice-address", hostAddress,
                    "--composite", "call.mkv", "--log-level", "warning",
                ],
                environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
            )
        }

        func publishers(callID: UInt64, seconds: Int) async throws -> [PatternPublisher] {
            var publishers: [PatternPublisher] = []
            for (index, codec) in [MediaCodec.vp8, .h264].enumerated() {
                let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
                crypto.keyRing.install(key, epoch: 0)
                publishers.append(
                    try await .start(
                        on: connection,
                        room: room,
                        display: "user\(index + 1):Publisher \(index + 1)",
                        codec: codec,
                        crypto: crypto,
                        seconds: seconds,
                        address: hostAddress,
                        logger: logger
                    )
                )
            }
            let subscribed = try await waitUntilManifest(output, within: .seconds(20)) { manifest in
                Set(["user1", "user2"]).isSubset(of: manifest.participants.map(\.key))
            }
            #expect(subscribed, "the recorder subscribed to both publishers")
            return publishers
        }

        func close() async throws {
            try await admin.destroyRoom(room)
            await connection.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test(
        "record --composite: an owner-only Matroska file of the call's length beside the recording, both tiles showing their pictures, nothing dropped"
    )
    func compositeOfACall() async throws {
        let call = try await Call.make()
        let callID: UInt64 = 0x11FE_0001
        let recorder = try call.startRecorder(callID: callID)
        defer { recorder.stop() }
        let started = ContinuousClock.now
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))
        let announced = ContinuousClock.now
        let seconds = 6
        let publishers = try await call.publishers(callID: callID, seconds: seconds)
        try await sendAll(publishers)
        for publisher in publishers { await publisher.stop() }
        kill(recorder.pid, SIGTERM)
        let stopped = ContinuousClock.now
        let lines = readUntilExit(recorder, timeout: .seconds(30))

        let path = call.output.appendingPathComponent("call.mkv").path
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600, "\(lines)")
        #expect(stat(call.output.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(try FFmpeg.probeStreams(path).sorted() == ["h264", "opus"])
        #expect(try FFmpeg.decodeErrors(path) == "")
        let sidecar = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path + ".json")))
        let figures = try #require(sidecar as? [String: Any])
        #expect(figures["videoFramesDropped"] as? Int == 0, "\(figures)")
        #expect(
            lines.contains { $0.contains("composite of") && $0.contains("0 input video frames dropped") },
            "\(lines)"
        )

        let pictures = try Self.decodedPictures(path)
        let duration = Double(pictures.count) / 30
        let longest = (stopped - started) / .seconds(1)
        let shortest = (stopped - announced) / .seconds(1)
        #expect(duration <= longest + 0.1 && duration >= shortest - 0.5, "\(duration) s in \(shortest)...\(longest) s")
        // Both tiles show their participant's pattern, frame numbers going up, for most of the
        // time both were sending (the last frames arrive before the publishers leave).
        var both = 0
        var previous = [-1, -1]
        for picture in pictures {
            guard let left = Self.reading(picture, column: 0), let right = Self.reading(picture, column: 1) else {
                continue
            }
            #expect(left.frameNumber >= previous[0] && right.frameNumber >= previous[1])
            previous = [left.frameNumber, right.frameNumber]
            both += 1
        }
        #expect(both >= (seconds - 2) * 30, "\(both) pictures with both tiles")
        print("live composite: \(duration) s (call \(shortest)...\(longest) s), \(both) pictures with both tiles read")
        try await call.close()
    }

    /// The composite's clusters close every half second and are flushed at once, so a kill
    /// costs the open cluster and the frame being encoded.
    @Test("kill -9 of record --composite: the composite decodes up to within 1 s of the kill")
    func killLeavesAPlayableComposite() async throws {
        let call = try await Call.make()
        let callID: UInt64 = 0x11FE_0002
        let recorder = try call.startRecorder(callID: callID)
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))
        let publishers = try await call.publishers(callID: callID, seconds: 8)
        let sending = Task { try await sendAll(publishers) }
        // The scenario, not a synchronisation: the call runs, then the recorder is killed mid-call.
        try await Task.sleep(for: .seconds(5))
        recorder.stop()  // SIGKILL
        let killed = Date()
        try await sending.value
        for publisher in publishers { await publisher.stop() }

        let path = call.output.appendingPathComponent("call.mkv").path
        let pictures = try Self.decodedPictures(path)
        let duration = Double(pictures.count) / 30
        // The composite starts with the recording (just after it): the call timeline's zero is
        // the manifest's start time.
        let manifest = try RecordingManifest.read(from: call.output.path)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let start = try #require(formatter.date(from: manifest.startTime), "\(manifest.startTime)")
        let untilKill = killed.timeIntervalSince(start)
        #expect(duration >= untilKill - 1.0, "\(duration) s of \(untilKill) s until the kill")
        #expect(duration <= untilKill + 0.1)
        print("kill -9 after \(untilKill) s: the live composite decodes \(duration) s (\(pictures.count) pictures)")
        // The last pictures decoded show both participants.
        let last = try #require(pictures.last)
        #expect(Self.reading(last, column: 0) != nil && Self.reading(last, column: 1) != nil)
        try await call.close()
    }
}
