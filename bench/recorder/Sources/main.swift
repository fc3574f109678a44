import ConclaveRecorder
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed

#if canImport(Glibc)
    import Glibc
#endif

// Recorder benchmark, against a real Janus in a test-bed namespace (run as root).
//
// The same room of N publishers (N = 1, 8, 32 by default) is recorded twice, one recorder after
// the other so they never compete for the cores: by `conclave record --crypto none` and by
// aiortc's MediaRecorder (one subscriber and one recorder per feed, as its examples do). The
// publishers are Janus `add_remote_publisher` entries fed by ffmpeg with plain RTP (VP8 1 Mbit/s
// + Opus), so they cost the recorders nothing. For each recorder the bench prints CPU-seconds
// (user + system, whole process, from wait4) per recorded stream-second (one publisher's audio
// and video for one second), peak resident memory, and frames written / frames sent over the
// recorded span (sent = 30 video + 50 audio frames per second of each file's span).
//
//   BENCH_FEEDS=1,8,32 BENCH_SECONDS=20 bench/recorder/run

let environment = ProcessInfo.processInfo.environment
let feedCounts = (environment["BENCH_FEEDS"] ?? "1,8,32").split(separator: ",").compactMap { Int($0) }
let recordSeconds = Int(environment["BENCH_SECONDS"] ?? "") ?? 20
let packageRoot = FileManager.default.currentDirectoryPath
let binaries = environment["BENCH_BIN"] ?? packageRoot + "/.build/release"
let python = environment["CONCLAVE_PYTHON"] ?? packageRoot + "/.venv/bin/python3"

/// Prints a line at once (standard output may be a file or a pipe).
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The resources a finished child used.
struct ChildUsage {
    var cpuSeconds: Double
    var peakMegabytes: Double
    var status: Int32
}

/// Runs a command to completion through `sh -c 'exec ...'` and reads its CPU time and peak
/// memory from wait4 (exec keeps the process, so the figures are the command's own).
func measure(_ arguments: [String], log: String) throws -> ChildUsage {
    let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let script = "exec \(quoted) >'\(log)' 2>&1"
    var pid: pid_t = 0
    let words: [String] = ["/bin/sh", "-c", script]
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in strdup(word) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    let rc = posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ)
    guard rc == 0 else { throw BenchError("cannot start \(arguments.first ?? ""): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 {
        guard errno == EINTR else { throw BenchError("wait4 failed: \(String(cString: strerror(errno)))") }
    }
    let cpu =
        Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
    return ChildUsage(cpuSeconds: cpu, peakMegabytes: Double(usage.ru_maxrss) / 1024, status: status)
}

func run(_ executable: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [executable] + arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw BenchError("\(executable) \(arguments.joined(separator: " ")) failed")
    }
    return output
}

/// Frames in a file's first stream of `kind` ("v" or "a") and the span their timestamps cover.
func packetSpan(_ path: String, stream: String) throws -> (packets: Int, seconds: Double) {
    let output = try run(
        "ffprobe",
        ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", path]
    )
    let times = output.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    guard let first = times.min(), let last = times.max() else { return (0, 0) }
    return (times.count, last - first)
}

/// What a recorder produced: frames written, and frames the publishers sent over the same span.
struct Outcome {
    var written = 0
    var sent = 0
    var files = 0
    var videoWritten = 0
    var videoSent = 0
    var audioWritten = 0
    var audioSent = 0
}

func analyze(files: [String]) throws -> Outcome {
    var outcome = Outcome()
    for file in files {
        let video = try packetSpan(file, stream: "v:0")
        let audio = try packetSpan(file, stream: "a:0")
        outcome.files += 1
        outcome.written += video.packets + audio.packets
        let videoSent = video.packets > 0 ? Int((video.seconds * 30).rounded()) + 1 : 0
        let audioSent = audio.packets > 0 ? Int((audio.seconds * 50).rounded()) + 1 : 0
        outcome.sent += videoSent + audioSent
        outcome.videoWritten += video.packets
        outcome.videoSent += videoSent
        outcome.audioWritten += audio.packets
        outcome.audioSent += audioSent
    }
    return outcome
}

func report(_ name: String, feeds: Int, usage: ChildUsage, outcome: Outcome) -> Double {
    // Stream-seconds: every publisher for the whole recording (joining included), the same
    // denominator for both recorders.
    let streamSeconds = Double(feeds * recordSeconds)
    let perStreamSecond = usage.cpuSeconds / streamSeconds
    say(
        String(
            format:
                "  %@ N=%2d: %.5f CPU-s per stream-second (%.2f%% of a core per participant), CPU %.1f s, peak %.0f MB, frames written/sent %d/%d (%.4f; video %d/%d, audio %d/%d), %d files%@",
            name.padding(toLength: 8, withPad: " ", startingAt: 0),
            feeds,
            perStreamSecond,
            100 * perStreamSecond,
            usage.cpuSeconds,
            usage.peakMegabytes,
            outcome.written,
            outcome.sent,
            outcome.sent > 0 ? Double(outcome.written) / Double(outcome.sent) : 0,
            outcome.videoWritten,
            outcome.videoSent,
            outcome.audioWritten,
            outcome.audioSent,
            outcome.files,
            usage.status == 0 ? "" : " (exit status \(usage.status))"
        )
    )
    return perStreamSecond
}

