import ConclaveCall
import ConclaveCore
import ConclaveE2EE
import ConclaveMedia
import ConclaveOpenSSL
import ConclaveRecorder
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import Logging

#if canImport(Glibc)
    import Glibc
#endif

// Recorder benchmark, against a real Janus in a test-bed namespace (run as root).
//
// For each N (1, 8, 32 by default):
// 1. Unencrypted: a room of N Janus `add_remote_publisher` entries fed by ffmpeg with plain RTP
//    (VP8 1 Mbit/s + Opus, so the publishers cost the recorders nothing) is recorded twice, one
//    recorder after the other so they never compete for the cores: by `conclave record --crypto
//    none` and by aiortc's MediaRecorder (one subscriber and one recorder per feed, as its
//    examples do).
// 2. Encrypted: a room of N Conclave publishers in this process, sending the same VP8 + Opus
//    file (passed through, not re-encoded) encrypted with ECall's frame format, recorded by
//    `conclave record --crypto ecall --key-file`. aiortc cannot decrypt, so there is no baseline.
//
// For each recording it prints CPU-seconds per recorded stream-second (one publisher's audio
// and video for one second) over the steady part of the recording (from a few seconds after the
// start, when every subscription is up, to the end of the recording; sampled from /proc), the
// same over the whole process (start-up and the clean finish, which rebuilds each file from its
// journals, included), peak resident memory, and frames written / frames sent over the recorded
// span (sent = 30 video + 50 audio frames per second of each file's span), and the CPU ratio.
//
//   BENCH_FEEDS=1,8,32 BENCH_SECONDS=20 bench/recorder/run

let environment = ProcessInfo.processInfo.environment
let feedCounts = (environment["BENCH_FEEDS"] ?? "1,8,32").split(separator: ",").compactMap { Int($0) }
let recordSeconds = Int(environment["BENCH_SECONDS"] ?? "") ?? 20
let packageRoot = FileManager.default.currentDirectoryPath
let binaries = environment["BENCH_BIN"] ?? packageRoot + "/.build/release"
let python = environment["CONCLAVE_PYTHON"] ?? packageRoot + "/.venv/bin/python3"
/// aiortc's MediaRecorder decodes and re-encodes (libvpx) every feed: about a core per 640x480
/// feed on this machine (it drops frames even with one), so it records at most this many of the
/// N feeds (more would starve everything else on the machine and drop most frames).
let aiortcMaxFeeds = Int(environment["BENCH_AIORTC_FEEDS"] ?? "") ?? 1

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
    /// CPU-seconds of the whole process: start-up (signalling, ICE, DTLS, subscribing), the
    /// recording, and the clean finish (the recorder rebuilds each file from its journals).
    var cpuSeconds: Double
    /// CPU-seconds over the steady part of the recording only (see ``measure(_:log:steady:)``).
    var steadyCPUSeconds: Double
    /// The wall-clock length of that steady window.
    var steadySeconds: Double
    var peakMegabytes: Double
    var status: Int32
}

/// The CPU time of a running process: the sum over its threads of the nanoseconds each has run
/// (`/proc/PID/task/TID/schedstat`). At one participant the recorder uses under 1% of a core, 0.1 s
/// in a 12 s window, so the 10 ms clock ticks of `/proc/PID/stat` would be a tenth of the figure.
/// Falls back to those ticks where schedstat is missing.
func processCPUSeconds(_ pid: pid_t) -> Double? {
    if let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
        var nanoseconds: UInt64 = 0
        var read = 0
        for task in tasks {
            guard let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
                let first = line.split(separator: " ").first, let value = UInt64(first)
            else { continue }
            nanoseconds += value
            read += 1
        }
        if read > 0 { return Double(nanoseconds) / 1e9 }
    }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    // Fields after "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Runs a command to completion through `sh -c 'exec ...'` and reads its CPU time and peak
