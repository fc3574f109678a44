import ConclaveTestSupport
import Foundation
import JanusTestBed
import Testing

/// Chromium (the page), Conclave (`conclave join`) and aiortc in one plain Janus room, with a
/// Conclave recorder (`conclave record`): every participant receives every other.
///
/// Each of the three stacks publishes its own video and Opus audio (Chromium its fake camera and
/// microphone, Conclave its pattern and tone, aiortc its synthetic tracks) and subscribes to the
/// other two, and the recorder writes a file for each. The call is plain (`--crypto none`): the
/// point is that three WebRTC stacks with their own RTCP, header extensions and pacing meet in one
/// room. Everything is waited for by deadline: the page's promise, Conclave's status lines, the
/// aiortc subscriber's report and the recorder's exit; the call lasts about 20 seconds.
///
/// Chromium runs through `TestChromium`, which keeps it off the network: `--host-resolver-rules`
/// leave it nothing but localhost and the test bed's Janus, and the page's peer connections
/// have no STUN server.
@Suite(.serialized) struct ThreeWayCallTests {
    static let script = TestPaths.packageRoot.appendingPathComponent("Tests/Interop/aiortc_janus.py").path
    /// The displays of the three publishers, as `USERID:NAME`.
    static let conclaveDisplay = "u1:Conclave"
    static let chromiumDisplay = "chromium:Chromium"
    /// aiortc_janus.py's publisher display.
    static let aiortcDisplay = "9:aiortc"
    /// How long the recorder and the aiortc subscriber run, side by side, at the end of the call.
    static let lastPhaseSeconds = 10

