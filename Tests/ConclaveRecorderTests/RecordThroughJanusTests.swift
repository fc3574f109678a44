import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import ConclaveOpus
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

/// A test-bed publisher with its pattern video and tone audio encoded in advance, so that every
/// publisher's frames go out on one shared schedule: beep and flash number k of every publisher
/// leave at the same instant, which is what the recording must reproduce.
struct PatternPublisher {
    let publisher: Publisher
    let frames: [TimedFrame]
    let videoEncryptor: FrameEncryptor?
    let audioEncryptor: FrameEncryptor?

    static func start(
        on connection: JanusConnection,
        room: UInt64,
        display: String,
        codec: MediaCodec,
        crypto: CallFrameCrypto?,
        seconds: Int,
        address: String,
        logger: Logger
    ) async throws -> PatternPublisher {
        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: display,
                video: codec,
                endToEndEncrypted: crypto != nil,
                transport: .init(localAddresses: [address])
            ),
            logger: logger
        )
        let video = EncodingVideoSource(
            raw: try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: seconds * 30),
            encoder: try VideoEncoderSettings(codec: codec, width: 320, height: 240, bitrate: 300_000).makeEncoder()
        )
        var frames: [TimedFrame] = []
        var index = 0
        while true {
            // A keyframe every second, so a subscriber never waits long (the frames are fixed in advance).
            if index % 30 == 0 { video.requestKeyframe() }
            guard let timed = try video.nextFrame() else { break }
            frames.append(timed)
            index += 1
        }
        let audio = EncodingAudioSource(raw: try ToneSource(frameLimit: seconds * 50), encoder: try OpusAudioEncoder())
        while let timed = try audio.nextFrame() { frames.append(timed) }
        return PatternPublisher(
            publisher: publisher,
            frames: frames,
            videoEncryptor: crypto?.makeEncryptor(
                codec: codec,
                senderID: publisher.feedID,
                cipher: OpenSSLFrameCipher.self
            ),
            audioEncryptor: crypto?.makeEncryptor(
                codec: .opus,
                senderID: publisher.feedID,
                cipher: OpenSSLFrameCipher.self
            )
        )
    }

    func send(_ frame: EncodedFrame) throws {
        let encryptor = frame.codec == .opus ? audioEncryptor : videoEncryptor
        publisher.send(try encryptor?.encrypt(frame) ?? frame)
    }

    func stop() async {
        await publisher.leave()
    }
}

/// Sends every publisher's frames on one real-time schedule from one shared start.
func sendAll(_ publishers: [PatternPublisher]) async throws {
    var schedule: [(publisher: Int, frame: TimedFrame)] = []
    for (index, publisher) in publishers.enumerated() {
        schedule += publisher.frames.map { (index, $0) }
    }
    schedule.sort { $0.frame.mediaTime < $1.frame.mediaTime }
    let clock = ContinuousClock()
    let start = clock.now.advanced(by: .milliseconds(50))
    for item in schedule {
        // Pacing, not synchronisation: a frame goes out when its capture time comes.
        try await clock.sleep(until: start.advanced(by: item.frame.mediaTime), tolerance: .milliseconds(1))
        try publishers[item.publisher].send(item.frame.frame)
    }
}

/// Reads the recording's manifest until it satisfies `condition` or `limit` passes; returns whether
/// it did. The recorder rewrites it within half a second of a participant appearing.
func waitUntilManifest(
    _ directory: URL,
    within limit: Duration,
    _ condition: (RecordingManifest) -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if let manifest = try? RecordingManifest.read(from: directory.path), condition(manifest) { return true }
        try await Task.sleep(for: .milliseconds(100))
    }
    return false
}

/// Reads `conclave record`'s status lines (a JSON object a second) until one satisfies
/// `condition` or `limit` passes; returns whether one did.
func waitUntilStatus(_ process: BackgroundProcess, within limit: Duration, _ condition: (RecordingStatus) -> Bool)
    -> Bool
{
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        guard let line = try? process.readLine(timeout: .seconds(2)) else { return false }
        if let status = try? JSONDecoder().decode(RecordingStatus.self, from: Data(line.utf8)), condition(status) {
            return true
        }
    }
    return false
}

