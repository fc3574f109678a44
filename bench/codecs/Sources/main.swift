// Encode cost of Conclave's codec wrappers next to ffmpeg's encoders for the same libraries, on
// the same raw input, in the same run.
//
// For each codec: generate the raw input once (test pattern / tone), write it to a temporary
// .y4m/.wav, read it back, encode it with our encoder while measuring this process's CPU time,
// then let ffmpeg encode the same file with comparable settings (same bitrate, real-time speed,
// one thread) and measure the child's CPU time with getrusage. ffmpeg's cost of merely reading the
// input (a `-c copy` run) is measured too and subtracted, so the ratio compares encoding work.
import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveOpus
import ConclaveVPX
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

let width = 640
let height = 480
let frameRate = 30
let seconds = Int(ProcessInfo.processInfo.environment["BENCH_SECONDS"] ?? "") ?? 10
let videoBitrate = 1_000_000
let audioBitrate = 32_000

/// CPU seconds (user + system) used so far by this process or by its waited-for children.
func cpuSeconds(children: Bool) -> Double {
    var usage = rusage()
    getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Runs ffmpeg with `arguments` and returns the CPU seconds it used.
func ffmpegCPU(_ arguments: [String]) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    process.arguments = ["-hide_banner", "-v", "error", "-nostdin"] + arguments
    let before = cpuSeconds(children: true)
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw BenchError(
            description: "ffmpeg \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)"
        )
    }
    return cpuSeconds(children: true) - before
}

struct BenchError: Error, CustomStringConvertible { var description: String }

func report(_ name: String, ours: Double, ffmpeg: Double?, overhead: Double, baselineName: String) {
    let media = Double(seconds)
    let ourRate = ours / media
    guard let ffmpeg else {
        print(
            String(
                format: "%@: conclave %.4f CPU-s per media-s; %@ not available in this ffmpeg",
                name,
                ourRate,
                baselineName
            )
        )
        return
    }
    let theirs = max(0.000_001, ffmpeg - overhead) / media
    print(
        String(
            format: "%@: conclave %.4f CPU-s/s | ffmpeg %@ %.4f CPU-s/s (%.4f total, %.4f input overhead) | ratio %.3f",
            name,
            ourRate,
            baselineName,
            theirs,
            ffmpeg / media,
            overhead / media,
            ourRate / theirs
        )
    )
}

func hasEncoder(_ name: String) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
    process.arguments = ["-hide_banner", "-encoders"]
    let pipe = Pipe()
    process.standardOutput = pipe
    guard (try? process.run()) != nil else { return false }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return output.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first == Substring(name) }
}

