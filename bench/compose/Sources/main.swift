import ConclaveCompose
import ConclaveCore
import Foundation
import RecordingTestBed

#if canImport(Glibc)
    import Glibc
#endif

// Composite benchmark, in one run:
// 1. a recording of a 60 s call of four (640x360 pattern + tone each, VP8 and H264, everyone
//    there the whole call) is written with RecordingTestBed's simulated call;
// 2. `VideoComposition` composes it to 1280x720 at 30 fps, H264 (libx264, one thread) in this
//    process;
// 3. the `ffmpeg` program runs the same libavfilter graph (the one the composition reports, with
//    the participants' files as inputs instead of buffer sources) with the same encoder settings,
//    one thread for decoding, filtering and encoding.
// It prints CPU and wall time of both, the ratio of the CPUs (target <= 1.05) and how many times
// faster than real time the composition runs on one core (target >= 3).
//
//   BENCH_SECONDS=60 BENCH_PARTICIPANTS=4 BENCH_PRESET=ultrafast bench/compose/run

let environment = ProcessInfo.processInfo.environment
let seconds = Int(environment["BENCH_SECONDS"] ?? "") ?? 60
let participants = Int(environment["BENCH_PARTICIPANTS"] ?? "") ?? 4
/// libx264's preset for both encoders (the composition's default unless set).
let preset = environment["BENCH_PRESET"]

func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// CPU seconds (user + system) of this process, or of its waited-for children.
func cpuSeconds(_ who: __rusage_who) -> Double {
    var usage = rusage()
    getrusage(Int32(who.rawValue), &usage)
    func value(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return value(usage.ru_utime) + value(usage.ru_stime)
}

func wallSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Frames in a file's first video stream, as ffprobe counts them.
func frameCount(_ path: String) throws -> Int {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
    process.arguments = [
        "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries", "stream=nb_read_packets", "-of",
        "csv=p=0", path,
    ]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard let count = Int(text) else { throw BenchError("ffprobe could not count the frames of \(path): \(text)") }
    return count
}

/// The composition's graph for the `ffmpeg` program: input `k` of the files instead of buffer
/// source `in<k>`, an output label instead of the sink, the names from `names`.
func ffmpegGraph(_ graph: String, names: String) throws -> String {
    var text = graph
    let buffer = try NSRegularExpression(pattern: "buffer@in([0-9]+)=[^,;\\[]*,")
    text = buffer.stringByReplacingMatches(
        in: text,
        range: NSRange(text.startIndex..., in: text),
        withTemplate: "[$1:v]"
    )
    let textFile = try NSRegularExpression(pattern: "textfile=[^:]*/([0-9]+)\\.txt")
    text = textFile.stringByReplacingMatches(
        in: text,
        range: NSRange(text.startIndex..., in: text),
        withTemplate: "textfile=\(names)/$1.txt"
    )
    text = text.replacingOccurrences(of: ",buffersink@out", with: "[v]")
    guard !text.contains("buffer@"), text.hasSuffix("[v]") else { throw BenchError("unexpected graph: \(graph)") }
    return text
}

/// BENCH_LIVE=1: the live composite (1280x720/30 grid, H264 + Opus in Matroska) fed in real time
/// with the encoded frames of simulated publishers (640x360, VP8 and H264 alternately, everyone
/// there the whole call), as `record --composite` is fed by the call; reports the CPU per second
/// of call and the input video frames dropped (target 0).
///   BENCH_LIVE=1 BENCH_SECONDS=20 BENCH_LIVE_PARTICIPANTS=4,9 bench/compose/run
func benchLive(participantCounts: [Int], seconds: Int) async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-live-\(getpid())").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    for count in participantCounts {
        let call = SimulatedCall.standard(participants: count, seconds: seconds, width: 640, height: 360, varied: false)
        say("bench-compose live: encoding \(seconds) s of \(count) participants at 640x360 ...")
        var frames: [(time: Int64, feedID: UInt64, frame: EncodedFrame)] = []
        for member in call.members {
            for case .frame(let feedID, _, let frame, let time) in try call.publisher(member).events(recordingStart: 0)
            {
                frames.append((time, feedID, frame))
            }
        }
        frames.sort { $0.time < $1.time }
        var options = CompositeOptions()
        if let preset { options.x264Preset = preset }
        let path = folder + "/live-\(count).mkv"
        let cpuBefore = cpuSeconds(RUSAGE_SELF)
        let wallBefore = wallSeconds()
        let composite = try LiveComposite(path: path, options: options)
        for member in call.members { composite.participantJoined(feedID: member.feedID, display: member.display) }
        let origin = frames.first?.time ?? 0
        for item in frames {
            // Pacing, as the frames arrive in a call.
            let due = wallBefore + Double(item.time - origin) / 1e6
            let wait = due - wallSeconds()
            if wait > 0 { usleep(useconds_t(wait * 1e6)) }
            composite.received(feedID: item.feedID, frame: item.frame)
        }
        let report = await composite.finish()
        let cpu = cpuSeconds(RUSAGE_SELF) - cpuBefore
        let wall = wallSeconds() - wallBefore
        say("live composite 1280x720/30 H264 (preset \(options.x264Preset)) of \(count) participants, \(seconds) s")
        say(
            String(
                format: "  CPU %.2f s in %.2f s: %.3f s of CPU per second of call; %d frames written",
                cpu,
                wall,
                cpu / wall,
                report.frames
            )
        )
        say(
            "  input video frames dropped: \(report.videoFramesDropped) (target 0), audio frames dropped: "
                + "\(report.audioFramesDropped), problems: \(report.problems.count)"
        )
    }
}