/// Reads the child's output until it exits; returns the lines.
func readUntilExit(_ process: BackgroundProcess, timeout: Duration) -> [String] {
    var lines: [String] = []
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        let started = ContinuousClock.now
        guard let line = try? process.readLine(timeout: .seconds(1)) else {
            // An immediate failure is the end of the output: the process exited.
            if ContinuousClock.now - started < .milliseconds(900) { break }
            continue
        }
        lines.append(line)
    }
    return lines
}

@Suite("Recording through Janus", .serialized)
struct RecordThroughJanusTests {

    func writeKeyFile(_ key: CallKey, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("call.key").path
        _ = FileManager.default.createFile(
            atPath: path,
            contents: Data(key.hexString.utf8),
            attributes: [.posixPermissions: 0o600]
        )
        return path
    }

    func makeCrypto(_ key: CallKey, callID: UInt64, logger: Logger) -> CallFrameCrypto {
        let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
        crypto.keyRing.install(key, epoch: 0)
        return crypto
    }

    @Test(
        "Three encrypted publishers (two VP8, one H264) and an outsider: every file decodes, no frame missing, A/V and participants in sync, the outsider listed, not recorded"
    )
    func threePublishersAndAnOutsider() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-record")
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))
        let callID: UInt64 = 0x5EC0_0001
        let key = CallKey.random()
        let output = directory.appendingPathComponent("rec")

        let recorder = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "\(callID)",
                "--key-file", try writeKeyFile(key, in: directory), "--out", output.path, "--ice-address",
                bed.hostAddress, "--duration", "30", "--log-level", "warning",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))

        let seconds = 8
        var publishers: [PatternPublisher] = []
        for (index, codec) in [MediaCodec.vp8, .vp8, .h264].enumerated() {
            publishers.append(
                try await .start(
                    on: connection,
                    room: room,
                    display: "user\(index + 1):Publisher \(index + 1)",
                    codec: codec,
                    crypto: makeCrypto(key, callID: callID, logger: logger),
                    seconds: seconds,
                    address: bed.hostAddress,
                    logger: logger
                )
            )
        }
        // Same call, a key the recorder does not have. H264, because the ecall format leaves VP8
        // in clear (ECall iOS does not encrypt it).
        let outsider = try await PatternPublisher.start(
            on: connection,
            room: room,
            display: "mallory:Outsider",
            codec: .h264,
            crypto: makeCrypto(CallKey.random(), callID: callID, logger: logger),
            seconds: seconds,
            address: bed.hostAddress,
            logger: logger
        )
        // The recorder lists a participant once subscribed to it: the media starts after that.
        let everyone = ["user1", "user2", "user3", "mallory"]
        let subscribed = try await waitUntilManifest(output, within: .seconds(20)) { manifest in
            Set(everyone).isSubset(of: manifest.participants.map(\.key))
        }
        #expect(subscribed, "the recorder subscribed to every publisher")
        try await sendAll(publishers + [outsider])
        // The last frames are through Janus and at the recorder before the publishers leave (if
        // some never come, the file checks below say which).
        _ = waitUntilStatus(recorder, within: .seconds(10)) { status in
            (1...3).allSatisfy { index in
                let tracks = status.participants.first { $0.key == "user\(index)" }?.tracks ?? []
                return tracks.count == 2
                    && tracks.allSatisfy { $0.framesReceived >= seconds * ($0.kind == "audio" ? 50 : 30) }
            }
        }
        for publisher in publishers + [outsider] { await publisher.stop() }
        kill(recorder.pid, SIGTERM)
        let lines = readUntilExit(recorder, timeout: .seconds(30))

        let manifest = try RecordingManifest.read(from: output.path)
        #expect(manifest.status == "finished", "output: \(lines)")
        #expect(manifest.callID == "\(callID)" && manifest.room == room && manifest.cryptoFormat == "ecall")
        let outsiderEntry = manifest.notRecorded.first { $0.key == "mallory" }
        #expect(outsiderEntry?.reason.contains("did not decrypt") == true, "\(manifest.notRecorded)")
        let files = try FileManager.default.contentsOfDirectory(atPath: output.path)
        #expect(!files.contains { $0.hasPrefix("mallory") }, "nothing of the outsider is written: \(files)")
        #expect(!files.contains { $0.hasSuffix(".journal") }, "journals removed after a clean finish: \(files)")

        var beepsByParticipant: [[Double]] = []
        for (index, codec) in [MediaCodec.vp8, .vp8, .h264].enumerated() {
            let participant = try #require(manifest.participants.first { $0.key == "user\(index + 1)" })
            #expect(participant.recorded)
            #expect(participant.display == "user\(index + 1):Publisher \(index + 1)")
            #expect(participant.framesUndecryptable == 0)
            #expect(participant.segments.count == 1, "\(participant.segments)")
            let segment = try #require(participant.segments.first)
            let file = try #require(segment.file)
            #expect(file.hasSuffix(codec == .h264 ? ".mkv" : ".webm"))
            // Every written frame was decrypted with the call key (epoch 0), except ECall's VP8,
            // which travels in clear.
            for track in segment.tracks {
                let expected: [UInt64] = track.codec == .vp8 ? [] : [0]
                #expect(track.keyEpochs == expected, "user\(index + 1) \(track.codec): \(track.keyEpochs ?? [])")
            }
            let path = output.appendingPathComponent(file).path
            #expect(try FFmpeg.probeStreams(path).sorted() == [codec == .vp8 ? "vp8" : "h264", "opus"].sorted())
            #expect(try FFmpeg.decodeErrors(path) == "")
            let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(segment.startOffset))
            let first = try #require(analysis.frameNumbers.first)
            #expect(analysis.frameNumbers == Array(first..<(first + analysis.frameNumbers.count)), "no frame missing")
            #expect(analysis.frameNumbers.count >= (seconds - 2) * 30, "\(analysis.frameNumbers.count) frames")
            #expect(analysis.flashTimes.count >= seconds - 2)
            for flash in analysis.flashTimes {
                let beep = analysis.beepTimes.min { abs($0 - flash) < abs($1 - flash) } ?? .infinity
                #expect(abs(beep - flash) <= 0.040, "user\(index + 1): flash at \(flash) s, nearest beep at \(beep) s")
            }
            beepsByParticipant.append(analysis.beepTimes)
        }
        // The same beep (all sources started together) sits at the same call-timeline offset.
        for other in beepsByParticipant.dropFirst() {
            for beep in beepsByParticipant[0] {
                guard let match = other.min(by: { abs($0 - beep) < abs($1 - beep) }), abs(match - beep) < 0.5 else {
                    continue
                }
                #expect(abs(match - beep) <= 0.040, "beep at \(beep) s and \(match) s")
            }
        }
        #expect(try RecordingInspection.report(directory: output.path).contains("NOT RECORDED"))

        try await admin.destroyRoom(room)
        await connection.close()
    }

    /// The recorder subscribes before the publisher sends its first frame (a keyframe), so "all
    /// 20 s" is every frame sent in the 20 s before the kill. `record` holds at most 100 ms of
    /// frames in memory: datagrams wait in the socket for up to 40 ms (receive batching), and the
    /// recorder takes frames in 60 ms batches, handing each batch's journal records to the kernel
    /// at once. So the kill can take those plus the frames still on their way through Janus:
    /// repair must restore at least 19.9 s. The live file also loses its open cluster (at most
    /// half a second): it must play at least 19 s.
    @Test("kill -9 of a recording process after 20 s: the live file plays at least 19 s; repair restores all 20 s")
    func killAndRepair() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-record")
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8", "h264"]))
        let callID: UInt64 = 77
        let key = CallKey.random()
        let output = directory.appendingPathComponent("rec")
        let recorder = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "\(callID)",
                "--key-file", try writeKeyFile(key, in: directory), "--out", output.path, "--ice-address",
                bed.hostAddress, "--log-level", "warning",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))
        let publisher = try await PatternPublisher.start(
            on: connection,
            room: room,
            display: "u1:Ann",
            codec: .vp8,
            crypto: makeCrypto(key, callID: callID, logger: logger),
            seconds: 23,
            address: bed.hostAddress,
            logger: logger
        )
        // The recorder lists a participant once subscribed to it: the media starts after that.
        let subscribed = try await waitUntilManifest(output, within: .seconds(20)) { manifest in
            manifest.participants.contains { $0.key == "u1" }
        }
        #expect(subscribed, "the recorder subscribed to the publisher")
        let sendingStarted = ContinuousClock.now
        let sending = Task { try await sendAll([publisher]) }
        // sendAll sends its first frame 50 ms after it starts.
        let killAfter = 20.0
        // The scenario, not a synchronisation: media flows for `killAfter` seconds, then the kill.
        try await Task.sleep(until: sendingStarted + .milliseconds(50) + .seconds(killAfter))
        recorder.stop()  // SIGKILL
        try await sending.value
        await publisher.stop()

        let live = try RecordingManifest.read(from: output.path)
        #expect(live.status == "recording")
        let liveSegment = try #require(live.participants.first?.segments.first)
        let file = try #require(liveSegment.file)
        let path = output.appendingPathComponent(file).path
        #expect(liveSegment.journals.count == 2)
        let liveAnalysis = try RecordedFileAnalysis(path: path, startOffset: 0)
        let liveSeconds = Double(liveAnalysis.frameNumbers.count) / 30
        #expect(liveSeconds >= killAfter - 1.0, "the live file holds \(liveSeconds) s of video")
        let liveFirst = try #require(liveAnalysis.frameNumbers.first)
        #expect(liveAnalysis.frameNumbers == Array(liveFirst..<(liveFirst + liveAnalysis.frameNumbers.count)))

        let repair = try runProcess(try TestPaths.conclave(), ["recordings", "repair", output.path])
        #expect(repair.succeeded, "repair: \(repair.errorOutput)")
        #expect(try FFmpeg.decodeErrors(path) == "")
        let repaired = try RecordingManifest.read(from: output.path)
        #expect(repaired.status == "repaired")
        let segment = try #require(repaired.participants.first?.segments.first)
        let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(segment.startOffset))
        let first = try #require(analysis.frameNumbers.first)
        #expect(analysis.frameNumbers == Array(first..<(first + analysis.frameNumbers.count)))
        let repairedSeconds = Double(analysis.frameNumbers.count) / 30
        print(
            "kill -9 after \(killAfter) s: the live file holds \(liveSeconds) s, repair restored \(repairedSeconds) s"
        )
        #expect(repairedSeconds >= killAfter - 0.1, "repair restored \(repairedSeconds) s")
        #expect(repairedSeconds >= liveSeconds)
        for flash in analysis.flashTimes {
            let beep = analysis.beepTimes.min { abs($0 - flash) < abs($1 - flash) } ?? .infinity
            #expect(abs(beep - flash) <= 0.040, "flash at \(flash) s, nearest beep at \(beep) s")
        }
        let inspect = try runProcess(try TestPaths.conclave(), ["recordings", "inspect", output.path])
        #expect(inspect.succeeded && inspect.output.contains("u1"), "\(inspect.output)")

        try await admin.destroyRoom(room)
        await connection.close()
    }

    @Test("record refuses to start without a key for an encrypted call")
    func refusesWithoutKey() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-record")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "2", "--out",
                directory.appendingPathComponent("rec").path,
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        #expect(!result.succeeded)
        #expect(result.errorOutput.contains("no call key"), "\(result.errorOutput)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("rec").path))
    }
}