func main() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-codecs-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let y4m = directory.appendingPathComponent("input.y4m").path
    let wav = directory.appendingPathComponent("input.wav").path

    // Raw input, written once and read back, so both sides encode the very same pixels and samples.
    let pattern = try PatternSource(width: width, height: height, frameRate: frameRate, frameLimit: seconds * frameRate)
    let y4mWriter = try Y4MWriter(path: y4m, width: width, height: height, frameRate: frameRate)
    while let picture = try pattern.nextFrame() { try y4mWriter.write(picture) }
    try y4mWriter.close()
    let tone = try ToneSource(channels: 1, frameLimit: seconds * 50)
    let wavWriter = try WAVWriter(path: wav, channels: 1)
    while let block = try tone.nextFrame() { try wavWriter.write(block) }
    try wavWriter.close()

    var pictures: [VideoFrame] = []
    let y4mReader = try Y4MReader(path: y4m)
    while let picture = try y4mReader.nextFrame() { pictures.append(picture) }
    var blocks: [AudioFrame] = []
    let wavReader = try WAVReader(path: wav)
    while let block = try wavReader.nextFrame() { blocks.append(block) }
    print(
        "input: \(seconds) s of \(width)x\(height)@\(frameRate) pattern (\(pictures.count) frames),",
        "\(blocks.count) Opus frames"
    )

    let videoOverhead = try ffmpegCPU(["-i", y4m, "-c", "copy", "-f", "null", "-"])
    let audioOverhead = try ffmpegCPU(["-i", wav, "-c", "copy", "-f", "null", "-"])

    // VP8: real-time, CBR 1 Mbit/s, cpu-used -6, one thread, error resilient, no lookahead.
    let vp8 = try VP8Encoder(
        configuration: VP8EncoderConfiguration(
            width: width,
            height: height,
            frameRate: frameRate,
            bitrate: videoBitrate,
            speed: -6,
            threads: 1
        )
    )
    var bytes = 0
    var start = cpuSeconds(children: false)
    for picture in pictures { bytes += try vp8.encode(picture, forceKeyframe: false).reduce(0) { $0 + $1.data.count } }
    let vp8CPU = cpuSeconds(children: false) - start
    print("VP8 output: \(bytes * 8 / seconds / 1000) kbit/s")
    let ffmpegVP8 = try ffmpegCPU([
        "-i", y4m, "-threads", "1", "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "-6", "-b:v", "1M",
        "-minrate", "1M", "-maxrate", "1M", "-bufsize", "1M", "-lag-in-frames", "0", "-error-resilient", "1",
        "-qmin", "2", "-qmax", "56", "-undershoot-pct", "100", "-overshoot-pct", "15", "-static-thresh", "1",
        "-noise-sensitivity", "0", "-auto-alt-ref", "0", "-g", "3000", "-f", "null", "-",
    ])
    report("VP8 640x480@30 1 Mbit/s", ours: vp8CPU, ffmpeg: ffmpegVP8, overhead: videoOverhead, baselineName: "libvpx")

    // H264: openh264 constrained baseline, 1 Mbit/s, one thread.
    let h264 = try H264Encoder(
        configuration: H264EncoderConfiguration(
            width: width,
            height: height,
            frameRate: frameRate,
            bitrate: videoBitrate,
            threads: 1
        )
    )
    bytes = 0
    start = cpuSeconds(children: false)
    for picture in pictures { bytes += try h264.encode(picture, forceKeyframe: false).reduce(0) { $0 + $1.data.count } }
    let h264CPU = cpuSeconds(children: false) - start
    print("H264 output: \(bytes * 8 / seconds / 1000) kbit/s")
    if hasEncoder("libopenh264") {
        let ffmpegH264 = try ffmpegCPU([
            "-i", y4m, "-threads", "1", "-c:v", "libopenh264", "-b:v", "1M", "-maxrate", "1500k", "-profile:v",
            "constrained_baseline", "-slices", "1", "-rc_mode", "bitrate", "-allow_skip_frames", "0", "-g", "0",
            "-f", "null", "-",
        ])
        report(
            "H264 640x480@30 1 Mbit/s",
            ours: h264CPU,
            ffmpeg: ffmpegH264,
            overhead: videoOverhead,
            baselineName: "libopenh264"
        )
    } else {
        report(
            "H264 640x480@30 1 Mbit/s",
            ours: h264CPU,
            ffmpeg: nil,
            overhead: videoOverhead,
            baselineName: "libopenh264"
        )
        // Not the same library, so no target applies; printed so the cost has a familiar yardstick.
        let x264 = try ffmpegCPU([
            "-i", y4m, "-threads", "1", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency",
            "-profile:v", "baseline", "-b:v", "1M", "-maxrate", "1M", "-bufsize", "1M", "-f", "null", "-",
        ])
        report(
            "  reference only, different library",
            ours: h264CPU,
            ffmpeg: x264,
            overhead: videoOverhead,
            baselineName: "libx264 veryfast baseline"
        )
    }

    // Opus: 32 kbit/s mono VoIP, 20 ms, complexity 9, in-band FEC at 10 % loss.
    let opus = try OpusAudioEncoder(
        configuration: OpusEncoderConfiguration(
            channels: 1,
            bitrate: audioBitrate,
            inbandFEC: true,
            expectedPacketLossPercent: 10,
            dtx: false,
            complexity: 9
        )
    )
    bytes = 0
    start = cpuSeconds(children: false)
    for block in blocks { bytes += try opus.encode(block)?.data.count ?? 0 }
    let opusCPU = cpuSeconds(children: false) - start
    print("Opus output: \(bytes * 8 / seconds / 1000) kbit/s")
    let ffmpegOpus = try ffmpegCPU([
        "-i", wav, "-threads", "1", "-c:a", "libopus", "-b:a", "32k", "-application", "voip", "-frame_duration", "20",
        "-compression_level", "9", "-fec", "1", "-packet_loss", "10", "-ac", "1", "-f", "null", "-",
    ])
    report("Opus 32 kbit/s mono", ours: opusCPU, ffmpeg: ffmpegOpus, overhead: audioOverhead, baselineName: "libopus")
}

do {
    try main()
} catch {
    FileHandle.standardError.write(Data("bench-codecs: \(error)\n".utf8))
    exit(1)
}
