import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Testing

/// ffmpeg/ffprobe checks shared by the codec and container tests.
enum FFmpeg {
    /// Decodes the whole file with ffmpeg; returns its error output (empty when the file is clean).
    static func decodeErrors(_ path: String) throws -> String {
        let result = try runProcess(try which("ffmpeg"), ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(result.succeeded, "ffmpeg failed on \(path): \(result.errorOutput)")
        return result.errorOutput
    }

    /// The number of decoded frames of the first stream of `kind` ("v" or "a"), by ffprobe -count_frames.
    static func frameCount(_ path: String, stream: String = "v:0") throws -> Int {
        let result = try runProcess(
            try which("ffprobe"),
            [
                "-v", "error", "-count_frames", "-select_streams", stream, "-show_entries", "stream=nb_read_frames",
                "-of", "csv=p=0", path,
            ]
        )
        #expect(result.succeeded, "ffprobe failed on \(path): \(result.errorOutput)")
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// The number of packets of a stream, by ffprobe -count_packets.
    static func packetCount(_ path: String, stream: String) throws -> Int {
        let result = try runProcess(
            try which("ffprobe"),
            [
                "-v", "error", "-count_packets", "-select_streams", stream, "-show_entries", "stream=nb_read_packets",
                "-of", "csv=p=0", path,
            ]
        )
        #expect(result.succeeded, "ffprobe failed on \(path): \(result.errorOutput)")
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

/// Writes encoded frames as the simplest files ffmpeg reads: raw Annex-B H264, hand-built IVF.
enum RawFiles {
    static func annexB(_ frames: [EncodedFrame], to path: String) throws {
        let bytes = frames.flatMap(\.data)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}

extension URL {
    var pathString: String { path }
}
