import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import RecordingTestBed
import Testing

@testable import ConclaveCompose

/// A 20 s call of four (320x240 each; the second joins at 5 s, the third leaves at 15 s, the
/// fourth is muted from 5 s to 15 s) recorded once for the suite, and composed at 640x480 so every
/// tile is shown 1:1 and its pattern can be read back.
final class CompositeFixture: Sendable {
    static let shared = Result { try CompositeFixture() }

    let call = SimulatedCall.standard(participants: 4, seconds: 20)
    let directory: URL
    let timeline: CompositionTimeline
    let composite: String
    let report: CompositionReport

    static var options: CompositeOptions {
        var options = CompositeOptions()
        options.width = 640
        options.height = 480
        options.frameRate = 30
        return options
    }

    /// Where the fixture lives, removed when the test process exits (the fixture is shared by
    /// the suite, so no single test can remove it).
    static let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "conclave-compose-\(getpid())-\(UUID().uuidString.prefix(8))"
    )

    init() throws {
        directory = Self.folder
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: CompositeFixture.folder) }
        let recording = directory.appendingPathComponent("recording").path
        _ = try call.record(to: recording)
        timeline = try CompositionTimeline.load(directory: recording)
        composite = directory.appendingPathComponent("composite.mp4").path
        report = try VideoComposition.compose(
            timeline,
            to: composite,
            options: Self.options,
            audio: try AudioMixdown(timeline: timeline)
        )
    }
}

/// One decoded picture of a composite, as read tile by tile.
struct CompositePicture {
    var index: Int
    var frame: VideoFrame

    /// The pattern reading of the rectangle, nil when it shows no pattern.
    func reading(in rectangle: TileRect) -> PatternReading? {
        var data: [UInt8] = []
        data.reserveCapacity(VideoFrame.byteCount(width: rectangle.width, height: rectangle.height))
        for row in 0..<rectangle.height {
            let start = (rectangle.y + row) * frame.width + rectangle.x
            data += frame.data[start..<(start + rectangle.width)]
        }
        let chromaWidth = frame.width / 2
        for offset in [frame.uOffset, frame.vOffset] {
            for row in 0..<(rectangle.height / 2) {
                let start = offset + (rectangle.y / 2 + row) * chromaWidth + rectangle.x / 2
                data += frame.data[start..<(start + rectangle.width / 2)]
            }
        }
        guard let tile = try? VideoFrame(width: rectangle.width, height: rectangle.height, data: data, rtpTimestamp: 0)
        else { return nil }
        return PatternReader.read(tile)
    }
}

/// Every picture of a video file, decoded.
func decodePictures(_ path: String) throws -> [CompositePicture] {
    let demuxer = try MediaDemuxer(path: path)
    let stream = try #require(demuxer.firstStream(of: .video))
    let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: stream)
    var frames: [VideoFrame] = []
    func take(_ outputs: [MediaStreamDecoder.Output]) {
        for case .video(let frame, _) in outputs { frames.append(frame) }
    }
    while let packet = try demuxer.readPacket() {
        guard packet.streamIndex == stream.index else { continue }
        take(try decoder.decode(packet))
    }
    take(try decoder.decode(nil))
    return frames.enumerated().map { CompositePicture(index: $0.offset, frame: $0.element) }
}

@Suite(.serialized) struct VideoCompositionTests {
    let fixture: CompositeFixture

    init() throws { fixture = try CompositeFixture.shared.get() }

    /// Who is on screen at `time` by the call's own script, in the timeline's order.
    func expectedTiles(at time: Double) -> [SimulatedCall.Member] {
        fixture.timeline.participants.compactMap { participant in
            fixture.call.members.first { $0.key == participant.key }
        }.filter { member in
            Double(member.join) <= time + 0.001 && time < Double(member.leave ?? fixture.call.seconds) - 0.001
        }
    }

    @Test("The composite lasts as long as the call, one picture per frame time, nothing reported")
    func durationIsTheCalls() throws {
        let frames = try FFmpeg.frameCount(fixture.composite)
        #expect(fixture.report.frames == fixture.call.seconds * 30)
        #expect(frames == fixture.call.seconds * 30)
        #expect(abs(fixture.timeline.duration - Double(fixture.call.seconds)) < 1.0 / 30)
        #expect(fixture.report.problems.isEmpty, "\(fixture.report.problems)")
        #expect(fixture.report.videoEncoder == "libx264")
        #expect(fixture.report.audioEncoder == "aac")
        #expect(try FFmpeg.probeStreams(fixture.composite).sorted() == ["aac", "h264"])
    }

