import ConclaveAV
import ConclaveCore
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

/// A remote publisher (Janus `add_remote_publisher`) fed plain RTP from a UDP socket: Opus packets
/// whose sequence numbers and timestamps jump, wrap, repeat and go back, as a broken or hostile
/// client could send them.
final class HostileRTPSender: @unchecked Sendable {
    // @unchecked: the socket and target are set in init and only read afterwards.
    let feedID: UInt64?
    private let socket: Int32
    private var target = sockaddr_in()

    init(admin: VideoRoomHandle, room: UInt64, display: String, janusAddress: String) async throws {
        let (data, _) = try await admin.request(
            [
                "request": "add_remote_publisher", "room": .id(room), "display": .string(display),
                "iface": .string(janusAddress),
                "streams": [["type": "audio", "mindex": 0, "mid": "0", "codec": "opus"]],
            ],
            name: "add_remote_publisher"
        )
        guard let number = data["port"]?.intValue, let port = UInt16(exactly: number) else {
            throw SubprocessError(description: "add_remote_publisher gave no port: \(data)")
        }
        feedID = data["id"]?.uint64Value
        socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { throw SubprocessError(description: "no UDP socket: \(errno)") }
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = port.bigEndian
        guard inet_pton(AF_INET, janusAddress, &target.sin_addr) == 1 else {
            throw SubprocessError(description: "bad address \(janusAddress)")
        }
    }

    deinit { _ = Glibc.close(socket) }

    func send(sequence: UInt16, timestamp: UInt32, payload: [UInt8]) {
        var packet: [UInt8] = [0x80, 111]
        packet += [UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        packet += withUnsafeBytes(of: timestamp.bigEndian, Array.init)
        // Janus maps a remote publisher's packets to its streams by SSRC: 1000 is the first (mindex 0).
        packet += withUnsafeBytes(of: UInt32(1_000).bigEndian, Array.init)
        packet += payload
        var address = target
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                packet.withUnsafeBytes { bytes in
                    sendto(
                        socket,
                        bytes.baseAddress,
                        bytes.count,
                        0,
                        socketAddress,
                        socklen_t(MemoryLayout<sockaddr_in>.size)
                    )
                }
            }
        }
    }

    /// The hostile packet sequence: (sequence number, timestamp) pairs, one every 2 ms, cycling
    /// through normal stretches and every kind of misbehaviour. Sequence numbers only jump
    /// forward (or back a little), as anything else is dropped by SRTP's replay check between
    /// Janus and the recorder; timestamps do anything.
    static func schedule(count: Int) -> [(UInt16, UInt32)] {
        var packets: [(UInt16, UInt32)] = []
        var sequence: UInt16 = 100
        var timestamp: UInt32 = 5_000
        func normal(_ n: Int) {
            for _ in 0..<n {
                sequence &+= 1
                timestamp &+= 960
                packets.append((sequence, timestamp))
            }
        }
        var phase = 0
        while packets.count < count {
            normal(10)
            switch phase % 9 {
            case 0:
                // The probe's jump, 500 times in a row: some 4300 of them overflowed the
                // timeline's microseconds and killed the recorder.
                for _ in 0..<500 {
                    sequence &+= 1
                    timestamp &+= 0x7FFF_FFFF
                    packets.append((sequence, timestamp))
                }
            case 1:
                sequence &+= 10_000  // a sequence jump
            case 2:
                timestamp = 0xFFFF_FF00  // about to wrap
                sequence &+= 30_000  // forward, so the sequence wraps every few cycles
            case 3:
                // Repeats: the last packet three times more.
                let last = packets[packets.count - 1]
                packets += [last, last, last]
            case 4:
                // Reordered pairs.
                normal(6)
                for index in stride(from: packets.count - 6, to: packets.count - 1, by: 2) {
                    packets.swapAt(index, index + 1)
                }
            case 5:
                timestamp &-= 1 << 30  // the clock goes back
            case 6:
                // The sequence goes back (further back, SRTP's replay check would drop the
                // stream for minutes, which tests nothing of the recorder).
                sequence &-= 50
            case 7:
                // Random timestamps on consecutive sequence numbers.
                for index in 0..<10 {
                    sequence &+= 1
                    packets.append((sequence, UInt32(truncatingIfNeeded: index &* 0x9E37_79B9 &+ phase &* 0x7F4A_7C15)))
                }
            default:
                timestamp &+= 0x8000_0000  // exactly half the timestamp space
            }
            phase += 1
        }
        return Array(packets.prefix(count))
    }
}

@Suite("A hostile sender while recording through Janus", .serialized)
struct HostileSenderTests {

