import ConclaveAV
import ConclaveCore
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import RecordingTestBed
import Testing

@Suite("Recording engine", .serialized)
struct CallRecorderTests {
    let start: Int64 = 1_763_000_000_000_000

    func segmentFile(_ manifest: RecordingManifest, _ key: String, _ index: Int = 1) throws -> RecordingManifest.Segment
    {
        let participant = try #require(manifest.participants.first { $0.key == key }, "participant \(key)")
        return try #require(participant.segments.first { $0.index == index }, "segment \(index) of \(key)")
    }

    @Test(
        "Two participants (VP8, H264), one joining late with a skewed clock: files decode, no frame missing, beeps and flashes on one timeline"
    )
    func twoParticipantsInSync() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: 4, start: 300_000)
        // Bob's sender clock is 7 s off the recorder's and his network 60 ms slower.
        let bob = SimulatedPublisher(
            feedID: 22,
            display: "u2:Bob",
            codec: .h264,
            seconds: 3,
            start: 1_300_000,
            clockError: 7_000_000,
            delay: 60_000,
            videoBase: 0x1234,
            audioBase: 0xFFFF_F000
        )
        recorder.participantJoined(feedID: 11, display: ann.display, at: start)
        recorder.participantJoined(feedID: 22, display: bob.display, at: start + 1_000_000)
        play(try ann.events(recordingStart: start) + bob.events(recordingStart: start), into: recorder, from: start)
        let manifest = recorder.finish(at: start + 6_000_000)
        #expect(manifest.status == "finished")
        #expect(manifest.callID == "4242" && manifest.room == 1234 && manifest.cryptoFormat == "ecall")

        for (publisher, key, ext) in [(ann, "u1", "webm"), (bob, "u2", "mkv")] {
            let segment = try segmentFile(manifest, key)
            let file = try #require(segment.file)
            #expect(file.hasSuffix("." + ext))
            let path = directory.appendingPathComponent(file).path
            #expect(
                try FFmpeg.probeStreams(path).sorted() == [publisher.codec == .vp8 ? "vp8" : "h264", "opus"].sorted()
            )
            #expect(try FFmpeg.decodeErrors(path) == "")
            #expect(segment.journals.isEmpty, "journals of a verified clean finish are removed")
            let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(segment.startOffset))
            #expect(analysis.frameNumbers == Array(0..<(publisher.seconds * 30)))
            #expect(analysis.audioPackets == publisher.seconds * 50)
            #expect(analysis.flashTimes.count == publisher.seconds)
            #expect(analysis.beepTimes.count == publisher.seconds)
            for (flash, beep) in zip(analysis.flashTimes, analysis.beepTimes) {
                #expect(abs(flash - beep) <= 0.040, "\(key): flash at \(flash) s, beep at \(beep) s")
            }
            // Each beep sits where it was captured on the call timeline (plus the fastest delay,
            // which the recorder cannot see and which is the same for everyone here).
            for (second, beep) in analysis.beepTimes.enumerated() {
                let expected = Double(publisher.start) / 1e6 + Double(second)
                #expect(
                    abs(beep - expected - Double(ann.delay) / 1e6) <= 0.040,
                    "\(key): beep \(second) at \(beep) s, captured at \(expected) s"
                )
            }
            let participant = try #require(manifest.participants.first { $0.key == key })
            #expect(participant.userID == key)
            #expect(participant.display == publisher.display)
            #expect(participant.recorded)
            let video = try #require(segment.tracks.first { $0.kind == .video })
            #expect(video.framesWritten == publisher.seconds * 30)
            #expect(video.width == 320 && video.height == 240)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!files.contains { $0.hasSuffix(".journal") })
        #expect(try RecordingManifest.read(from: directory.path) == manifest)
    }

    @Test(
        "A recorder that dies without finishing leaves a playable live file; repair rebuilds every frame from the journals"
    )
    func crashAndRepair() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: 4)
        recorder.participantJoined(feedID: 11, display: ann.display, at: start)
        play(try ann.events(recordingStart: start), into: recorder, from: start)
        // A crash: nothing is closed, no trailer, no final manifest. Keep the recorder alive so its
        // deinit cannot tidy up.
        _ = Unmanaged.passRetained(recorder)

        let live = try RecordingManifest.read(from: directory.path)
        #expect(live.status == "recording")
        let liveSegment = try segmentFile(live, "u1")
        let file = try #require(liveSegment.file)
        #expect(liveSegment.journals.count == 2)
        let path = directory.appendingPathComponent(file).path
        #expect(try FFmpeg.probeStreams(path).sorted() == ["opus", "vp8"])

        let outcome = try RecordingRepair.repair(directory: directory.path, recorderVersion: "test")
        #expect(outcome.rebuilt == [file])
        #expect(outcome.problems.isEmpty, "\(outcome.problems)")
        #expect(try FFmpeg.decodeErrors(path) == "")
        let repaired = try RecordingManifest.read(from: directory.path)
        #expect(repaired.status == "repaired")
        let segment = try segmentFile(repaired, "u1")
        let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(segment.startOffset))
        #expect(analysis.frameNumbers == Array(0..<120))
        #expect(analysis.audioPackets == 200)
        for (flash, beep) in zip(analysis.flashTimes, analysis.beepTimes) {
            #expect(abs(flash - beep) <= 0.040)
        }
        #expect(try RecordingInspection.report(directory: directory.path).contains("video vp8 320x240"))
    }

    @Test("Frames the receiver lost are counted per track, and counted again by a repair from the journals")
    func lostFramesSurviveRepair() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: 4)
        recorder.participantJoined(feedID: 11, display: ann.display, at: start)
        // Audio frames 50...54 and video frames 40...42 never arrive; the frames after them say so.
        func index(_ kind: MediaKind, _ frame: EncodedFrame) -> Int {
            kind == .audio
                ? Int((frame.rtpTimestamp &- ann.audioBase) / 960) : Int((frame.rtpTimestamp &- ann.videoBase) / 3000)
        }
        let events = try ann.events(recordingStart: start).filter { event in
            guard case .frame(_, let kind, let frame, _) = event else { return true }
            return kind == .audio ? !(50...54).contains(index(kind, frame)) : !(40...42).contains(index(kind, frame))
        }
        play(events, into: recorder, from: start) { kind, frame in
            switch (kind, index(kind, frame)) {
            case (.audio, 55): 5
            case (.video, 43): 3
            default: 0
            }
        }
        _ = Unmanaged.passRetained(recorder)  // a crash: nothing is closed
        _ = try RecordingRepair.repair(directory: directory.path, recorderVersion: "test")
        let repaired = try segmentFile(try RecordingManifest.read(from: directory.path), "u1")
        #expect(repaired.tracks.first { $0.kind == .audio }?.framesLost == 5)
        #expect(repaired.tracks.first { $0.kind == .video }?.framesLost == 3)
        let report = try RecordingInspection.report(directory: directory.path)
        #expect(report.contains("lost 5"), "\(report)")
        #expect(report.contains("lost 3"), "\(report)")
    }

    @Test("An audio gap keeps its real length; a long silence and a resolution change start new segments")
    func gapsAndSegments() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let timing = RecorderTiming(longGap: .seconds(3))
        let recorder = try makeRecorder(directory: directory, start: start, timing: timing)
        // 3 s of media with 1 s of audio missing in the middle (muted: no packets, timestamps jump).
        let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: 3)
        recorder.participantJoined(feedID: 11, display: ann.display, at: start)
        let events = try ann.events(recordingStart: start).filter { event in
            if case .frame(_, .audio, let frame, _) = event {
                let offset = frame.rtpTimestamp &- ann.audioBase
                return offset < 48_000 || offset >= 96_000
            }
            return true
        }
        play(events, into: recorder, from: start)
        // 5 s later the same feed comes back at a smaller size: new segment (long gap), then a
        // keyframe of a third size: another segment (resolution change).
        let later = SimulatedPublisher(
            feedID: 11,
            display: "u1:Ann",
            codec: .vp8,
            width: 160,
            height: 120,
            seconds: 2,
            start: 8_000_000
        )
        let third = SimulatedPublisher(
            feedID: 11,
            display: "u1:Ann",
            codec: .vp8,
            width: 320,
            height: 180,
            seconds: 2,
            start: 10_100_000,
            videoBase: 777,
            audioBase: 999,
            withVideo: true
        )
        play(
            try later.events(recordingStart: start) + third.events(recordingStart: start),
            into: recorder,
            from: start + 7_900_000
        )
        let manifest = recorder.finish(at: start + 13_000_000)
        let participant = try #require(manifest.participants.first)
        #expect(participant.segments.count == 3)
        #expect(participant.segments.map(\.startReason).first == "joined")
        #expect(participant.segments.dropFirst().first?.startReason.hasPrefix("gap") == true)
        #expect(participant.segments.last?.startReason == "resolution 160x120 -> 320x180")

        let first = participant.segments[0]
        let audio = try #require(first.tracks.first { $0.kind == .audio })
        #expect(audio.gaps == 1)
        #expect(abs(audio.gapSeconds - 1.02) < 0.001)
        #expect(audio.framesLost == 0, "a muted second is a gap, not a loss")
        #expect(audio.framesWritten == 100)
        let path = directory.appendingPathComponent(try #require(first.file)).path
        let times = try FFmpeg.audioPacketTimes(path)
        #expect(times.count == 100)
        // The audio after the gap starts a full second after the audio before it ended.
        let jumps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(jumps.filter { $0 > 0.5 }.count == 1)
        #expect(abs((jumps.max() ?? 0) - 1.02) < 0.002)
        // And the beep at 2 s still lines up with the flash at 2 s.
        let analysis = try RecordedFileAnalysis(path: path, startOffset: try #require(first.startOffset))
        #expect(analysis.beepTimes.count == 2)
        #expect(
            abs((analysis.beepTimes.last ?? 0) - (analysis.flashTimes.last ?? 9)) <= 0.040,
            "beeps \(analysis.beepTimes), flashes \(analysis.flashTimes)"
        )
        for segment in participant.segments {
            #expect(try FFmpeg.decodeErrors(directory.appendingPathComponent(try #require(segment.file)).path) == "")
        }
    }

    @Test("A participant whose frames never decrypt gets no file and is listed with the reason")
    func undecryptableParticipant() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        recorder.participantJoined(feedID: 33, display: "u3:Eve", at: start)
        for index in 0..<50 {
            recorder.undecryptable(
                feedID: 33,
                kind: index % 2 == 0 ? .audio : .video,
                reason: "no key for epoch 5",
                at: start + Int64(index) * 20_000
            )
        }
        let manifest = recorder.finish(at: start + 2_000_000)
        let entry = try #require(manifest.notRecorded.first)
        #expect(entry.key == "u3")
        #expect(entry.reason.contains("did not decrypt") && entry.reason.contains("no key for epoch 5"))
        #expect(manifest.participants.first?.framesUndecryptable == 50)
        #expect(manifest.participants.first?.recorded == false)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files == ["manifest.json"])
    }

    @Test("Media that arrives before the join event is filed under the user the display names")
    func mediaBeforeJoin() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        let zed = SimulatedPublisher(feedID: 44, display: "u9:Zed", codec: .vp8, seconds: 2)
        let events = try zed.events(recordingStart: start)
        play(Array(events.prefix(20)), into: recorder, from: start)
        recorder.participantJoined(feedID: 44, display: "u9:Zed", at: start + 300_000)
        play(Array(events.dropFirst(20)), into: recorder, from: start + 300_000)
        let manifest = recorder.finish(at: start + 3_000_000)
        #expect(manifest.participants.count == 1)
        let participant = try #require(manifest.participants.first)
        #expect(participant.key == "u9" && participant.userID == "u9" && participant.display == "u9:Zed")
        #expect(participant.recorded && participant.segments.count == 1)
        #expect(participant.segments.first?.tracks.first { $0.kind == .video }?.framesWritten == 60)
    }

    @Test("Frames still in flight when a participant leaves open no new segment; a real rejoin does")
    func framesAfterLeaving() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        let zed = SimulatedPublisher(feedID: 44, display: "u9:Zed", codec: .vp8, seconds: 4)
        let events = try zed.events(recordingStart: start)
        let half = events.count / 2
        recorder.participantJoined(feedID: 44, display: zed.display, at: start)
        // The leave overtakes the last frames of the first half, as the room event can.
        play(Array(events.prefix(half - 5)), into: recorder, from: start)
        recorder.participantLeft(feedID: 44, at: start + 2_000_000)
        play(Array(events[(half - 5)..<half]), into: recorder, from: start + 2_000_000)
        var manifest = recorder.manifest()
        #expect(manifest.participants.first?.segments.count == 1, "the tail opened a segment: \(manifest)")
        // Announced again: its frames are a rejoin, in a new segment.
        recorder.participantJoined(feedID: 44, display: zed.display, at: start + 2_100_000)
        play(Array(events.dropFirst(half)), into: recorder, from: start + 2_100_000)
        manifest = recorder.finish(at: start + 5_000_000)
        let segments = try #require(manifest.participants.first?.segments)
        #expect(segments.map(\.startReason) == ["joined", "rejoined"], "\(segments)")
    }

    @Test("Video that starts after the file was created without it starts a new segment with both")
    func lateVideo() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorder = try makeRecorder(directory: directory, start: start)
        recorder.participantJoined(feedID: 55, display: "u5:Cam", at: start)
        let events = try SimulatedPublisher(feedID: 55, display: "u5:Cam", codec: .vp8, seconds: 6).events(
            recordingStart: start
        )
        // The camera comes on after 3.5 s, when the audio-only file exists.
        play(
            events.filter { event in
                if case .frame(_, .video, let frame, _) = event {
                    return frame.rtpTimestamp &- 0xFFFF_0000 >= 105 * 3000
                }
                if case .senderReport(_, .video, _, _, _) = event { return false }
                return true
            },
            into: recorder,
            from: start
        )
        let manifest = recorder.finish(at: start + 7_000_000)
        let segments = try #require(manifest.participants.first).segments
        #expect(segments.map(\.startReason) == ["joined", "video started"])
        let first = try #require(segments.first)
        #expect((first.tracks.first { $0.kind == .video }?.framesWritten ?? 0) == 0)
        #expect(try FFmpeg.probeStreams(directory.appendingPathComponent(try #require(first.file)).path) == ["opus"])
        let second = try #require(segments.last)
        // From the first keyframe after the camera came on (frame 120) to the end.
        #expect(second.tracks.first { $0.kind == .video }?.framesWritten == 60)
        #expect(
            try FFmpeg.probeStreams(directory.appendingPathComponent(try #require(second.file)).path).sorted() == [
                "opus", "vp8",
            ]
        )
    }

    @Test("A full disk stops the tracks with a clear error and keeps what was written readable")
    func diskFull() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let mountPoint = directory.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        let mount = try runProcess(try which("mount"), ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint.path])
        try #require(mount.succeeded, "cannot mount a 1 MiB tmpfs (the test needs root): \(mount.errorOutput)")
        defer { _ = try? runProcess(try which("umount"), [mountPoint.path]) }

        let recordingDirectory = mountPoint.appendingPathComponent("rec")
        let recorder = try makeRecorder(directory: recordingDirectory, start: start)
        // ~300 kbit/s of video for 20 s is far more than 1 MiB (journal + container).
        let ann = SimulatedPublisher(feedID: 11, display: "u1:Ann", codec: .vp8, seconds: 20)
        recorder.participantJoined(feedID: 11, display: ann.display, at: start)
        play(try ann.events(recordingStart: start), into: recorder, from: start)
        let manifest = recorder.finish(at: start + 21_000_000)
        let segment = try segmentFile(manifest, "u1")
        let errors = segment.tracks.compactMap(\.error) + [segment.error].compactMap { $0 }
        #expect(errors.contains { $0.contains("No space left on device") }, "errors: \(errors)")
        #expect(segment.journals.count == 2, "journals are kept when the container is not complete")
        let video = try #require(segment.tracks.first { $0.kind == .video })
        #expect(video.framesWritten > 10 && video.framesWritten < 600)

        // What was written before the disk filled decodes, from frame 0 on.
        let path = recordingDirectory.appendingPathComponent(try #require(segment.file)).path
        let analysis = try RecordedFileAnalysis(path: path, startOffset: 0)
        #expect(analysis.frameNumbers.count > 10)
        #expect(analysis.frameNumbers == Array(0..<analysis.frameNumbers.count))
    }
}