    @Test("Each tile shows its participant's picture of that instant, appears at the join and is gone at the leave")
    func tilesFollowJoinsAndLeaves() throws {
        let pictures = try decodePictures(fixture.composite)
        #expect(pictures.count == fixture.call.seconds * 30)
        var firstSeen: [String: Int] = [:]
        var lastSeen: [String: Int] = [:]
        var misplaced: [String] = []
        for picture in pictures {
            let time = Double(picture.index) / 30
            // The frame of a join or leave itself may show either arrangement; the ones either side
            // may not.
            let edges = fixture.call.members.flatMap { [$0.join, $0.leave ?? -10] }
            if edges.contains(where: { $0 * 30 == picture.index }) { continue }
            let members = expectedTiles(at: time)
            let rectangles = LayoutGeometry.rectangles(.grid, count: members.count, width: 640, height: 480)
            for (member, rectangle) in zip(members, rectangles) {
                guard let reading = picture.reading(in: rectangle) else {
                    misplaced.append("\(member.name) unreadable at frame \(picture.index)")
                    continue
                }
                let expected = picture.index - member.join * 30
                if abs(reading.frameNumber - expected) > 1 {
                    misplaced.append(
                        "\(member.name) shows \(reading.frameNumber), not \(expected), at \(picture.index)"
                    )
                }
                firstSeen[member.key] = min(firstSeen[member.key] ?? .max, picture.index)
                lastSeen[member.key] = max(lastSeen[member.key] ?? .min, picture.index)
            }
        }
        #expect(misplaced.isEmpty, "\(misplaced.prefix(10))")
        for member in fixture.call.members {
            // Within one frame of the join and of the leave.
            #expect(abs((firstSeen[member.key] ?? -100) - member.join * 30) <= 1, "\(member.name)")
            if let leave = member.leave {
                #expect(abs((lastSeen[member.key] ?? -100) - leave * 30) <= 1, "\(member.name)")
            }
        }
        // The late joiner's tile is there one frame after the join, and not one frame before.
        let joiner = try #require(fixture.call.members.first { $0.join > 0 })
        let after = pictures[joiner.join * 30 + 1]
        let members = expectedTiles(at: Double(after.index) / 30)
        let position = try #require(members.firstIndex { $0.key == joiner.key })
        let rectangle = LayoutGeometry.rectangles(.grid, count: members.count, width: 640, height: 480)[position]
        let first = try #require(after.reading(in: rectangle), "no tile one frame after the join")
        #expect(abs(first.frameNumber - 1) <= 1)
        // One frame before the join, the three others fill a three-tile grid (checked above): the
        // late joiner is absent.
        #expect(firstSeen[joiner.key] == joiner.join * 30 + 1 || firstSeen[joiner.key] == joiner.join * 30)
    }

    @Test("The flashes of all tiles fall on the same picture, and the mixed audio beeps with them, within 40 ms")
    func flashesAgree() throws {
        let pictures = try decodePictures(fixture.composite)
        var flashes: [Int: [String: Int]] = [:]
        for picture in pictures {
            let time = Double(picture.index) / 30
            let members = expectedTiles(at: time)
            let rectangles = LayoutGeometry.rectangles(.grid, count: members.count, width: 640, height: 480)
            for (member, rectangle) in zip(members, rectangles) {
                guard let reading = picture.reading(in: rectangle), reading.isFlash else { continue }
                flashes[Int(time.rounded()), default: [:]][member.key] = picture.index
            }
        }
        #expect(flashes.count >= fixture.call.seconds - 1)
        // The mixed audio's beeps are heard with the flashes.
        let audio = try decodeFile(fixture.composite)
        let beeps = beepTimes(audio.samples, channels: audio.channels, seconds: fixture.call.seconds)
        for (second, byMember) in flashes {
            guard let flash = byMember.values.min() else { continue }
            let beep = try #require(second < beeps.count ? beeps[second] : nil, "no beep at second \(second)")
            #expect(abs(beep - Double(flash) / 30) <= 0.040, "second \(second): beep \(beep), flash \(flash)")
        }
        for (second, byMember) in flashes {
            let indices = Array(byMember.values)
            let spread = Double((indices.max() ?? 0) - (indices.min() ?? 0)) / 30
            #expect(spread <= 0.040, "flashes at second \(second): \(byMember)")
            #expect(abs(Double(indices.min() ?? 0) / 30 - Double(second)) <= 0.040, "second \(second): \(byMember)")
        }
    }

    @Test("A corrupt segment composes as a gap with its name shown, and is reported")
    func corruptSegmentIsAGap() throws {
        let copy = fixture.directory.appendingPathComponent("corrupt-\(UUID().uuidString.prefix(6))")
        try FileManager.default.copyItem(
            at: URL(fileURLWithPath: fixture.timeline.directory),
            to: copy
        )
        defer { try? FileManager.default.removeItem(at: copy) }
        let timeline = try CompositionTimeline.load(directory: copy.path)
        let victim = try #require(timeline.participants.first)
        let segment = try #require(victim.segments.first)
        var garbage = SeededGenerator(seed: 17)
        let bytes = (0..<50_000).map { _ in UInt8.random(in: 0...255, using: &garbage) }
        try Data(bytes).write(to: URL(fileURLWithPath: segment.path))
        let output = copy.appendingPathComponent("composite.webm").path
        let report = try VideoComposition.compose(timeline, to: output, options: CompositeFixture.options)
        let name = (segment.path as NSString).lastPathComponent
        #expect(report.problems.contains { $0.contains(name) && $0.contains("gap") }, "\(report.problems)")
        #expect(report.videoEncoder == "libvpx")
        #expect(try FFmpeg.frameCount(output) == fixture.call.seconds * 30)
        // The victim's tile is there, without pictures, while the others carry on.
        let pictures = try decodePictures(output)
        let middle = pictures[10 * 30 + 7]
        let members = expectedTiles(at: 10 + 7.0 / 30)
        let rectangles = LayoutGeometry.rectangles(.grid, count: members.count, width: 640, height: 480)
        for (member, rectangle) in zip(members, rectangles) {
            let reading = middle.reading(in: rectangle)
            #expect((reading == nil) == (member.key == victim.key), "\(member.name)")
        }
    }