/// memory from wait4 (exec keeps the process, so the figures are the command's own).
///
/// While it runs, its CPU time is sampled from /proc every 100 ms, so the CPU of the steady
/// window `steady` (seconds after the start) can be told apart from start-up and finish.
func measure(_ arguments: [String], log: String, steady: ClosedRange<Double>) throws -> ChildUsage {
    let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let script = "exec \(quoted) >'\(log)' 2>&1"
    var pid: pid_t = 0
    let words: [String] = ["/bin/sh", "-c", script]
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in strdup(word) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    let start = ContinuousClock.now
    let rc = posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ)
    guard rc == 0 else { throw BenchError("cannot start \(arguments.first ?? ""): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    var usage = rusage()
    var window: (start: (Double, Double)?, end: (Double, Double)?) = (nil, nil)
    while true {
        let result = wait4(pid, &status, WNOHANG, &usage)
        if result == pid { break }
        if result < 0 {
            guard errno == EINTR else { throw BenchError("wait4 failed: \(String(cString: strerror(errno)))") }
            continue
        }
        let elapsed =
            Double((ContinuousClock.now - start).components.attoseconds) / 1e18
            + Double((ContinuousClock.now - start).components.seconds)
        if elapsed >= steady.lowerBound, elapsed <= steady.upperBound, let cpu = processCPUSeconds(pid) {
            if window.start == nil { window.start = (elapsed, cpu) }
            window.end = (elapsed, cpu)
        }
        usleep(100_000)
    }
    let cpu =
        Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
    var steadyCPU = 0.0
    var steadySeconds = 0.0
    if let first = window.start, let last = window.end {
        steadyCPU = last.1 - first.1
        steadySeconds = last.0 - first.0
    }
    return ChildUsage(
        cpuSeconds: cpu,
        steadyCPUSeconds: steadyCPU,
        steadySeconds: steadySeconds,
        peakMegabytes: Double(usage.ru_maxrss) / 1024,
        status: status
    )
}

/// Frames in a file's first stream of `kind` ("v" or "a") and the span their timestamps cover;
/// nil when ffprobe cannot read the file (a recorder killed or overloaded mid-write).
func packetSpan(_ path: String, stream: String) -> (packets: Int, seconds: Double)? {
    guard
        let output = try? JanusTestBed.runCommand(
            "ffprobe",
            ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", path]
        )
    else { return nil }
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
    var unreadable = 0
}

func analyze(files: [String]) -> Outcome {
    var outcome = Outcome()
    for file in files {
        guard let video = packetSpan(file, stream: "v:0"), let audio = packetSpan(file, stream: "a:0") else {
            outcome.unreadable += 1
            continue
        }
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

/// The steady window of a recording of `recordSeconds`, in seconds after the recorder started:
/// from when every subscription is up and the files are open to when the recording ends.
let steadyWindow: ClosedRange<Double> = min(8, Double(recordSeconds) / 2)...Double(recordSeconds)

/// CPU-seconds per stream-second over the steady window and over the whole process, and CPU
/// milliseconds per frame written (the fair figure for a recorder that cannot keep up and
/// drops frames: its CPU per stream-second is capped by the cores it has).
struct CPUFigures {
    var steady: Double
    var whole: Double
    var perFrame: Double
}

func report(_ name: String, feeds: Int, usage: ChildUsage, outcome: Outcome) -> CPUFigures {
    let steady = usage.steadySeconds > 0 ? usage.steadyCPUSeconds / (Double(feeds) * usage.steadySeconds) : 0
    // The whole process, over every publisher for the whole recording (joining included).
    let whole = usage.cpuSeconds / Double(feeds * recordSeconds)
    let perFrame = outcome.written > 0 ? 1000 * usage.cpuSeconds / Double(outcome.written) : .infinity
    say(
        String(
            format:
                "  %@ N=%2d: steady %.5f CPU-s per stream-second (%.2f%% of a core per participant, %.1f s window); whole process %.5f (%.2f%%, CPU %.1f s, %.3f ms per frame written); peak %.0f MB; frames written/sent %d/%d (%.4f; video %d/%d, audio %d/%d), %d files%@%@",
            name.padding(toLength: 15, withPad: " ", startingAt: 0),
            feeds,
            steady,
            100 * steady,
            usage.steadySeconds,
            whole,
            100 * whole,
            usage.cpuSeconds,
            perFrame,
            usage.peakMegabytes,
            outcome.written,
            outcome.sent,
            outcome.sent > 0 ? Double(outcome.written) / Double(outcome.sent) : 0,
            outcome.videoWritten,
            outcome.videoSent,
            outcome.audioWritten,
            outcome.audioSent,
            outcome.files,
            outcome.unreadable == 0 ? "" : " (\(outcome.unreadable) unreadable)",
            usage.status == 0 ? "" : " (exit status \(usage.status))"
        )
    )
    return CPUFigures(steady: steady, whole: whole, perFrame: perFrame)
}

/// A Conclave publisher in this process sending a media file's VP8 and Opus, passed through and
/// encrypted with ECall's frame format under `key`.
struct EncryptedPublisher {
    let publisher: Publisher
    let tasks: [Task<Void, Never>]

    static func start(
        on connection: JanusConnection,
        room: UInt64,
        index: Int,
        media: String,
        key: CallKey,
        callID: UInt64,
        address: String,
        logger: Logger
    ) async throws -> EncryptedPublisher {
        let publisher = try await Publisher.publish(
            on: try await connection.createSession(),
            configuration: .init(
                room: room,
                display: "\(index):Encrypted \(index)",
                video: .vp8,
                endToEndEncrypted: true,
                transport: .init(localAddresses: [address])
            ),
            logger: logger
        )
        let crypto = CallFrameCrypto(callID: callID, format: .ecall, logger: logger)
        crypto.keyRing.install(key, epoch: 0)
        let video = MediaSender(
            source: try FileMediaSource(path: media, codec: .vp8, loop: true),
            encryptor: crypto.makeEncryptor(codec: .vp8, senderID: publisher.feedID, cipher: OpenSSLFrameCipher.self),
            publisher: publisher,
            logger: logger
        )
        let audio = MediaSender(
            source: try FileMediaSource(path: media, codec: .opus, loop: true),
            encryptor: crypto.makeEncryptor(codec: .opus, senderID: publisher.feedID, cipher: OpenSSLFrameCipher.self),
            publisher: publisher,
            logger: logger
        )
        let tasks: [Task<Void, Never>] = [
            Task { _ = try? await video.run(pacer: MediaPacer(mode: .realTime)) },
            Task { _ = try? await audio.run(pacer: MediaPacer(mode: .realTime)) },
            // A passed-through file cannot make a keyframe on request; its own come every 2 s.
            Task { for await _ in publisher.keyframeRequests { video.requestKeyframe() } },
        ]
        return EncryptedPublisher(publisher: publisher, tasks: tasks)
    }

    func stop() async {
        for task in tasks { task.cancel() }
        await publisher.leave()
    }
}

/// Files a `conclave record` run wrote, from its manifest.
func conclaveFiles(in folder: String) -> [String] {
    let manifest = try? RecordingManifest.read(from: folder)
    return (manifest?.participants ?? []).flatMap(\.segments).compactMap(\.file).map { folder + "/" + $0 }
}

func recordWithConclave(
    room: UInt64,
    name: String,
    crypto: [String],
    feeds: Int
) throws -> CPUFigures {
    let out = directory.appendingPathComponent(name).path
    let usage = try measure(
        [
            binaries + "/conclave", "record", "--janus", bed.webSocketURL, "--room", "\(room)", "--call-id",
            "\(callID)", "--out", out, "--ice-address", bed.hostAddress, "--duration", "\(recordSeconds)",
            "--log-level", "error",
        ] + crypto + (ProcessInfo.processInfo.environment["BENCH_STATUS"].map { ["--status", $0] } ?? []),
        log: directory.appendingPathComponent(name + ".log").path,
        steady: steadyWindow
    )
    let figures = report(
        crypto.contains("none") ? "conclave" : "conclave ecall",
        feeds: feeds,
        usage: usage,
        outcome: analyze(files: conclaveFiles(in: out))
    )
    // Where missing frames went, as the recorder saw them: gaps in the RTP timestamps of what
    // reached it (lost before the recorder), and frames it could not decrypt.
    if let manifest = try? RecordingManifest.read(from: out) {
        let tracks = manifest.participants.flatMap(\.segments).flatMap(\.tracks)
        let lost = tracks.reduce(0) { $0 + $1.framesLost }
        let gaps = tracks.reduce(0) { $0 + $1.gaps }
        let undecryptable = manifest.participants.reduce(0) { $0 + $1.framesUndecryptable }
        if lost + gaps + undecryptable > 0 {
            say("    manifest: \(lost) frames lost in \(gaps) gaps before the recorder, \(undecryptable) undecryptable")
        }
    }
    return figures
}

var logger = Logger(label: "bench")
logger.logLevel = .error
let bed = try JanusTestBed()
defer { bed.stop() }
say(
    "Janus \(bed.webSocketURL); \(ProcessInfo.processInfo.activeProcessorCount) cores; \(recordSeconds) s per recording, steady window \(steadyWindow.lowerBound)-\(steadyWindow.upperBound) s after start; VP8 1 Mbit/s + Opus per publisher"
)
let connection = try await JanusConnection.connect(to: bed.webSocketURL)
let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-recorder-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { if environment["BENCH_KEEP"] == nil { try? FileManager.default.removeItem(at: directory) } }
let media = directory.appendingPathComponent("feed.webm").path
// Long enough that no publisher loops it during a recording: a looped file's audio has a
// one-frame gap at the seam, which would show here as a frame missing.
try RemoteFeeds.makeMedia(at: media, seconds: recordSeconds + 40)
let callID: UInt64 = 1
let key = CallKey.random()
let keyFile = directory.appendingPathComponent("call.key").path
guard
    FileManager.default.createFile(
        atPath: keyFile,
        contents: Data(key.hexString.utf8),
        attributes: [.posixPermissions: 0o600]
    )
else { throw BenchError("cannot write \(keyFile)") }

for feeds in feedCounts {
    // 1. Unencrypted: Conclave and aiortc.
    let room = try await admin.createRoom(.init(room: UInt64(200 + feeds), publishers: feeds + 4, videoCodecs: ["vp8"]))
    let remote = try await RemoteFeeds.start(count: feeds, room: room, media: media, bed: bed, admin: admin)
    try await Task.sleep(for: .seconds(2))
    say("N = \(feeds) publishers, unencrypted (room \(room))")
    let conclaveCPU = try recordWithConclave(
        room: room,
        name: "conclave-\(feeds)",
        crypto: ["--crypto", "none"],
        feeds: feeds
    )

    let aiortcFeeds = Array(remote.feedIDs.prefix(aiortcMaxFeeds))
    if aiortcFeeds.count < feeds {
        say(
            "  aiortc records \(aiortcFeeds.count) of the \(feeds) feeds (BENCH_AIORTC_FEEDS): it transcodes, about a core per feed, so more cannot run in real time on \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
    }
    let aiortcOut = directory.appendingPathComponent("aiortc-\(feeds)").path
    let aiortcLog = directory.appendingPathComponent("aiortc-\(feeds).log").path
    let aiortcUsage = try measure(
        [
            python, packageRoot + "/bench/recorder/aiortc_record.py", "--janus", bed.webSocketURL, "--room",
            "\(room)", "--feeds", aiortcFeeds.map(String.init).joined(separator: ","), "--address",
            bed.hostAddress, "--out", aiortcOut, "--duration", "\(recordSeconds)",
        ],
        log: aiortcLog,
        steady: steadyWindow
    )
    let aiortcFiles = ((try? FileManager.default.contentsOfDirectory(atPath: aiortcOut)) ?? []).sorted().map {
        aiortcOut + "/" + $0
    }
    let aiortcCPU = report("aiortc", feeds: aiortcFeeds.count, usage: aiortcUsage, outcome: analyze(files: aiortcFiles))
    say(
        String(
            format:
                "  ratio N=%d: aiortc uses %.1fx the CPU of Conclave per stream-second (steady), %.1fx (whole process), %.1fx per frame written",
            feeds,
            aiortcCPU.steady / max(conclaveCPU.steady, 1e-9),
            aiortcCPU.whole / max(conclaveCPU.whole, 1e-9),
            aiortcCPU.perFrame / max(conclaveCPU.perFrame, 1e-9)
        )
    )
    if aiortcUsage.steadySeconds > 0, aiortcUsage.steadyCPUSeconds == 0 {
        say("  aiortc used no CPU in the steady window: its recording stalled (see frames written)")
    }
    let aiortcErrors = ((try? String(contentsOfFile: aiortcLog, encoding: .utf8)) ?? "").split(separator: "\n")
        .filter { !$0.hasPrefix("{") }
    if aiortcUsage.status != 0 || !aiortcErrors.isEmpty {
        say("  aiortc log: \(aiortcErrors.suffix(4).joined(separator: " | ").suffix(600))")
    }
    remote.stop()
    try await admin.destroyRoom(room)

    // 2. Encrypted: Conclave publishers in this process, the recorder holding the key.
    let encryptedRoom = try await admin.createRoom(
        .init(room: UInt64(300 + feeds), publishers: feeds + 4, videoCodecs: ["vp8"])
    )
    var publishers: [EncryptedPublisher] = []
    for index in 0..<feeds {
        publishers.append(
            try await .start(
                on: connection,
                room: encryptedRoom,
                index: index,
                media: media,
                key: key,
                callID: callID,
                address: bed.hostAddress,
                logger: logger
            )
        )
    }
    try await Task.sleep(for: .seconds(2))
    say("N = \(feeds) publishers, encrypted (ECall frames; room \(encryptedRoom))")
    _ = try recordWithConclave(
        room: encryptedRoom,
        name: "conclave-ecall-\(feeds)",
        crypto: ["--crypto", "ecall", "--key-file", keyFile],
        feeds: feeds
    )
    for publisher in publishers { await publisher.stop() }
    try await admin.destroyRoom(encryptedRoom)
}
await connection.close()