if environment["BENCH_LIVE"] == "1" {
    let counts = (environment["BENCH_LIVE_PARTICIPANTS"] ?? "4,9").split(separator: ",").compactMap { Int($0) }
    do {
        try await benchLive(participantCounts: counts, seconds: Int(environment["BENCH_SECONDS"] ?? "") ?? 20)
    } catch {
        FileHandle.standardError.write(Data("bench-compose: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}

do {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-compose-\(getpid())").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }

    let call = SimulatedCall.standard(
        participants: participants,
        seconds: seconds,
        width: 640,
        height: 360,
        varied: false
    )
    say("bench-compose: recording \(seconds) s of \(participants) participants at 640x360 ...")
    _ = try call.record(to: folder + "/recording")
    let timeline = try CompositionTimeline.load(directory: folder + "/recording")

    // 1. In process.
    var options = CompositeOptions()
    options.width = 1280
    options.height = 720
    options.frameRate = 30
    if let preset { options.x264Preset = preset }
    let ours = folder + "/conclave.mp4"
    let cpuBefore = cpuSeconds(RUSAGE_SELF)
    let wallBefore = wallSeconds()
    let report = try VideoComposition.compose(timeline, to: ours, options: options)
    let ourCPU = cpuSeconds(RUSAGE_SELF) - cpuBefore
    let ourWall = wallSeconds() - wallBefore
    guard report.problems.isEmpty else { throw BenchError("problems: \(report.problems)") }

    // 2. The ffmpeg program, the same graph (the one with every tile live: the longest period).
    guard let graph = report.graphs.max(by: { $0.count < $1.count }) else { throw BenchError("no graph") }
    let names = folder + "/names"
    try FileManager.default.createDirectory(atPath: names, withIntermediateDirectories: true)
    for (index, participant) in timeline.participants.enumerated() {
        try Data(participant.name.utf8).write(to: URL(fileURLWithPath: "\(names)/\(index).txt"))
    }
    let theirs = folder + "/ffmpeg.mp4"
    var arguments = ["-hide_banner", "-v", "error", "-y", "-filter_threads", "1", "-filter_complex_threads", "1"]
    for participant in timeline.participants {
        guard let file = participant.segments.first?.path else { throw BenchError("no segment") }
        arguments += ["-threads", "1", "-i", file]
    }
    arguments += [
        "-filter_complex", try ffmpegGraph(graph, names: names), "-map", "[v]", "-an", "-c:v", "libx264",
        "-preset", options.x264Preset, "-crf", "23", "-g", "60", "-threads", "1", "-r", "30", theirs,
    ]
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    process.arguments = arguments
    let childBefore = cpuSeconds(RUSAGE_CHILDREN)
    let ffmpegStart = wallSeconds()
    try process.run()
    process.waitUntilExit()
    let ffmpegWall = wallSeconds() - ffmpegStart
    let ffmpegCPU = cpuSeconds(RUSAGE_CHILDREN) - childBefore
    guard process.terminationStatus == 0 else { throw BenchError("ffmpeg failed (\(process.terminationStatus))") }

    let ourFrames = try frameCount(ours)
    let theirFrames = try frameCount(theirs)
    say(
        "composite 1280x720/30 H264 (\(report.videoEncoder), preset \(options.x264Preset)) of \(seconds) s, \(participants) tiles"
    )
    say(String(format: "  conclave: CPU %.2f s, wall %.2f s, %d frames", ourCPU, ourWall, ourFrames))
    say(String(format: "  ffmpeg:   CPU %.2f s, wall %.2f s, %d frames", ffmpegCPU, ffmpegWall, theirFrames))
    say(String(format: "  CPU ratio conclave/ffmpeg: %.3fx (target <= 1.05x)", ourCPU / ffmpegCPU))
    say(
        String(format: "  real time on one core: %.2fx (target >= 3x)", Double(seconds) / ourCPU)
    )
} catch {
    FileHandle.standardError.write(Data("bench-compose: \(error)\n".utf8))
    exit(1)
}
