import ConclaveAV
import ConclaveCore
import ConclaveRTP
import ConclaveTestSupport
import Foundation
import Logging
import Testing

@testable import ConclaveRecorder

/// Hostile timestamps, arrival times and frames for the journal reader, `recordings repair`, the
/// segment muxer and the live recorder: each must give a result or a reported problem, never a
/// trap. The fuzz loops are seeded, so a failure reproduces, and stop after a few seconds, so they
/// run in every `swift test`.
@Suite("Recorder under hostile input", .serialized)
struct RecorderFuzzTests {
    static let start: Int64 = 1_763_000_000_000_000
    /// Each fuzz loop runs a fixed number of seeded cases, so every run tests the same inputs and
    /// a slow machine takes longer instead of testing less (a few seconds each).
    static let readerCases = 500
    static let repairCases = 10
    static let muxerCases = 24

    // MARK: - Crafted journals

    /// One journal entry to write: a frame or a sender report.
    enum Entry {
        case frame(rtp: UInt32, arrival: Int64, data: [UInt8], keyframe: Bool, lost: Int)
        case senderReport(ntp: UInt64, rtp: UInt32, arrival: Int64)
    }

    /// An Opus packet: a TOC byte (20 ms CELT, mono, one frame) and some bytes.
    static func opusFrame(_ fill: UInt8 = 0x55, size: Int = 40) -> [UInt8] {
        [0xF8] + [UInt8](repeating: fill, count: size)
    }

    /// 50 frames a second of audio starting at `rtp`, timestamps stepped by `step`, arriving in real time.
    static func audioEntries(count: Int, rtp: UInt32 = 1_000, step: (Int) -> UInt32 = { _ in 960 }, arrival: Int64)
        -> [Entry]
    {
        var entries: [Entry] = []
        var timestamp = rtp
        for index in 0..<count {
            if index > 0 { timestamp &+= step(index) }
            entries.append(
                .frame(
                    rtp: timestamp,
                    arrival: arrival &+ Int64(index) * 20_000,
                    data: opusFrame(UInt8(truncatingIfNeeded: index)),
                    keyframe: true,
                    lost: 0
                )
            )
        }
        return entries
    }

    static func header(
        kind: MediaKind = .audio,
        codec: MediaCodec = .opus,
        recordingStart: Int64 = start,
        file: String = "u1-7-s1"
    ) -> JournalHeader {
        JournalHeader(
            participant: "u1",
            feedID: 7,
            display: "u1:Ann",
            segment: 1,
            file: file,
            kind: kind,
            codec: codec,
            recordingStartMicroseconds: recordingStart
        )
    }

    /// Writes a journal through the journal's own writer (so it follows whatever the byte format is).
    @discardableResult
    static func writeJournal(_ entries: [Entry], header: JournalHeader, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("\(header.file).\(header.kind.rawValue).journal").path
        let writer = try JournalWriter(path: path, header: header)
        for entry in entries {
            switch entry {
            case .frame(let rtp, let arrival, let data, let keyframe, let lost):
                try writer.append(
                    EncodedFrame(codec: header.codec, data: data, rtpTimestamp: rtp, isKeyframe: keyframe),
                    arrivalMicroseconds: arrival,
                    framesLostBefore: lost
                )
            case .senderReport(let ntp, let rtp, let arrival):
                try writer.appendSenderReport(
                    SenderReportTime(ntp: NTPTimestamp(rawValue: ntp), rtpTimestamp: rtp),
                    arrivalMicroseconds: arrival
                )
            }
        }
        try writer.close()
        return path
    }

    /// Repairs `directory` and checks what any repair must give: counts that add up, and every
    /// file it claims verifies (it opens and holds as many packets per track as written).
    @discardableResult
    static func repairAndCheck(_ directory: URL, framesGiven: Int) throws -> RecordingRepair.Outcome {
        let outcome = try RecordingRepair.repair(directory: directory.path, recorderVersion: "test")
        let manifest = try #require(outcome.manifest)
        for participant in manifest.participants {
            for segment in participant.segments {
                for track in segment.tracks {
                    #expect(track.framesWritten <= track.framesReceived)
                    #expect(track.framesReceived <= framesGiven)
                    #expect(track.framesWritten >= 0 && track.framesLost >= 0 && track.gaps >= 0)
                    if let first = track.firstTimestamp, let last = track.lastTimestamp {
                        #expect(first.isFinite && last.isFinite)
                    }
                }
                if let file = segment.file {
                    let expected = Dictionary(
                        uniqueKeysWithValues: segment.tracks.map { track in
                            var progress = TrackProgress(codec: track.codec)
                            progress.framesWritten = track.framesWritten
                            return (track.kind, progress)
                        }
                    )
                    let path = directory.appendingPathComponent(file).path
                    if case .failure(let message) = ContainerVerification.verify(path: path, expected: expected) {
                        Issue.record("\(file) does not verify: \(message)")
                    }
                }
            }
        }
        return outcome
    }