    /// Polls the recording's manifest until `condition` holds, failing after `timeout`.
    func waitForManifest(
        in directory: URL,
        timeout: Duration,
        _ what: String,
        _ condition: (RecordingManifest) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var last: RecordingManifest?
        while ContinuousClock.now < deadline {
            last = try? RecordingManifest.read(from: directory.path)
            if let last, condition(last) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        let participants = last?.participants.map { "\($0.key): \($0.segments.count) segments" } ?? []
        throw SubprocessError(description: "timed out waiting for \(what); the manifest lists \(participants)")
    }

    @Test(
        "A publisher whose RTP sequence numbers and timestamps jump, wrap, repeat and reorder: the recorder keeps recording a well-behaved participant with no frame missing, and finishes cleanly"
    )
    func hostilePublisherBesideAGoodOne() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-hostile")
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))
        let output = directory.appendingPathComponent("rec")

        let recorder = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "77", "--crypto", "none",
                "--out", output.path, "--ice-address", bed.hostAddress, "--duration", "60", "--log-level", "warning",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))

        let seconds = 8
        let good = try await PatternPublisher.start(
            on: connection,
            room: room,
            display: "good:Well Behaved",
            codec: .vp8,
            crypto: nil,
            seconds: seconds,
            address: bed.hostAddress,
            logger: logger
        )
        let hostile = try await HostileRTPSender(
            admin: admin,
            room: room,
            display: "hostile:Mallory",
            janusAddress: bed.janusAddress
        )
        // The hostile stream runs from before the good one starts until after it ends.
        let packets = HostileRTPSender.schedule(count: (seconds + 6) * 500)
        let hostileTask = Task {
            let clock = ContinuousClock()
            let start = clock.now
            for (index, packet) in packets.enumerated() {
                if Task.isCancelled { break }
                // Pacing, not synchronisation: a packet every 2 ms, the stream's rate.
                try? await clock.sleep(
                    until: start.advanced(by: .milliseconds(2 * index)),
                    tolerance: .milliseconds(1)
                )
                hostile.send(
                    sequence: packet.0,
                    timestamp: packet.1,
                    payload: [0xF8] + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 60)
                )
            }
        }
        // The recorder has subscribed once the hostile stream's frames reach it, and it knows the
        // good publisher (which joined first) by then.
        try await waitForManifest(in: output, timeout: .seconds(20), "the hostile publisher's first segment") {
            manifest in
            manifest.participants.contains { $0.key == "hostile" && !$0.segments.isEmpty }
                && manifest.participants.contains { $0.key == "good" }
        }
        try await sendAll([good])
        // The hostile stream goes on for a few seconds more, which also lets the good
        // publisher's last frames through Janus before it leaves.
        await hostileTask.value
        await good.stop()
        // Its leaving closes its segment, which the manifest shows within a tick.
        try await waitForManifest(in: output, timeout: .seconds(20), "the good publisher's closed segment") {
            manifest in
            manifest.participants.first { $0.key == "good" }?.segments.first.map {
                $0.file != nil && $0.journals.isEmpty
            } == true
        }
        kill(recorder.pid, SIGTERM)
        let lines = readUntilExit(recorder, timeout: .seconds(30))

        let manifest = try RecordingManifest.read(from: output.path)
        #expect(manifest.status == "finished", "the recorder did not finish cleanly: \(lines)")
        let participant = try #require(manifest.participants.first { $0.key == "good" })
        #expect(participant.recorded)
        #expect(participant.segments.count == 1, "\(participant.segments)")
        let segment = try #require(participant.segments.first)
        for track in segment.tracks {
            #expect(track.framesLost == 0, "\(track.kind): \(track.framesLost) frames lost")
            #expect(track.framesWritten == track.framesReceived, "\(track.kind)")
            #expect(track.timestampJumpFree, "\(track.kind): gaps \(track.gaps)")
            #expect(track.timestampJumps == 0 && track.framesRejected == 0, "\(track)")
        }
        let path = output.appendingPathComponent(try #require(segment.file)).path
        #expect(try FFmpeg.decodeErrors(path) == "")
        let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(segment.startOffset))
        let first = try #require(analysis.frameNumbers.first)
        #expect(analysis.frameNumbers == Array(first..<(seconds * 30)), "every frame from the first to the last")
        #expect(analysis.frameNumbers.count >= (seconds - 1) * 30, "\(analysis.frameNumbers.count) frames")
        let audio = try #require(segment.tracks.first { $0.kind == .audio })
        #expect(audio.framesWritten >= (seconds - 1) * 50 && audio.framesWritten <= seconds * 50)
        #expect(analysis.audioPackets == audio.framesWritten)

        // The hostile stream's files, if any, verify; otherwise the manifest says why.
        let mallory = try #require(manifest.participants.first { $0.key == "hostile" })
        #expect(!mallory.segments.isEmpty)
        // Most of its frames get through SRTP and the jitter buffer to the muxer (thousands of
        // the 7000 sent, repeats and reordered ones excepted), so its timestamps are tested there.
        let hostileFrames = mallory.segments.flatMap(\.tracks).reduce(0) { $0 + $1.framesReceived }
        #expect(hostileFrames >= 4_500, "\(hostileFrames) frames of the hostile stream reached the recorder")
        // The manifest tells a person what the hostile stream did: jumps, and refused repeats.
        let malloryTracks = mallory.segments.flatMap(\.tracks)
        #expect(malloryTracks.reduce(0) { $0 + ($1.timestampJumps ?? 0) } > 0, "\(malloryTracks)")
        #expect(malloryTracks.reduce(0) { $0 + ($1.framesRejected ?? 0) } > 0, "\(malloryTracks)")
        for track in malloryTracks {
            // Placed on the call timeline within the recording, whatever its timestamps said.
            #expect((track.firstTimestamp ?? 0) >= 0 && (track.lastTimestamp ?? 0) < 60, "\(track)")
        }
        for segment in mallory.segments {
            guard let file = segment.file else {
                #expect(segment.error != nil || segment.tracks.allSatisfy { $0.framesWritten == 0 }, "\(segment)")
                continue
            }
            let demuxer = try MediaDemuxer(path: output.appendingPathComponent(file).path)
            var packetCount = 0
            while try demuxer.readPacket() != nil { packetCount += 1 }
            #expect(packetCount == segment.tracks.reduce(0) { $0 + $1.framesWritten }, "\(file)")
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: output.path)
        #expect(!files.contains { $0.hasSuffix(".journal") }, "every segment verified at the finish: \(files)")

        try await admin.destroyRoom(room)
        await connection.close()
    }
}

extension RecordingManifest.Track {
    /// A well-behaved stream has no gap longer than a frame or two.
    fileprivate var timestampJumpFree: Bool { gapSeconds < 0.5 }
}