    @Test("A recording still being written composes up to where its files end, without a problem")
    func recordingStillGoing() throws {
        let copy = fixture.directory.appendingPathComponent("going-\(UUID().uuidString.prefix(6))")
        try FileManager.default.copyItem(at: URL(fileURLWithPath: fixture.timeline.directory), to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let manifest = copy.appendingPathComponent(RecordingManifest.fileName)
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any])
        json["status"] = "recording"
        json["endTime"] = nil
        try JSONSerialization.data(withJSONObject: json).write(to: manifest)
        let timeline = try CompositionTimeline.load(directory: copy.path)
        let cut = try #require(timeline.participants.first?.segments.first)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: cut.path)))
        // Cut in the middle of a cluster, as a file being written is.
        try Data(bytes[0..<(bytes.count / 2 + 7)]).write(to: URL(fileURLWithPath: cut.path))
        let output = copy.appendingPathComponent("composite.mkv").path
        let report = try VideoComposition.compose(timeline, to: output, options: CompositeFixture.options)
        #expect(report.problems.isEmpty, "\(report.problems)")
        let pictures = try decodePictures(output)
        #expect(pictures.count == report.frames)
        let key = try #require(timeline.participants.first?.key)
        let member = try #require(fixture.call.members.first { $0.key == key })
        // Early on the cut participant's pictures are there; near the end its tile has only the name.
        for (index, expectPicture) in [(2 * 30 + 7, true), (pictures.count - 5, false)] {
            let time = Double(index) / 30
            let members = expectedTiles(at: time)
            let rectangles = LayoutGeometry.rectangles(.grid, count: members.count, width: 640, height: 480)
            let position = try #require(members.firstIndex { $0.key == member.key })
            #expect((pictures[index].reading(in: rectangles[position]) != nil) == expectPicture, "frame \(index)")
        }
    }

    @Test("A composite of a recording of another format version is refused in one line")
    func otherFormatVersionRefused() throws {
        let copy = fixture.directory.appendingPathComponent("future-\(UUID().uuidString.prefix(6))")
        try FileManager.default.copyItem(at: URL(fileURLWithPath: fixture.timeline.directory), to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let manifest = copy.appendingPathComponent(RecordingManifest.fileName)
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any])
        json["formatVersion"] = 9
        try JSONSerialization.data(withJSONObject: json).write(to: manifest)
        let error = #expect(throws: ComposeError.self) { try CompositionTimeline.load(directory: copy.path) }
        #expect(error?.description.contains("format version 9") == true)
        #expect(error?.description.contains("\n") == false)
    }
}

@Suite struct SpeakerLayoutTests {
    /// The participant shown large by each graph of a speaker-layout composite, in order.
    func largeTiles(_ report: CompositionReport) throws -> [Int] {
        let pattern = try Regex("textfile=[^:]*/([0-9]+)\\.txt")
        return report.graphs.compactMap { graph in
            guard let match = graph.firstMatch(of: pattern), let index = Int(match.output[1].substring ?? "") else {
                return nil
            }
            return index
        }
    }

    @Test("The speaker layout puts whoever speaks in the large tile, in turn")
    func speakerIsLarge() throws {
        let fixture = try AudioFixture.turns.get()
        var options = CompositeOptions()
        options.width = 320
        options.height = 240
        options.layout = .speaker
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("speaker-\(UUID()).webm").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let report = try VideoComposition.compose(
            fixture.timeline,
            to: output,
            options: options,
            speakers: try ActiveSpeakerTimeline(timeline: fixture.timeline)
        )
        #expect(report.frames == fixture.call.seconds * 30)
        let order = fixture.timeline.participants.map(\.key)
        // Consecutive arrangements with the same speaker (a tile joining at the start) count once.
        let large = try largeTiles(report).map { order[$0] }.reduce(into: [String]()) { kept, key in
            if kept.last != key { kept.append(key) }
        }
        // Each change of speaker is one new arrangement; the first may be before anyone speaks.
        #expect(Array(large.drop { $0 != "u1" }) == ["u1", "u2", "u3"], "\(large)")
        let withoutTimeline = #expect(throws: ComposeError.self) {
            try VideoComposition.compose(fixture.timeline, to: output, options: options)
        }
        #expect(withoutTimeline?.reason.contains("speaker") == true)
    }
}