let bed = try JanusTestBed()
defer { bed.stop() }
say(
    "Janus \(bed.webSocketURL); \(ProcessInfo.processInfo.activeProcessorCount) cores; \(recordSeconds) s per recording; VP8 1 Mbit/s + Opus per publisher"
)
let connection = try await JanusConnection.connect(to: bed.webSocketURL)
let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-recorder-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { if environment["BENCH_KEEP"] == nil { try? FileManager.default.removeItem(at: directory) } }
let media = directory.appendingPathComponent("feed.webm").path
_ = try run(
    "ffmpeg",
    [
        "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x480:rate=30", "-f", "lavfi", "-i",
        "sine=frequency=440:sample_rate=48000", "-t", "12", "-c:v", "libvpx", "-b:v", "1M", "-minrate", "1M",
        "-maxrate", "1M", "-deadline", "realtime", "-cpu-used", "8", "-g", "60", "-c:a", "libopus", "-b:a", "32k",
        "-y", media,
    ]
)

for feeds in feedCounts {
    let room = try await admin.createRoom(.init(room: UInt64(200 + feeds), publishers: feeds + 4, videoCodecs: ["vp8"]))
    var ffmpegs: [Process] = []
    var feedIDs: [UInt64] = []
    for index in 0..<feeds {
        let (data, _) = try await admin.request(
            [
                "request": "add_remote_publisher", "room": .id(room), "display": .string("\(index):Remote \(index)"),
                "iface": .string(bed.janusAddress),
                "streams": [
                    ["type": "audio", "mindex": 0, "mid": "0", "codec": "opus"],
                    ["type": "video", "mindex": 1, "mid": "1", "codec": "vp8"],
                ],
            ],
            name: "add_remote_publisher"
        )
        guard let port = data["port"]?.intValue else { throw BenchError("add_remote_publisher gave no port") }
        if let id = data["id"]?.intValue { feedIDs.append(UInt64(id)) }
        let target = "rtp://\(bed.janusAddress):\(port)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "ffmpeg", "-v", "error", "-re", "-stream_loop", "-1", "-i", media, "-map", "0:a", "-c", "copy", "-ssrc",
            "1000", "-payload_type", "111", "-f", "rtp", target, "-map", "0:v", "-c", "copy", "-ssrc", "1010",
            "-payload_type", "96", "-f", "rtp", target,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        ffmpegs.append(process)
    }
    if feedIDs.count != feeds {
        let participants = try await admin.listParticipants(room: room)
        feedIDs = participants.filter(\.isPublisher).map(\.id)
    }
    try await Task.sleep(for: .seconds(2))
    say("N = \(feeds) publishers (room \(room))")

    // Conclave
    let conclaveOut = directory.appendingPathComponent("conclave-\(feeds)").path
    let conclaveUsage = try measure(
        [
            binaries + "/conclave", "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id", "1",
            "--crypto", "none", "--out", conclaveOut, "--ice-address", bed.hostAddress, "--duration",
            "\(recordSeconds)", "--log-level", "error",
        ],
        log: directory.appendingPathComponent("conclave-\(feeds).log").path
    )
    let manifest = try? RecordingManifest.read(from: conclaveOut)
    let conclaveFiles = (manifest?.participants ?? []).flatMap(\.segments).compactMap(\.file).map {
        conclaveOut + "/" + $0
    }
    let conclaveCPU = report(
        "conclave",
        feeds: feeds,
        usage: conclaveUsage,
        outcome: try analyze(files: conclaveFiles)
    )

    // aiortc
    let aiortcOut = directory.appendingPathComponent("aiortc-\(feeds)").path
    let aiortcUsage = try measure(
        [
            python, packageRoot + "/bench/recorder/aiortc_record.py", "--janus", bed.webSocketURL, "--room",
            "\(room)", "--feeds", feedIDs.map(String.init).joined(separator: ","), "--address", bed.hostAddress,
            "--out", aiortcOut, "--duration", "\(recordSeconds)",
        ],
        log: directory.appendingPathComponent("aiortc-\(feeds).log").path
    )
    let aiortcFiles = ((try? FileManager.default.contentsOfDirectory(atPath: aiortcOut)) ?? []).sorted().map {
        aiortcOut + "/" + $0
    }
    let aiortcCPU = report("aiortc", feeds: feeds, usage: aiortcUsage, outcome: try analyze(files: aiortcFiles))
    say(
        String(format: "  ratio N=%d: aiortc uses %.1fx the CPU of Conclave", feeds, aiortcCPU / max(conclaveCPU, 1e-9))
    )
    if aiortcUsage.status != 0 {
        let log =
            (try? String(contentsOfFile: directory.appendingPathComponent("aiortc-\(feeds).log").path, encoding: .utf8))
            ?? ""
        say("  aiortc log tail: \(log.suffix(400))")
    }

    // SIGKILL: the feeders inherit a signal mask that blocks SIGTERM.
    for process in ffmpegs { kill(process.processIdentifier, SIGKILL) }
    for process in ffmpegs { process.waitUntilExit() }
    try await admin.destroyRoom(room)
}
await connection.close()