    @Test func everyParticipantReceivesEveryOther() async throws {
        let bed = try TestJanus.shared()
        let directory = try TestPaths.temporaryDirectory("conclave-threeway")
        let room = TestJanus.uniqueRoomID()
        let created = try runProcess(
            try TestPaths.conclave(),
            ["rooms", "create", "--room", "\(room)", "--codec", "vp8", "--janus", bed.webSocketURL]
        )
        try #require(created.succeeded, "rooms create: \(created.errorOutput)")

        // Conclave: publishes its pattern and tone, subscribes to everyone, a status line a second.
        let conclave = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "join", "--room", "\(room)", "--call-id", "1", "--crypto", "none", "--janus", bed.webSocketURL,
                "--ice-address", bed.hostAddress, "--display", Self.conclaveDisplay, "--codec", "vp8", "--video",
                "pattern", "--audio", "tone", "--width", "320", "--height", "240", "--no-window", "--speaker",
                "none", "--status", "json", "--duration", "60", "--data-dir",
                directory.appendingPathComponent("data-join").path,
            ]
        )
        defer { conclave.stop() }

        // aiortc's publisher (its own synthetic video and audio).
        let aiortc = try BackgroundProcess(
            try TestPaths.python(),
            [
                Self.script, "publish", "--janus", bed.webSocketURL, "--room", "\(room)", "--address", bed.hostAddress,
                "--duration", "60",
            ]
        )
        defer { aiortc.stop() }
        let aiortcFeed = try #require(try Self.jsonLine(from: aiortc, with: "feed")["feed"] as? NSNumber).uint64Value

        // Chromium: publishes its fake camera and microphone, subscribes to everyone.
        let chromium = try TestChromium(janusAddress: bed.janusAddress)
        defer { chromium.stop() }
        try await chromium.open(
            parameters: [
                "server": bed.webSocketURL, "room": "\(room)", "display": Self.chromiumDisplay, "codec": "vp8",
                "width": "320", "height": "240",
            ]
        )

        // Chromium decodes video and plays audio from both other publishers.
        func track(_ display: String, _ kind: String) -> String {
            "Object.keys(s.tracks).find(m => s.tracks[m].kind == '\(kind)' && s.tracks[m].display == '\(display)')"
        }
        let others = [Self.conclaveDisplay, Self.aiortcDisplay]
        let pageCondition = others.map {
            "(s.inbound[\(track($0, "video"))] || {}).framesDecoded >= 30"
                + " && (s.inbound[\(track($0, "audio"))] || {}).totalSamplesReceived > 0"
        }
        let page = try await chromium.waitFor(
            "s.published && " + pageCondition.joined(separator: " && "),
            timeout: .seconds(40)
        )
        var chromiumDecoded: [String] = []
        for display in others {
            let mid = try #require(page.tracks.first { $0.value.kind == "video" && $0.value.display == display }?.key)
            let counters = try #require(page.inbound[mid])
            #expect(counters.codec?.lowercased() == "video/vp8", "Chromium receives from \(display): \(counters)")
            chromiumDecoded.append("\(display) \(counters.framesDecoded)")
        }
        #expect(page.errors.isEmpty, "page errors: \(page.errors)")
        let chromiumFeed = try await chromium.evaluate("conclavePeer.state.publisherID", as: UInt64.self)

        // Conclave receives both other publishers, in clear.
        let status = try Self.status(of: conclave, within: .seconds(30)) { status in
            status.feed != nil
                && ["chromium", "9"].allSatisfy { id in
                    status.participants.contains { $0.id == id && $0.videoFrames >= 30 && $0.audioFrames >= 50 }
                }
        }
        for participant in status.participants where ["chromium", "9"].contains(participant.id) {
            #expect(participant.undecryptable == 0, "Conclave from \(participant.id): \(participant)")
        }
        #expect(
            status.participants.first { $0.id == "9" }?.feed == aiortcFeed,
            "Conclave sees aiortc's feed \(aiortcFeed): \(status.participants)"
        )
        let conclaveFeed = try #require(status.feed)

        // Last phase, side by side: the recorder records the three publishers while aiortc
        // subscribes to the other two and decodes what arrives.
        let recording = directory.appendingPathComponent("recording")
        let recorderArguments = [
            "record", "--room", "\(room)", "--call-id", "1", "--crypto", "none", "--janus", bed.webSocketURL,
            "--ice-address", bed.hostAddress, "--out", recording.path, "--duration", "\(Self.lastPhaseSeconds)",
            "--status", "json", "--data-dir", directory.appendingPathComponent("data-record").path,
        ]
        let conclaveBinary = try TestPaths.conclave()
        let recorder = Task.detached {
            try runProcess(conclaveBinary, recorderArguments, timeout: .seconds(60))
        }
        // One aiortc subscriber per feed: aiortc routes the RTP of a bundle with several video
        // m-lines of one payload type to the first of them, so it cannot take both in one.
        let python = try TestPaths.python()
        let subscribers = try [chromiumFeed, conclaveFeed].map { feed in
            try BackgroundProcess(
                python,
                [
                    Self.script, "subscribe", "--janus", bed.webSocketURL, "--room", "\(room)", "--feed", "\(feed)",
                    "--address", bed.hostAddress, "--duration", "\(Self.lastPhaseSeconds)",
                ]
            )
        }
        defer { for subscriber in subscribers { subscriber.stop() } }
        var aiortcDecoded: [String] = []
        for (name, subscriber) in zip(["Chromium", "Conclave"], subscribers) {
            let counts = try Self.jsonLine(from: subscriber, with: "video_frames")
            #expect((counts["video_frames"] as? Int ?? 0) >= 60, "aiortc decoded from \(name): \(counts)")
            #expect((counts["audio_frames"] as? Int ?? 0) >= 100, "aiortc decoded from \(name): \(counts)")
            #expect(counts["decode_errors"] as? Int == 0, "aiortc from \(name): \(counts)")
            aiortcDecoded.append("\(name) \(counts["video_frames"] ?? 0)")
        }

        let recorded = try await recorder.value
        #expect(recorded.succeeded, "conclave record: \(recorded.errorOutput)")
        let manifest = try JSONDecoder().decode(
            RecordingIndex.self,
            from: Data(contentsOf: recording.appendingPathComponent("manifest.json"))
        )
        var figures: [String] = []
        for (name, userID) in [("Chromium", "chromium"), ("Conclave", "u1"), ("aiortc", "9")] {
            let participant = try #require(
                manifest.participants.first { $0.userID == userID },
                "no recording of \(name): \(manifest)"
            )
            let file = recording.appendingPathComponent(try #require(participant.segments.first?.file)).path
            let frames = try FFmpeg.frameCount(file)
            #expect(frames >= 60, "\(name): \(frames) video frames in \(Self.lastPhaseSeconds) s of recording")
            let errors = try FFmpeg.decodeErrors(file, everyFrame: true)
            #expect(errors.isEmpty, "decoding \(file): \(errors)")
            let streams = try FFmpeg.probeStreams(file)
            #expect(streams.contains("vp8") && streams.contains("opus"), "\(name)'s streams: \(streams)")
            figures.append("\(name) \(frames)")
        }
        print(
            "three-way call: Chromium decoded \(chromiumDecoded.joined(separator: ", ")); aiortc decoded \(aiortcDecoded.joined(separator: ", "));"
                + " recorded video frames: \(figures.joined(separator: ", "))"
        )
        _ = try await chromium.evaluate("conclavePeer.leave()")
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Helpers

    /// Reads JSON lines from `peer` until one has `key`.
    static func jsonLine(from peer: BackgroundProcess, with key: String) throws -> [String: Any] {
        for _ in 0..<20 {
            let text = try peer.readLine(timeout: .seconds(40))
            if let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                object[key] != nil
            {
                return object
            }
        }
        throw SubprocessError(description: "the peer never printed \(key)")
    }

    /// The first `--status json` line of `process` that satisfies `condition`, read as they come.
    static func status(
        of process: BackgroundProcess,
        within limit: Duration,
        until condition: (JoinStatus) -> Bool
    ) throws -> JoinStatus {
        let deadline = ContinuousClock.now + limit
        var last: JoinStatus?
        while ContinuousClock.now < deadline {
            let line = try process.readLine(timeout: deadline - ContinuousClock.now)
            guard let status = try? JSONDecoder().decode(JoinStatus.self, from: Data(line.utf8)) else { continue }
            if condition(status) { return status }
            last = status
        }
        throw SubprocessError(
            description: "no status within \(limit) met the condition; last: \(String(describing: last))"
        )
    }
}

/// The parts of a `conclave join --status json` line this test reads.
struct JoinStatus: Decodable {
    struct Participant: Decodable {
        var id: String
        var feed: UInt64?
        var audioFrames: Int
        var videoFrames: Int
        var undecryptable: Int
    }

    var feed: UInt64?
    var participants: [Participant]
}

/// The parts of a recording's manifest.json this test reads.
struct RecordingIndex: Decodable {
    struct Participant: Decodable {
        struct Segment: Decodable { var file: String }
        var userID: String?
        var segments: [Segment]
    }

    var participants: [Participant]
}
