import ConclaveCall
import ConclaveCore
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import Logging
import Testing

@testable import ConclaveRecorder

#if canImport(Glibc)
    import Glibc
#endif

/// What `conclave record` tells a person while it runs, and what it leaves behind when it cannot
/// start.
@Suite("conclave record status and start-up", .serialized)
struct RecordStatusTests {

    /// Decodes a `--status json` line, nil for other output.
    func status(_ line: String) -> RecordingStatus? {
        guard line.hasPrefix("{") else { return nil }
        return try? JSONDecoder().decode(RecordingStatus.self, from: Data(line.utf8))
    }

    @Test("record shows every second what it records: participants, frames written, disk free; then the final state")
    func liveStatus() async throws {
        let bed = try TestJanus.shared()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let directory = try TestPaths.temporaryDirectory("conclave-record-status")
        defer { try? FileManager.default.removeItem(at: directory) }
        let connection = try await JanusConnection.connect(to: bed.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["vp8"]))
        let output = directory.appendingPathComponent("rec").path

        let recorder = try BackgroundProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "77", "--crypto", "none",
                "--out", output, "--ice-address", bed.hostAddress, "--status", "json", "--duration", "60",
                "--log-level", "warning",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        )
        defer { recorder.stop() }
        #expect(try recorder.readLine(timeout: .seconds(20)).hasPrefix("recording room"))

        let publisher = try await PatternPublisher.start(
            on: connection,
            room: room,
            display: "alice:Alice",
            codec: .vp8,
            crypto: nil,
            seconds: 8,
            address: bed.hostAddress,
            logger: logger
        )
        let sending = Task { try await sendAll([publisher]) }

        // Status lines until one shows Alice's file being written.
        var seen: RecordingStatus?
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            guard let line = try? recorder.readLine(timeout: .seconds(3)), let status = status(line) else { continue }
            #expect(status.state == "recording" && status.callId == "77" && status.room == "\(room)")
            #expect(status.diskFreeBytes.map { $0 > 0 } == true, "disk free is reported")
            if let alice = status.participants.first(where: { $0.key == "alice" }),
                alice.tracks.contains(where: { $0.kind == "video" && $0.framesWritten > 0 }), alice.bytes > 0
            {
                seen = status
                break
            }
        }
        let live = try #require(seen, "no status line showed alice's video being written")
        #expect(live.participants.first { $0.key == "alice" }?.file?.hasPrefix("alice") == true)

        try await sending.value
        await publisher.stop()
        kill(recorder.pid, SIGTERM)
        let lines = readUntilExit(recorder, timeout: .seconds(30))
        let final = try #require(lines.compactMap(status).last, "no final status line: \(lines)")
        #expect(final.state == "finished")
        let manifest = try RecordingManifest.read(from: output)
        let written = manifest.participants.first { $0.key == "alice" }?.segments.last?.tracks
            .first { $0.kind == .video }?.framesWritten
        #expect(
            written != nil
                && written
                    == final.participants.first { $0.key == "alice" }?.tracks
                    .first { $0.kind == "video" }?.framesWritten
        )
        await connection.close()
    }

    @Test("The status table names each participant's tracks, the problems and a low disk")
    func terminalTable() throws {
        var manifest = RecordingManifest(
            callID: "9",
            room: 5,
            janusURL: nil,
            recorderVersion: "test",
            cryptoFormat: "none",
            keyEpochs: [],
            startTime: "2026-01-01T00:00:00Z",
            status: "recording",
            participants: [],
            notRecorded: [.init(key: "mallory", feedIDs: [3], display: "Mallory", reason: "no frame decrypted")]
        )
        manifest.participants.append(
            .init(
                key: "bob",
                feedIDs: [2],
                display: "bob:Bob",
                userID: "bob",
                recorded: true,
                reason: nil,
                framesUndecryptable: 0,
                segments: [
                    .init(
                        index: 1,
                        feedID: 2,
                        startReason: "joined",
                        file: "bob-1.webm",
                        startOffset: 0,
                        endOffset: 2,
                        error: nil,
                        journals: [],
                        tracks: [
                            .init(
                                kind: .video,
                                codec: .vp8,
                                width: 320,
                                height: 240,
                                firstTimestamp: 0,
                                lastTimestamp: 2,
                                framesReceived: 61,
                                framesWritten: 60,
                                framesLost: 1,
                                framesUndecryptable: 0,
                                keyEpochs: [],
                                framesDroppedBeforeKeyframe: 1,
                                gaps: 0,
                                gapSeconds: 0,
                                error: "disk full"
                            )
                        ]
                    )
                ]
            )
        )
        let status = RecordingStatus(
            manifest: manifest,
            directory: "/nonexistent",
            elapsed: .seconds(3),
            layers: [2: "medium", 9: "low"]
        )
        let text = status.terminalText()
        #expect(text.contains("bob:Bob") && text.contains("video vp8 medium") && text.contains("60/61"), "\(text)")
        // The layer of the feed being recorded, in the JSON status too.
        #expect(status.participants.map(\.layer) == ["medium"])
        #expect(String(decoding: try JSONEncoder().encode(status), as: UTF8.self).contains(#""layer":"medium""#))
        #expect(text.contains("PROBLEM: bob video: disk full"), "\(text)")
        #expect(text.contains("not recorded: Mallory: no frame decrypted"), "\(text)")
        #expect(status.diskFreeBytes == nil && text.contains("disk free unknown"))
    }

    @Test("A recorder that cannot join (no such room, no Janus) leaves no recording folder behind")
    func nothingWrittenBeforeJoining() throws {
        let bed = try TestJanus.shared()
        let directory = try TestPaths.temporaryDirectory("conclave-record-nojoin")
        defer { try? FileManager.default.removeItem(at: directory) }
        for janus in [bed.webSocketURL, "ws://127.0.0.1:9"] {
            let output = directory.appendingPathComponent("rec-\(janus.hasSuffix(":9") ? "nojanus" : "noroom")").path
            let result = try runProcess(
                try TestPaths.conclave(),
                [
                    "record", "--janus", janus, "--room", "\(TestJanus.uniqueRoomID())", "--call-id", "1",
                    "--crypto", "none", "--out", output, "--ice-address", bed.hostAddress, "--duration", "5",
                ],
                environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path],
                timeout: .seconds(60)
            )
            #expect(!result.succeeded, "\(janus): \(result.output)")
            let errorLines = result.errorOutput.split(separator: "\n").filter { $0.hasPrefix("Error") }
            #expect(errorLines.count == 1, "one clear line: \(result.errorOutput)")
            #expect(!FileManager.default.fileExists(atPath: output), "\(janus): \(output) was created")
        }
    }

    @Test("record --out naming an existing recording refuses before connecting, and leaves its manifest as it was")
    func existingRecordingIsRefused() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-record-existing")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("rec").path
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        let manifest = Data(#"{"callID":"earlier"}"#.utf8)
        try manifest.write(to: URL(fileURLWithPath: output + "/manifest.json"))
        // No Janus listens on port 9: the refusal must come first.
        let result = try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "1", "--crypto", "none",
                "--out", output, "--duration", "5",
            ],
            environment: ["CONCLAVE_HOME": directory.appendingPathComponent("home").path],
            timeout: .seconds(30)
        )
        #expect(!result.succeeded)
        #expect(result.errorOutput.contains("already holds a recording"), "\(result.errorOutput)")
        #expect(!result.errorOutput.contains("connect"), "refused before connecting: \(result.errorOutput)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output + "/manifest.json")) == manifest)
    }
}
