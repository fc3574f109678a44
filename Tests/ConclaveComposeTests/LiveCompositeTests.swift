import ConclaveAV
import ConclaveCore
import ConclaveTestSupport
import Foundation
import RecordingTestBed
import Testing

@testable import ConclaveCompose

/// A live composite fed straight with simulated publishers' frames (no call around it), written
/// as fragmented MP4.
@Suite struct LiveCompositeFileTests {
    @Test(
        "A fragmented MP4 live composite: H264 + AAC that decodes, both tiles showing their pictures, nothing dropped"
    )
    func fragmentedMP4() async throws {
        let directory = try TestPaths.temporaryDirectory("conclave-live-composite")
        defer { try? FileManager.default.removeItem(at: directory) }
        let call = SimulatedCall.standard(participants: 2, seconds: 3, varied: false)
        var frames: [(time: Int64, feedID: UInt64, frame: EncodedFrame)] = []
        for member in call.members {
            for case .frame(let feedID, _, let frame, let time) in try call.publisher(member).events(recordingStart: 0)
            {
                frames.append((time, feedID, frame))
            }
        }
        frames.sort { $0.time < $1.time }
        var options = CompositeOptions()
        options.width = 640
        options.height = 480
        let path = directory.appendingPathComponent("live.mp4").path
        let composite = try LiveComposite(path: path, options: options)
        for member in call.members { composite.participantJoined(feedID: member.feedID, display: member.display) }
        let clock = ContinuousClock()
        let start = clock.now
        let origin = frames.first?.time ?? 0
        for item in frames {
            // Pacing, as the frames arrive in a call.
            try await clock.sleep(until: start + .microseconds(item.time - origin), tolerance: .milliseconds(1))
            composite.received(feedID: item.feedID, frame: item.frame)
        }
        let report = await composite.finish()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.videoFramesDropped == 0 && report.audioFramesDropped == 0)
        #expect(try FFmpeg.probeStreams(path).sorted() == ["aac", "h264"])
        #expect(try FFmpeg.decodeErrors(path) == "")
        // Fragments (moof boxes), not one moov written at the end.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("moof".utf8)) != nil, "not fragmented")
        let pictures = try decodePictures(path)
        #expect(pictures.count == report.frames)
        // Two 320x240 pictures, 1:1 in 320x480 tiles side by side.
        let last = try #require(pictures.dropLast(5).last)
        for x in [0, 320] {
            #expect(last.reading(in: TileRect(x: x, y: 120, width: 320, height: 240)) != nil, "tile at \(x)")
        }
    }
}

/// The files that carry participants' names to the tiles' labels.
@Suite struct TileNameFilesTests {
    @Test("The names' folder is private, in TMPDIR, and removed with the renderer even when nothing removed it")
    func nameFolderGoesWithTheRenderer() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-name-files")
        defer { try? FileManager.default.removeItem(at: directory) }
        let options = CompositeOptions()
        var folder = ""
        do {
            let encoder = try options.makeEncoder(
                path: directory.appendingPathComponent("names.mkv").path,
                format: .matroska,
                audio: false
            )
            let renderer = try TileRenderer(options: options, encoder: encoder, names: ["Alice", "Bob\nEve"])
            folder = renderer.nameFolder
            #expect(folder.hasPrefix(FileManager.default.temporaryDirectory.path + "/"), "\(folder)")
            let attributes = try FileManager.default.attributesOfItem(atPath: folder)
            #expect((attributes[.posixPermissions] as? Int) == 0o700)
            #expect(try String(contentsOfFile: folder + "/1.txt", encoding: .utf8) == "Bob Eve")
        }
        // The renderer is gone without removeNameFiles(), as after a composite that failed.
        #expect(!folder.isEmpty && !FileManager.default.fileExists(atPath: folder), "\(folder) was left behind")
    }
}
