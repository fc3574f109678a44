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
        let result = try runProcess(try tool("ffmpeg"), ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(result.succeeded, "ffmpeg failed on \(path): \(result.errorOutput)")
        return result.errorOutput
    }

    /// The number of decoded frames of the first stream of `kind` ("v" or "a"), by ffprobe -count_frames.
    static func frameCount(_ path: String, stream: String = "v:0") throws -> Int {
        let result = try runProcess(
            try tool("ffprobe"),
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
            try tool("ffprobe"),
            [
                "-v", "error", "-count_packets", "-select_streams", stream, "-show_entries", "stream=nb_read_packets",
                "-of", "csv=p=0", path,
            ]
        )
        #expect(result.succeeded, "ffprobe failed on \(path): \(result.errorOutput)")
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

/// Finds a program on PATH, failing with a clear message when it is missing.
///
/// (ConclaveTestSupport's `which` currently splits PATH into characters, so it never finds
/// anything; this lookup stands in until that is fixed.)
func tool(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"]
    for directory in directories where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
        return directory + "/" + name
    }
    throw MissingTool(name: name)
}

/// A program the media tests need is not installed.
struct MissingTool: Error, CustomStringConvertible {
    var name: String
    var description: String { "\(name) is not installed; the media tests need it (apt-get install ffmpeg)" }
}

/// Deterministic random numbers for fuzzing (SplitMix64), so a failure reproduces.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
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
