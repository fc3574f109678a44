import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave recordings compose` on a recording written by `conclave-testbed recording`.
@Suite struct ComposeCommandTests {
    @Test("compose writes an owner-only file of the call's frames, with JSON progress when not on a terminal")
    func composesAFixtureRecording() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-compose-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let recording = directory.appendingPathComponent("recording").path
        let testbed = TestPaths.productsDirectory.appendingPathComponent("conclave-testbed").path
        let made = try runProcess(
            testbed,
            ["recording", "--participants", "3", "--seconds", "4", "--out", recording]
        )
        #expect(made.succeeded, "\(made.errorOutput)")
        let output = directory.appendingPathComponent("out/call.mp4").path
        let result = try runProcess(
            try TestPaths.conclave(),
            [
                "recordings", "compose", recording, "--out", output, "--size", "640x360", "--fps", "25", "--preset",
                "superfast",
            ]
        )
        #expect(result.succeeded, "\(result.errorOutput)")
        #expect(try FFmpeg.frameCount(output) == 4 * 25)
        #expect(try FFmpeg.probeStreams(output).sorted() == ["aac", "h264"])
        var info = stat()
        #expect(stat(output, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat((output as NSString).deletingLastPathComponent, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let lines = result.output.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "not JSON: \(line)")
        }
        #expect(lines.last?.contains("\"done\":true") == true, "\(result.output)")
        let leftovers = try FileManager.default.contentsOfDirectory(
            atPath: (output as NSString).deletingLastPathComponent
        )
        #expect(leftovers == ["call.mp4"])
    }

    @Test("compose --audio-only --stems writes the mix and one stem per participant, each the call's length")
    func audioOnlyAndStems() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-compose-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let recording = directory.appendingPathComponent("recording").path
        let testbed = TestPaths.productsDirectory.appendingPathComponent("conclave-testbed").path
        let made = try runProcess(testbed, ["recording", "--participants", "2", "--seconds", "3", "--out", recording])
        #expect(made.succeeded, "\(made.errorOutput)")
        let mix = directory.appendingPathComponent("mix.flac").path
        let stems = directory.appendingPathComponent("stems").path
        let result = try runProcess(
            try TestPaths.conclave(),
            ["recordings", "compose", recording, "--audio-only", "--out", mix, "--stems", stems, "--loudness", "r128"]
        )
        #expect(result.succeeded, "\(result.errorOutput)")
        #expect(try FFmpeg.probeStreams(mix) == ["flac"])
        let files = try FileManager.default.contentsOfDirectory(atPath: stems).sorted()
        #expect(files.count == 2, "\(files)")
        for file in files {
            #expect(try FFmpeg.probeStreams(stems + "/" + file) == ["pcm_s16le"])
        }
        let refused = try runProcess(
            try TestPaths.conclave(),
            [
                "recordings", "compose", recording, "--audio-only", "--out",
                directory.appendingPathComponent("x.mp4").path,
            ]
        )
        #expect(!refused.succeeded)
        #expect(refused.errorOutput.contains(".opus"), "\(refused.errorOutput)")
    }

    @Test("compose of a folder without a recording fails in one line and leaves no file")
    func missingRecordingIsOneLine() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-compose-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("call.webm").path
        let result = try runProcess(
            try TestPaths.conclave(),
            ["recordings", "compose", directory.appendingPathComponent("nothing").path, "--out", output]
        )
        #expect(!result.succeeded)
        #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
        #expect(result.errorOutput.contains("nothing"))
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test("compose refuses a preset libx264 does not have, naming the ones it has")
    func unknownPresetIsRefused() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-compose-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("call.mp4").path
        let result = try runProcess(
            try TestPaths.conclave(),
            ["recordings", "compose", directory.path, "--out", output, "--preset", "lightning"]
        )
        #expect(!result.succeeded)
        #expect(result.errorOutput.contains("--preset must be one of ultrafast, superfast"), "\(result.errorOutput)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
