import Foundation

/// ffmpeg and ffprobe checks on media files, shared by the codec, container, recorder and CLI
/// tests. A tool that fails on a file throws with its error output, so the test fails there.
public enum FFmpeg {
    /// ffmpeg output options that give each decoded picture once, in its own time: a browser's
    /// timestamps jitter by a few milliseconds, and converting them to a constant 30 frames a
    /// second (ffmpeg's default) would repeat and drop pictures and report colliding timestamps.
    public static let everyFrame = ["-fps_mode", "passthrough", "-enc_time_base:v", "-1"]

    /// Decodes the whole file; returns ffmpeg's error output (empty for a clean file).
    /// `everyFrame`: each picture once, in its own time (``everyFrame``), for a browser's recording.
    public static func decodeErrors(_ path: String, everyFrame: Bool = false) throws -> String {
        let output = everyFrame ? Self.everyFrame : []
        return try run("ffmpeg", ["-v", "error", "-i", path] + output + ["-f", "null", "-"], on: path).errorOutput
    }

    /// The codec names of the streams ffprobe sees in the file.
    public static func probeStreams(_ path: String) throws -> [String] {
        try run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", path], on: path)
            .output.split(separator: "\n").map { String($0).trimmingCharacters(in: .whitespaces) }
    }

    /// The number of decoded frames of a stream ("v:0", "a:0"), by ffprobe -count_frames.
    public static func frameCount(_ path: String, stream: String = "v:0") throws -> Int {
        try count(path, stream: stream, option: "-count_frames", entry: "stream=nb_read_frames")
    }

    /// The number of packets of a stream, by ffprobe -count_packets.
    public static func packetCount(_ path: String, stream: String) throws -> Int {
        try count(path, stream: stream, option: "-count_packets", entry: "stream=nb_read_packets")
    }

    /// Absolute presentation times (seconds) of every packet of the first audio stream.
    public static func audioPacketTimes(_ path: String) throws -> [Double] {
        try run(
            "ffprobe",
            ["-v", "error", "-select_streams", "a:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path],
            on: path
        )
        .output.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    private static func count(_ path: String, stream: String, option: String, entry: String) throws -> Int {
        let result = try run(
            "ffprobe",
            ["-v", "error", option, "-select_streams", stream, "-show_entries", entry, "-of", "csv=p=0", path],
            on: path
        )
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    private static func run(_ tool: String, _ arguments: [String], on path: String) throws -> ProcessResult {
        let executable: String
        do { executable = try which(tool) } catch {
            throw SubprocessError(description: "\(tool) is needed by this test and is not on PATH (apt install ffmpeg)")
        }
        let result = try runProcess(executable, arguments)
        guard result.succeeded else {
            throw SubprocessError(description: "\(tool) failed on \(path): \(result.errorOutput)")
        }
        return result
    }
}