    // MARK: - The probe's findings, through repair

    @Test("Repair: Opus timestamps that jump by 0x7fffffff again and again give a verified file with every frame")
    func repairSurvivesTimestampJumps() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // 4500 jumps of 2^31 - 1 ticks put the timeline past Int64 microseconds (the probe's trap).
        let entries = Self.audioEntries(count: 5_000, step: { $0 % 10 == 0 ? 960 : 0x7FFF_FFFF }, arrival: Self.start)
        try Self.writeJournal(entries, header: Self.header(), in: directory)
        let outcome = try Self.repairAndCheck(directory, framesGiven: entries.count)
        #expect(outcome.problems.isEmpty, "\(outcome.problems)")
        #expect(outcome.rebuilt == ["u1-7-s1.webm"])
        let track = try #require(outcome.manifest?.participants.first?.segments.first?.tracks.first)
        #expect(track.framesWritten == entries.count, "a jump is kept and timed by its arrival")
        // The file is as long as the frames' arrivals say (100 s), not 2^31-tick jumps long.
        let last = try #require(track.lastTimestamp)
        #expect(last < 110, "last frame at \(last) s")
    }

    @Test("Repair: a journal whose recording start is -2^63 gives a verified file")
    func repairSurvivesMinimumRecordingStart() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries = Self.audioEntries(count: 300, arrival: Self.start)
        try Self.writeJournal(entries, header: Self.header(recordingStart: .min), in: directory)
        let outcome = try Self.repairAndCheck(directory, framesGiven: entries.count)
        #expect(outcome.problems.isEmpty, "\(outcome.problems)")
        let track = try #require(outcome.manifest?.participants.first?.segments.first?.tracks.first)
        #expect(track.framesWritten == entries.count)
    }

    @Test(
        "Repair: arrival times at and beyond 2^63 (negative as Int64), and Int64.max, give verified files",
        arguments: [
            Int64(bitPattern: 1 << 63), Int64(bitPattern: UInt64.max - 10_000_000_000), Int64.max - 10_000_000_000,
        ]
    )
    func repairSurvivesExtremeArrivals(arrival: Int64) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries = Self.audioEntries(count: 300, arrival: arrival)
        try Self.writeJournal(entries, header: Self.header(), in: directory)
        let outcome = try Self.repairAndCheck(directory, framesGiven: entries.count)
        #expect(outcome.problems.isEmpty, "\(outcome.problems)")
        let track = try #require(outcome.manifest?.participants.first?.segments.first?.tracks.first)
        #expect(track.framesWritten == entries.count)
    }

    @Test("Repair: a sender clock that goes back keeps the frames; repeats and small reorders are refused and counted")
    func repairKeepsBackwardJumpsAndRefusesRepeats() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var entries = Self.audioEntries(count: 100, rtp: 500_000_000, arrival: Self.start)
        // The sender's clock restarts 2^30 ticks earlier and runs on normally: kept.
        entries += Self.audioEntries(count: 100, rtp: 500_000_000 &- (1 << 30), arrival: Self.start + 2_000_000)
        // Then a repeat of the last frame's timestamp and one 3 frames back: refused.
        entries += [
            .frame(
                rtp: 500_000_000 &- (1 << 30) &+ 99 * 960,
                arrival: Self.start + 4_000_000,
                data: Self.opusFrame(),
                keyframe: true,
                lost: 0
            ),
            .frame(
                rtp: 500_000_000 &- (1 << 30) &+ 96 * 960,
                arrival: Self.start + 4_020_000,
                data: Self.opusFrame(),
                keyframe: true,
                lost: 0
            ),
        ]
        try Self.writeJournal(entries, header: Self.header(), in: directory)
        let outcome = try Self.repairAndCheck(directory, framesGiven: entries.count)
        #expect(outcome.problems.isEmpty, "\(outcome.problems)")
        let track = try #require(outcome.manifest?.participants.first?.segments.first?.tracks.first)
        #expect(track.framesWritten == 200)
        #expect(track.framesReceived == 202)
    }

    @Test("An Opus packet whose frame is longer than the packet allows is refused and counted, so the file verifies")
    func malformedOpusPacketIsRefused() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let muxer = SegmentMuxer(
            basePath: directory.appendingPathComponent("segment").path,
            recordingStart: Self.start,
            timing: RecorderTiming(layoutWait: .zero)
        )
        for index in 0..<10 {
            // Frame 5 is one code-0 frame of 100 000 bytes: Opus frames hold at most 1275.
            let data = index == 5 ? Self.opusFrame(size: 100_000) : Self.opusFrame()
            try muxer.append(
                kind: .audio,
                frame: EncodedFrame(codec: .opus, data: data, rtpTimestamp: UInt32(index * 960), isKeyframe: true),
                arrival: Self.start + Int64(index) * 20_000
            )
        }
        try muxer.finish()
        let progress = try #require(muxer.tracks[.audio])
        #expect(progress.framesWritten == 9 && progress.framesRejected == 1)
        let path = try #require(muxer.path)
        if case .failure(let message) = ContainerVerification.verify(path: path, expected: muxer.tracks) {
            Issue.record("\(message)")
        }
        #expect(OpusPacketTiming.isWellFormed([0xF8]), "a code-0 packet with an empty (DTX) frame")
        #expect(OpusPacketTiming.isWellFormed(Self.opusFrame(size: 1_275)))
        #expect(!OpusPacketTiming.isWellFormed(Self.opusFrame(size: 1_276)))
        #expect(!OpusPacketTiming.isWellFormed([0xF9, 1, 2, 3]), "code 1: two frames of equal size need an even count")
        #expect(OpusPacketTiming.isWellFormed([0xFA, 2, 1, 1, 3]), "code 2: a 2-byte then a 1-byte frame")
        #expect(!OpusPacketTiming.isWellFormed([0xFA, 9, 1]), "code 2: the first frame runs past the end")
        #expect(OpusPacketTiming.isWellFormed([0xFB, 0x02, 1, 1]), "code 3 CBR: two 1-byte frames")
        #expect(!OpusPacketTiming.isWellFormed([0xFB, 0x43, 200, 1, 1, 1]), "code 3: padding past the end")
        #expect(OpusPacketTiming.isWellFormed([0xFB, 0x82, 1, 7, 8, 8]), "code 3 VBR: a 1-byte and a 2-byte frame")
        #expect(!OpusPacketTiming.isWellFormed([0xFB, 0x00]), "code 3 with no frame")
    }

    // MARK: - The probe's findings, live

    /// Feeds audio frames to a live recorder, finishes it, and returns the manifest's track.
    static func recordLive(
        _ entries: [Entry],
        startTime: Int64,
        in directory: URL,
        finishAt: Int64
    ) throws -> RecordingManifest.Track? {
        let recorder = try CallRecorder(
            configuration: .init(directory: directory.path, callID: "1", recorderVersion: "test", cryptoFormat: "none"),
            startTime: startTime,
            logger: Logger(label: "recorder-fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        recorder.participantJoined(feedID: 7, display: "u1:Ann", at: startTime)
        for entry in entries {
            guard case .frame(let rtp, let arrival, let data, let keyframe, let lost) = entry else { continue }
            recorder.frame(
                feedID: 7,
                kind: .audio,
                frame: EncodedFrame(codec: .opus, data: data, rtpTimestamp: rtp, isKeyframe: keyframe),
                arrival: arrival,
                framesLostBefore: lost
            )
            recorder.commit()
        }
        let manifest = recorder.finish(at: finishAt)
        let segment = manifest.participants.first?.segments.first
        if let file = segment?.file {
            let path = directory.appendingPathComponent(file).path
            var expected = TrackProgress(codec: .opus)
            expected.framesWritten = segment?.tracks.first?.framesWritten ?? 0
            if case .failure(let message) = ContainerVerification.verify(path: path, expected: [.audio: expected]) {
                Issue.record("\(file) does not verify: \(message)")
            }
        }
        return segment?.tracks.first
    }

    @Test("Live: a participant whose Opus timestamps jump by 0x7fffffff is recorded with every frame")
    func liveSurvivesTimestampJumps() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries = Self.audioEntries(count: 5_000, step: { $0 % 10 == 0 ? 960 : 0x7FFF_FFFF }, arrival: Self.start)
        let track = try #require(
            try Self.recordLive(entries, startTime: Self.start, in: directory, finishAt: Self.start + 101_000_000)
        )
        #expect(track.framesWritten == entries.count)
        #expect(track.error == nil)
        #expect((track.lastTimestamp ?? .infinity) < 110)
    }

    @Test("Live: a recording whose start time is -2^63 records without a trap")
    func liveSurvivesMinimumStartTime() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries = Self.audioEntries(count: 300, arrival: Self.start)
        let track = try #require(
            try Self.recordLive(entries, startTime: .min, in: directory, finishAt: Self.start + 7_000_000)
        )
        #expect(track.framesWritten == entries.count)
    }

    @Test(
        "Live: frames whose arrival times are at or beyond 2^63 record without a trap",
        arguments: [Int64(bitPattern: 1 << 63), Int64.max - 10_000_000_000]
    )
    func liveSurvivesExtremeArrivals(arrival: Int64) throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let entries = Self.audioEntries(count: 300, arrival: arrival)
        let track = try #require(
            try Self.recordLive(entries, startTime: Self.start, in: directory, finishAt: arrival &+ 7_000_000)
        )
        #expect(track.framesWritten == entries.count)
    }

    // MARK: - Fuzzing

    /// A random hostile RTP timestamp step: normal, huge, wrapping, repeated or backwards.
    static func hostileStep(_ random: inout SeededGenerator) -> UInt32 {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: 0x7FFF_FFFF
        case 1: 0x8000_0000
        case 2: 0
        case 3: UInt32.max  // one tick back
        case 4: UInt32.max &- UInt32.random(in: 0..<100_000, using: &random)
        case 5: UInt32.random(in: 0...UInt32.max, using: &random)
        default: 960
        }
    }

    /// A random hostile arrival time after `previous`.
    static func hostileArrival(after previous: Int64, _ random: inout SeededGenerator) -> Int64 {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: .min
        case 1: .max
        case 2: previous &- Int64.random(in: 0...10_000_000, using: &random)
        case 3: Int64(bitPattern: random.next())
        case 4: previous
        default: previous &+ 20_000
        }
    }

    static func hostileData(_ random: inout SeededGenerator, kind: MediaKind) -> [UInt8] {
        switch Int.random(in: 0..<20, using: &random) {
        case 0: []
        case 1: random.bytes(Int.random(in: 60_000...200_000, using: &random))
        case 2: random.bytes(1)
        default:
            kind == .audio
                ? opusFrame(UInt8.random(in: 0...255, using: &random))
                : random.bytes(Int.random(in: 20...400, using: &random))
        }
    }

    /// A journal's entries: frames with hostile timestamps, arrivals (anywhere in Int64), sizes
    /// and loss counts, and a sender report now and then.
    static func hostileEntries(count: Int, kind: MediaKind, _ random: inout SeededGenerator) -> [Entry] {
        var entries: [Entry] = []
        var rtp = UInt32.random(in: 0...UInt32.max, using: &random)
        var arrival = Int.random(in: 0..<4, using: &random) == 0 ? hostileArrival(after: start, &random) : start
        for _ in 0..<count {
            rtp &+= hostileStep(&random)
            arrival = hostileArrival(after: arrival, &random)
            if Int.random(in: 0..<25, using: &random) == 0 {
                entries.append(.senderReport(ntp: random.next(), rtp: rtp &+ hostileStep(&random), arrival: arrival))
            }
            let lost =
                Int.random(in: 0..<10, using: &random) == 0 ? Int(UInt32.random(in: 0...UInt32.max, using: &random)) : 0
            entries.append(
                .frame(
                    rtp: rtp,
                    arrival: arrival,
                    data: hostileData(&random, kind: kind),
                    keyframe: kind == .audio || Int.random(in: 0..<5, using: &random) == 0,
                    lost: lost
                )
            )
        }
        return entries
    }

    @Test("Fuzz: random and mutated journal bytes give records or a typed error")
    func journalReaderSurvivesMutations() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var random = SeededGenerator(seed: 0x4A52_4E4C)
        let path = try Self.writeJournal(
            Self.hostileEntries(count: 60, kind: .video, &random),
            header: Self.header(kind: .video, codec: .vp8),
            in: directory
        )
        let valid = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var iterations = 0
        var readable = 0
        while iterations < Self.readerCases {
            let input =
                iterations % 4 == 0 ? random.bytes(Int.random(in: 0...200, using: &random)) : random.mutate(valid)
            iterations += 1
            do {
                var reader = try JournalReader(bytes: input, path: "fuzz.journal")
                readable += 1
                var records = 0
                while let record = reader.next() {
                    records += 1
                    if case .frame(let frame, _, let lost) = record {
                        #expect(frame.data.count <= input.count && lost >= 0)
                    }
                }
                #expect(records <= input.count)
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
        #expect(readable > 10, "mutations keep many headers readable, so records are exercised")
    }

    @Test("Fuzz: repair of journals with hostile timestamps, arrivals and frames never traps and every file verifies")
    func repairSurvivesHostileJournals() throws {
        var random = SeededGenerator(seed: 0x5245_5041)
        var runs = 0
        var rebuilt = 0
        while runs < Self.repairCases {
            runs += 1
            let directory = try TestPaths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let recordingStart: Int64 =
                switch Int.random(in: 0..<5, using: &random) {
                case 0: .min
                case 1: .max
                case 2: Int64(bitPattern: random.next())
                default: Self.start
                }
            let audio = Self.hostileEntries(
                count: Int.random(in: 0...120, using: &random),
                kind: .audio,
                &random
            )
            let video = Self.hostileEntries(
                count: Int.random(in: 0...60, using: &random),
                kind: .video,
                &random
            )
            try Self.writeJournal(audio, header: Self.header(recordingStart: recordingStart), in: directory)
            if !video.isEmpty {
                try Self.writeJournal(
                    video,
                    header: Self.header(kind: .video, codec: .vp8, recordingStart: recordingStart),
                    in: directory
                )
            }
            // Now and then a cut or flipped journal too.
            if Int.random(in: 0..<4, using: &random) == 0 {
                let path = directory.appendingPathComponent("u1-7-s1.audio.journal").path
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                try Data(random.mutate(bytes)).write(to: URL(fileURLWithPath: path))
            }
            let given = audio.count + video.count
            let outcome = try Self.repairAndCheck(directory, framesGiven: given)
            rebuilt += outcome.rebuilt.count
        }
        #expect(rebuilt > 0, "some hostile journals still make a file")
    }

    @Test("Fuzz: hostile frame sequences straight into the segment muxer never trap and every file verifies")
    func muxerSurvivesHostileFrames() throws {
        var random = SeededGenerator(seed: 0x4D55_5845)
        var runs = 0
        var written = 0
        while runs < Self.muxerCases {
            runs += 1
            let directory = try TestPaths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let recordingStart =
                Int.random(in: 0..<3, using: &random) == 0 ? Int64(bitPattern: random.next()) : Self.start
            let muxer = SegmentMuxer(
                basePath: directory.appendingPathComponent("segment").path,
                recordingStart: recordingStart,
                timing: RecorderTiming(
                    layoutWait: .milliseconds(Int64.random(in: 0...500, using: &random)),
                    syncWait: .milliseconds(200),
                    keyframeWait: .seconds(1)
                ),
                live: Bool.random(using: &random)
            )
            let kinds: [MediaKind] = Bool.random(using: &random) ? [.audio, .video] : [.audio]
            var streams = kinds.map { kind in
                (kind, Self.hostileEntries(count: Int.random(in: 1...150, using: &random), kind: kind, &random)[...])
            }
            var given = 0
            do throws(MediaFileError) {
                while let pick = streams.indices.filter({ !streams[$0].1.isEmpty }).randomElement(using: &random) {
                    let kind = streams[pick].0
                    let entry = streams[pick].1.removeFirst()
                    switch entry {
                    case .frame(let rtp, let arrival, let data, let keyframe, let lost):
                        given += 1
                        let codec: MediaCodec = kind == .audio ? .opus : .vp8
                        try muxer.append(
                            kind: kind,
                            frame: EncodedFrame(codec: codec, data: data, rtpTimestamp: rtp, isKeyframe: keyframe),
                            arrival: arrival,
                            framesLostBefore: lost
                        )
                        if Int.random(in: 0..<10, using: &random) == 0 {
                            try muxer.tick(now: Self.hostileArrival(after: arrival, &random))
                        }
                    case .senderReport(let ntp, let rtp, _):
                        muxer.senderReport(
                            SenderReportTime(ntp: NTPTimestamp(rawValue: ntp), rtpTimestamp: rtp),
                            kind: kind,
                            codec: kind == .audio ? .opus : .vp8
                        )
                    }
                }
                try muxer.finish()
            } catch {
                Issue.record("a write error from hostile frames: \(error)")
            }
            let total = muxer.tracks.values.reduce(0) { $0 + $1.framesWritten }
            #expect(total <= given)
            for progress in muxer.tracks.values {
                #expect(
                    progress.framesWritten + progress.framesRejected + progress.framesDroppedBeforeKeyframe
                        <= progress.framesReceived
                )
            }
            if let path = muxer.path {
                written += total
                if case .failure(let message) = ContainerVerification.verify(path: path, expected: muxer.tracks) {
                    Issue.record("run \(runs): \(message)")
                }
            }
        }
        #expect(written > 0)
    }
}
