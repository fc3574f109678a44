import Foundation
import JanusClient
import JanusTestBed
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// Recorder fleet benchmark: a private RabbitMQ, a Janus in a test-bed namespace, and
// `conclave recorder serve` processes taking jobs from the queue (run as root). Every figure is
// printed beside a baseline measured in the same run: the same calls recorded by one
// `conclave record` process per call, the way a call is recorded without the service.
//
// 1. Submission to first frame: BENCH_CALLS calls of 4 participants (Janus `add_remote_publisher`
//    feeds from ffmpeg, VP8 1 Mbit/s + Opus, crypto none, so the feeds cost the services
//    nothing), one job each; for each, the time from the job's SEND to the first media bytes in
//    its recording folder. p50. Baseline: `conclave record` launched by hand for each of as many
//    new calls, to the first media bytes in its folder. p50, and the ratio job / baseline.
// 2. Capacity: those calls recorded for BENCH_SECONDS; the services' CPU over the middle of the
//    recording (from /proc) gives CPU per participant and participants per core, and each
//    finished recording's frames written against the frames sent (30 video + 50 audio per
//    second per participant) tell whether any frame was lost at that load. Baseline: the same
//    figures of the `conclave record` processes of 1 (crypto none, the same duration, the same
//    window and frame check), and the ratio of CPU per participant, services / baseline (the
//    service should cost no more than the plain recorder: target <= 1.1).
// 3. Takeover: BENCH_KILLS times, a call's service is killed with SIGKILL while it records; the
//    time from the kill to another service's recording_started (attempt 2) and to the first
//    bytes of the new segment. p50 and p95. No baseline: a lone recorder has nobody to take over.
// 4. With BENCH_SEARCH=1, instead of 1-3: the frame-loss search. Rounds of BENCH_SEARCH_STEP,
//    2 x BENCH_SEARCH_STEP, ... calls of 4 (up to BENCH_SEARCH_MAX calls), each recorded for
//    BENCH_SECONDS, until a recording misses a frame (a track's frames lost, or fewer frames
//    written than its first-to-last span holds at 30 or 50 a second) or the machine is saturated
//    (over 95 % of every core busy: the feeds themselves then fall behind, and a loss would say
//    nothing about the services, and the round does not count). Prints each round; then the
//    baseline runs once, at the last loss-free round's call count (not every round: that would
//    double the search), and the capacity figures of 2 follow for that round with its baseline.
//
//   BENCH_SERVICES=2 BENCH_CALLS=4 BENCH_SECONDS=15 BENCH_KILLS=3 bench/fleet/run
//   BENCH_SEARCH=1 BENCH_SERVICES=3 BENCH_SEARCH_STEP=3 BENCH_SEARCH_MAX=24 BENCH_SECONDS=15 bench/fleet/run

let environment = ProcessInfo.processInfo.environment
let serviceCount = Int(environment["BENCH_SERVICES"] ?? "") ?? 2
let callCount = Int(environment["BENCH_CALLS"] ?? "") ?? 2
let participantsPerCall = Int(environment["BENCH_PARTICIPANTS"] ?? "") ?? 4
let recordSeconds = Int(environment["BENCH_SECONDS"] ?? "") ?? 20
let killCount = Int(environment["BENCH_KILLS"] ?? "") ?? 10
let searching = environment["BENCH_SEARCH"] == "1"
let searchStep = max(1, Int(environment["BENCH_SEARCH_STEP"] ?? "") ?? 2)
let searchLimit = Int(environment["BENCH_SEARCH_MAX"] ?? "") ?? 60
let binaries = environment["BENCH_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/release"
let conclave = binaries + "/conclave"
let fleetDevice: UInt64 = 900
let submitterDevice: UInt64 = 10

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
}

/// The CPU-seconds a process has used so far (the sum of its threads' run time).
func processCPUSeconds(_ pid: pid_t) -> Double? {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
    var nanoseconds: UInt64 = 0
    for task in tasks {
        guard let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
            let first = line.split(separator: " ").first, let value = UInt64(first)
        else { continue }
        nanoseconds += value
    }
    return Double(nanoseconds) / 1e9
}

/// The machine's busy and total CPU time so far, in clock ticks (the first line of /proc/stat).
func machineTicks() -> (busy: Double, total: Double) {
    guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
        let line = text.split(separator: "\n").first
    else { return (0, 0) }
    let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
    guard fields.count >= 5 else { return (0, 0) }
    let total = fields.prefix(8).reduce(0, +)
    return (total - fields[3] - fields[4], total)  // idle and iowait are not busy
}

/// The frames a finished recording misses, from its manifest: per track, the frames the receiver
/// gave up on plus those its first-to-last span should hold (`videoRate` or 50 a second) beyond
/// what was written (one frame of slack for rounding). Nil when the manifest cannot be read.
func framesMissing(_ folder: String, videoRate: Double) -> Int? {
    guard let data = FileManager.default.contents(atPath: folder + "/manifest.json"),
        let manifest = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let participants = manifest["participants"] as? [[String: Any]]
    else { return nil }
    var missing = 0
    for participant in participants {
        for segment in participant["segments"] as? [[String: Any]] ?? [] {
            for track in segment["tracks"] as? [[String: Any]] ?? [] {
                let written = track["framesWritten"] as? Int ?? 0
                missing += track["framesLost"] as? Int ?? 0
                guard let first = track["firstTimestamp"] as? Double, let last = track["lastTimestamp"] as? Double
                else { continue }
                let rate = (track["kind"] as? String) == "video" ? videoRate : 50
                let span = Int(((last - first) * rate).rounded()) + 1
                missing += max(0, span - 1 - written)
            }
        }
    }
    return missing
}

/// Whether a recording folder holds media bytes yet (any non-empty file but the manifests).
func hasMedia(_ folder: String) -> Bool { !mediaFiles(folder).isEmpty }

/// The non-empty media files under a recording folder (paths relative to it).
func mediaFiles(_ folder: String) -> Set<String> {
    guard let enumerator = FileManager.default.enumerator(atPath: folder) else { return [] }
    var files: Set<String> = []
    for case let name as String in enumerator where !name.hasSuffix(".json") {
        let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
        if (attributes?[.type] as? FileAttributeType) == .typeRegular, let size = attributes?[.size] as? Int, size > 0 {
            files.insert(name)
        }
    }
    return files
}

/// Polls `condition` every 20 ms (a file system or a log, nothing to wait on) until `limit`.
@MainActor func waitFor(_ limit: Duration, _ condition: () -> Bool) async -> Duration? {
    let start = ContinuousClock.now
    while ContinuousClock.now - start < limit {
        if condition() { return ContinuousClock.now - start }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return nil
}

/// Every recorder event, with the instant it arrived.
final class Events: Sendable {
    private let state = Mutex<[(ContinuousClock.Instant, RecorderEvent)]>([])

    init(_ messages: AsyncStream<STOMPMessage>) {
        Task { [weak self] in
            for await message in messages {
                guard let event = try? RecorderEvent.decode(message.body) else { continue }
                self?.state.withLock { $0.append((.now, event)) }
            }
        }
    }

    var all: [(ContinuousClock.Instant, RecorderEvent)] { state.withLock { $0 } }

    func started(_ jobID: String, attempt: Int) -> (ContinuousClock.Instant, RecordingStarted)? {
        for (instant, event) in all {
            if case .recordingStarted(let started) = event, started.jobID == jobID, started.attempt >= attempt {
                return (instant, started)
            }
        }
        return nil
    }

    func finished(_ jobID: String) -> RecordingFinished? {
        for (_, event) in all {
            if case .recordingFinished(let finished) = event, finished.jobID == jobID { return finished }
        }
        return nil
    }

    func failed(_ jobID: String) -> RecordingFailed? {
        for (_, event) in all {
            if case .recordingFailed(let failed) = event, failed.jobID == jobID { return failed }
        }
        return nil
    }
}

/// A `conclave` child process (`recorder serve`, or `record` for the baseline), its output in a
/// log file.
final class Child {
    let name: String
    let process: Process

    init(name: String, arguments: [String], log: String) throws {
        self.name = name
        process = Process()
        process.executableURL = URL(fileURLWithPath: conclave)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var pid: pid_t { process.processIdentifier }

    func kill9() {
        guard process.isRunning else { return }
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }
}

/// A finished recording in brief, from its manifest, the way the service sums it up in
/// `recording_finished` (`RecorderService.summary`), so that the baseline's recordings are
/// checked exactly like the jobs'.
struct ManifestSummary {
    var participants: Int
    var duration: Double
    var framesWritten: UInt64

    init?(_ folder: String) {
        guard let data = FileManager.default.contents(atPath: folder + "/manifest.json"),
            let manifest = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let participants = manifest["participants"] as? [[String: Any]]
        else { return nil }
        var written: UInt64 = 0
        var starts: [Double] = []
        var ends: [Double] = []
        for participant in participants {
            for segment in participant["segments"] as? [[String: Any]] ?? [] {
                for track in segment["tracks"] as? [[String: Any]] ?? [] {
                    let frames = track["framesWritten"] as? Int ?? 0
                    written += UInt64(max(frames, 0))
                    guard frames > 0 else { continue }
                    if let first = track["firstTimestamp"] as? Double { starts.append(first) }
                    if let last = track["lastTimestamp"] as? Double { ends.append(last) }
                }
            }
        }
        self.participants = participants.filter { $0["recorded"] as? Bool ?? false }.count
        duration = starts.min().flatMap { first in ends.max().map { max(0, $0 - first) } } ?? 0
        framesWritten = written
    }
}

// MARK: Set-up

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-fleet-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { if environment["BENCH_KEEP"] == nil { try? FileManager.default.removeItem(at: directory) } }
let storage = directory.appendingPathComponent("storage").path

let broker = try RabbitMQTestBed()
defer { broker.stop() }
let bed = try JanusTestBed()
defer { bed.stop() }
let fleetData = directory.appendingPathComponent("fleet-key").path
let created = try JanusTestBed.runCommand(
    conclave,
    [
        "keys", "init", "--type", "p256", "--display", "\(fleetDevice):recorder", "--device-id", "\(fleetDevice)",
        "--data-dir", fleetData,
    ]
)
_ = created
let passcodeFile = directory.appendingPathComponent("fleet.passcode").path
guard
    FileManager.default.createFile(
        atPath: passcodeFile,
        contents: Data(try broker.addRecorder(fleetDevice).utf8),
        attributes: [.posixPermissions: 0o600]
    )
else { throw BenchError("cannot write \(passcodeFile)") }
let submitter = try STOMPConnection(
    configuration: STOMPClientConfiguration(
        url: broker.webSocketURL,
        virtualHost: RabbitMQTestBed.virtualHost,
        credentials: STOMPCredentials(
            login: RabbitMQTestBed.login(forDevice: submitterDevice),
            passcode: try broker.addSubmitter(submitterDevice)
        )
    )
)
let events = Events(submitter.messages)
submitter.start()
try await submitter.waitUntilConnected()
submitter.subscribe(id: "events", destination: RecorderTopology.allEvents)

var services: [Child] = []
var serial = 0
@MainActor func startService() throws -> Child {
    serial += 1
    let name = "bench-\(serial)"
    let service = try Child(
        name: name,
        arguments: [
            "recorder", "serve", "--storage", storage, "--data-dir", fleetData, "--broker", broker.webSocketURL,
            "--passcode-file", passcodeFile, "--ice-address", bed.hostAddress, "--service-id", name, "--log-level",
            "error",
        ],
        log: directory.appendingPathComponent("\(name).log").path
    )
    services.append(service)
    return service
}
defer { for service in services { service.kill9() } }

@MainActor func awaitStatus(_ name: String) async -> Bool {
    await waitFor(.seconds(30)) {
        events.all.contains { if case .serviceStatus(let status) = $0.1 { status.serviceID == name } else { false } }
    } != nil
}

for _ in 0..<serviceCount {
    let service = try startService()
    guard await awaitStatus(service.name) else { throw BenchError("\(service.name) never announced itself") }
}
let load =
    searching
    ? "rounds of \(searchStep), \(2 * searchStep), ... calls (up to \(searchLimit)), the baseline once at the last loss-free round's count"
    : "\(callCount) calls, then as many for the baseline"
say(
    "fleet bench: \(serviceCount) `conclave recorder serve` against a baseline of one `conclave record` per call; calls of \(participantsPerCall) participants (VP8 1 Mbit/s + Opus, crypto none) recorded for \(recordSeconds) s: \(load); \(ProcessInfo.processInfo.activeProcessorCount) cores; Janus \(bed.webSocketURL), RabbitMQ \(broker.webSocketURL)"
)

let connection = try await JanusConnection.connect(to: bed.webSocketURL)
let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
let media = directory.appendingPathComponent("feed.webm").path
try RemoteFeeds.makeMedia(at: media, seconds: recordSeconds + 40)

var nextRoom: UInt64 = 7000
@MainActor func makeCall(participants: Int) async throws -> (room: UInt64, feeds: RemoteFeeds) {
    nextRoom += 1
    let room = try await admin.createRoom(
        .init(room: nextRoom, publishers: participants + 4, videoCodecs: ["vp8"])
    )
    let feeds = try await RemoteFeeds.start(count: participants, room: room, media: media, bed: bed, admin: admin)
    return (room, feeds)
}

@MainActor func submit(jobID: String, room: UInt64, stop: StopCondition) async throws -> ContinuousClock.Instant {
    let job = RecordJob(
        jobID: jobID,
        callID: room,
        room: room,
        janusURL: bed.webSocketURL,
        crypto: .none,
        output: "bench/\(jobID)",
        stop: stop,
        display: "recorder",
        submittedAt: RecorderTime.format(Date())
    )
    let start = ContinuousClock.now
    try await submitter.send(
        STOMPFrame(
            .send,
            headers: [.init("destination", RecorderTopology.submitDestination), .init("persistent", "true")],
            body: job.encoded()
        )
    )
    return start
}

// MARK: The baseline: one `conclave record` per call

/// The same calls recorded without the service: one `conclave record` process per call, started
/// by hand (crypto none and the same duration, like the jobs), measured like the services.
struct Baseline {
    /// Each process's launch to the first media bytes in its folder, in seconds.
    var firstMedia: [Double]
    var participants: Int
    /// The processes' cores over the middle of the recordings.
    var cores: Double
    /// The machine's busy share of all its cores over the same window.
    var machineBusy: Double
    var framesWritten: UInt64
    /// The frames the recordings' durations held (30 video + 50 audio a second a participant).
    var framesSent: Double
    /// The frames missing by the search's measure (`framesMissing`).
    var framesMissing: Int
    var unfinished: Int
}

var baselineSerial = 0
/// Records `count` new calls of BENCH_PARTICIPANTS, one `conclave record` each, started the way
/// the jobs were submitted: `oneByOne`, each as soon as the previous one wrote its first bytes
/// (as 1 submits), else all at once (as a search round submits); the CPU is read over `window`
/// seconds once all of them record.
@MainActor func baselineRun(_ count: Int, window: Double, oneByOne: Bool) async throws -> Baseline {
    let parent = storage + "/baseline"
    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
    let dataDirectory = directory.appendingPathComponent("baseline-data").path
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    var recorders: [(child: Child, folder: String, feeds: RemoteFeeds)] = []
    var firstMedia: [Double] = []
    defer { for recorder in recorders { recorder.child.kill9() } }
    for _ in 0..<count {
        let call = try await makeCall(participants: participantsPerCall)
        baselineSerial += 1
        let name = "record-\(baselineSerial)"
        let folder = parent + "/" + name
        let launched = ContinuousClock.now
        let child = try Child(
            name: name,
            arguments: [
                "record", "--janus", bed.webSocketURL, "--room", "\(call.room)", "--call-id", "\(call.room)",
                "--crypto", "none", "--out", folder, "--duration", "\(recordSeconds)", "--status", "none",
                "--ice-address", bed.hostAddress, "--data-dir", dataDirectory, "--log-level", "error",
            ],
            log: directory.appendingPathComponent("\(name).log").path
        )
        recorders.append((child, folder, call.feeds))
        guard oneByOne else { continue }
        if await waitFor(.seconds(30), { hasMedia(folder) }) != nil {
            firstMedia.append(seconds(ContinuousClock.now - launched))
        } else {
            say("  \(name): no media within 30 s of its launch (log: \(name).log)")
        }
    }
    if !oneByOne { for recorder in recorders { _ = await waitFor(.seconds(30)) { hasMedia(recorder.folder) } } }
    let before = recorders.map { processCPUSeconds($0.child.pid) }
    let machineBefore = machineTicks()
    let windowStart = ContinuousClock.now
    try await Task.sleep(for: .seconds(window))
    let after = recorders.map { processCPUSeconds($0.child.pid) }
    let machineAfter = machineTicks()
    // A recorder that ended within the window would take its CPU time out of the sum.
    if after.contains(where: { $0 == nil }) || recorders.contains(where: { !$0.child.process.isRunning }) {
        say("  baseline: a recorder ended within the measuring window: its CPU figures are not comparable")
    }
    let used = zip(before, after).reduce(0.0) { sum, pair in
        guard let start = pair.0, let end = pair.1 else { return sum }
        return sum + (end - start)
    }
    var result = Baseline(
        firstMedia: firstMedia,
        participants: count * participantsPerCall,
        cores: used / seconds(ContinuousClock.now - windowStart),
        machineBusy: (machineAfter.busy - machineBefore.busy) / max(machineAfter.total - machineBefore.total, 1),
        framesWritten: 0,
        framesSent: 0,
        framesMissing: 0,
        unfinished: 0
    )
    for recorder in recorders {
        let exited = await waitFor(.seconds(Double(recordSeconds) + 60)) { !recorder.child.process.isRunning }
        recorder.feeds.stop()
        guard exited != nil, recorder.child.process.terminationStatus == 0,
            let summary = ManifestSummary(recorder.folder), let lost = framesMissing(recorder.folder, videoRate: 30)
        else {
            say("  \(recorder.child.name): did not finish cleanly (log: \(recorder.child.name).log)")
            result.unfinished += 1
            continue
        }
        result.framesWritten += summary.framesWritten
        result.framesSent += summary.duration * 80 * Double(summary.participants)
        result.framesMissing += lost
    }
    return result
}

/// "X of ~Y (Z% fewer)": frames written against those sent.
func framesLine(written: UInt64, sent: Double) -> String {
    String(
        format: "%llu of ~%.0f (%.2f%% fewer)",
        written,
        sent,
        sent > 0 ? max(0, 100 * (1 - Double(written) / sent)) : 0
    )
}

/// The capacity lines: CPU per participant of the services and of the baseline with their ratio
/// (the service should cost no more than the plain recorder: target <= 1.1), and participants per
/// core for both.
func sayCapacity(serviceCores: Double, baselineCores: Double, participants: Int, baselineParticipants: Int) {
    let service = serviceCores / Double(max(participants, 1))
    let plain = baselineCores / Double(max(baselineParticipants, 1))
    say(
        String(
            format:
                "CPU per participant: services %.4f cores, baseline %.4f cores, ratio %.2f (target <= 1.1)\nparticipants per core: services %.0f, baseline %.0f, ratio %.2f",
            service,
            plain,
            service / max(plain, 1e-9),
            1 / max(service, 1e-9),
            1 / max(plain, 1e-9),
            plain / max(service, 1e-9)
        )
    )
}

// MARK: 4: the frame-loss search

/// One round of the search: `count` calls of 4 recorded for BENCH_SECONDS.
struct Round {
    var calls: Int
    var participants: Int
    /// The services' cores over the middle of the recordings.
    var cores: Double
    /// The machine's busy share of all its cores over the same window.
    var machineBusy: Double
    var framesMissing: Int
    var unfinished: Int
}

@MainActor func searchRound(_ count: Int, round: Int) async throws -> Round {
    var jobs: [(jobID: String, feeds: RemoteFeeds)] = []
    for index in 0..<count {
        let call = try await makeCall(participants: participantsPerCall)
        let jobID = "search-\(round)-\(index)"
        _ = try await submit(jobID: jobID, room: call.room, stop: .after(seconds: Double(recordSeconds)))
        jobs.append((jobID, call.feeds))
    }
    for job in jobs { _ = await waitFor(.seconds(30)) { hasMedia(storage + "/bench/" + job.jobID) } }
    let window = Double(recordSeconds) / 3
    let before = services.compactMap { processCPUSeconds($0.pid) }.reduce(0, +)
    let machineBefore = machineTicks()
    let windowStart = ContinuousClock.now
    try await Task.sleep(for: .seconds(window))
    let after = services.compactMap { processCPUSeconds($0.pid) }.reduce(0, +)
    let machineAfter = machineTicks()
    let cores = (after - before) / seconds(ContinuousClock.now - windowStart)
    let machineBusy = (machineAfter.busy - machineBefore.busy) / max(machineAfter.total - machineBefore.total, 1)
    var missing = 0
    var unfinished = 0
    for job in jobs {
        let done = await waitFor(.seconds(Double(recordSeconds) + 60)) {
            events.finished(job.jobID) != nil || events.failed(job.jobID) != nil
        }
        job.feeds.stop()
        guard done != nil, let finished = events.finished(job.jobID),
            let lost = framesMissing(finished.path, videoRate: 30)
        else {
            say("  \(job.jobID): did not finish: \(events.failed(job.jobID)?.reason ?? "no failure announced")")
            unfinished += 1
            continue
        }
        missing += lost + (finished.summary.gaps.isEmpty ? 0 : 1)
    }
    return Round(
        calls: count,
        participants: count * participantsPerCall,
        cores: cores,
        machineBusy: machineBusy,
        framesMissing: missing,
        unfinished: unfinished
    )
}

if searching {
    var clean: Round?
    var count = searchStep
    var round = 0
    while count <= searchLimit {
        round += 1
        let result = try await searchRound(count, round: round)
        say(
            String(
                format:
                    "  %d calls, %d participants: services %.2f cores (%.1f participants per core), machine %.0f%% busy, %d frames missing, %d recordings unfinished",
                result.calls,
                result.participants,
                result.cores,
                Double(result.participants) / max(result.cores, 1e-9),
                100 * result.machineBusy,
                result.framesMissing,
                result.unfinished
            )
        )
        if result.framesMissing > 0 || result.unfinished > 0 {
            say("first frame lost at \(result.calls) calls (\(result.participants) participants)")
            break
        }
        // A saturated machine starves the services of feeds as well as of cores: its round's
        // figures describe the machine, not the services, and do not count.
        if result.machineBusy > 0.95 {
            say("the machine is saturated at \(result.calls) calls: the feeds fall behind, the search stops here")
            break
        }
        clean = result
        count += searchStep
    }
    if let clean {
        // The baseline at the last loss-free round only: a baseline per round would double the
        // search's time for figures nobody compares.
        let baseline = try await baselineRun(clean.calls, window: Double(recordSeconds) / 3, oneByOne: false)
        say(
            String(
                format:
                    "last loss-free round: %d calls, %d participants on %d services; baseline at %d calls: machine %.0f%% busy, %d frames missing, %d recordings unfinished",
                clean.calls,
                clean.participants,
                serviceCount,
                clean.calls,
                100 * baseline.machineBusy,
                baseline.framesMissing,
                baseline.unfinished
            )
        )
        sayCapacity(
            serviceCores: clean.cores,
            baselineCores: baseline.cores,
            participants: clean.participants,
            baselineParticipants: baseline.participants
        )
    } else {
        say(
            "no round counts: the first (\(searchStep) calls) lost frames or found the machine saturated; no baseline run"
        )
    }
} else {
    // MARK: 1 and 2: submission to first frame, capacity

    var calls: [(jobID: String, feeds: RemoteFeeds)] = []
    var firstFrame: [Double] = []
    for index in 0..<callCount {
        let call = try await makeCall(participants: participantsPerCall)
        let jobID = "load-\(index)"
        let submitted = try await submit(jobID: jobID, room: call.room, stop: .after(seconds: Double(recordSeconds)))
        calls.append((jobID, call.feeds))
        let folder = storage + "/bench/" + jobID
        if let elapsed = await waitFor(.seconds(30), { hasMedia(folder) }) {
            firstFrame.append(seconds(elapsed))
        } else {
            say(
                "  \(jobID): no media within 30 s of its submission: \(events.failed(jobID)?.reason ?? "no failure announced")"
            )
        }
        _ = submitted
    }
    // The middle of the recordings: every call started, none finishing.
    let window = Double(recordSeconds) / 2
    let before = services.compactMap { processCPUSeconds($0.pid) }.reduce(0, +)
    let windowStart = ContinuousClock.now
    try await Task.sleep(for: .seconds(window))
    let after = services.compactMap { processCPUSeconds($0.pid) }.reduce(0, +)
    let cores = (after - before) / seconds(ContinuousClock.now - windowStart)
    var written: UInt64 = 0
    var sent = 0.0
    for call in calls {
        guard await waitFor(.seconds(Double(recordSeconds) + 60), { events.finished(call.jobID) != nil }) != nil,
            let finished = events.finished(call.jobID)
        else {
            say("  \(call.jobID): did not finish: \(events.failed(call.jobID)?.reason ?? "no failure announced")")
            continue
        }
        written += finished.summary.framesWritten
        sent += finished.summary.duration * 80 * Double(finished.summary.participants)
        call.feeds.stop()
    }
    let participants = callCount * participantsPerCall

    // MARK: The baseline: the same calls, one `conclave record` each

    let baseline = try await baselineRun(callCount, window: window, oneByOne: true)
    let serviceFirst = percentile(firstFrame, 0.5)
    let baselineFirst = percentile(baseline.firstMedia, 0.5)
    say(
        String(
            format:
                "submission to first frame written: job p50 %.2f s (%d calls), baseline (`conclave record` launched) p50 %.2f s (%d), ratio %.2f",
            serviceFirst,
            firstFrame.count,
            baselineFirst,
            baseline.firstMedia.count,
            serviceFirst / baselineFirst
        )
    )
    sayCapacity(
        serviceCores: cores,
        baselineCores: baseline.cores,
        participants: participants,
        baselineParticipants: baseline.participants
    )
    say(
        "frames written over the recordings' durations: services \(framesLine(written: written, sent: sent)), baseline \(framesLine(written: baseline.framesWritten, sent: baseline.framesSent)) (a feed's video before its first keyframe, up to 2 s, cannot be recorded and counts here)"
    )

    // MARK: 3: takeover after SIGKILL

    var toStarted: [Double] = []
    var toMedia: [Double] = []
    for index in 0..<killCount {
        let call = try await makeCall(participants: 2)
        let jobID = "kill-\(index)"
        _ = try await submit(jobID: jobID, room: call.room, stop: .after(seconds: 12))
        guard await waitFor(.seconds(30), { events.started(jobID, attempt: 1) != nil }) != nil,
            let (_, first) = events.started(jobID, attempt: 1),
            let victim = services.first(where: { $0.name == first.serviceID && $0.process.isRunning })
        else {
            say("  \(jobID): never started")
            call.feeds.stop()
            continue
        }
        let folder = storage + "/bench/" + jobID
        _ = await waitFor(.seconds(20)) { hasMedia(folder) }
        let killed = ContinuousClock.now
        victim.kill9()
        let mediaBefore = mediaFiles(folder)
        if await waitFor(.seconds(30), { events.started(jobID, attempt: 2) != nil }) != nil,
            let (instant, _) = events.started(jobID, attempt: 2)
        {
            toStarted.append(seconds(instant - killed))
            // A file of the new attempt (`attempt-N/`) with bytes in it; the files the dead attempt's
            // repair writes beside its journals do not count.
            let grown = await waitFor(.seconds(30)) {
                mediaFiles(folder).subtracting(mediaBefore).contains { $0.hasPrefix("attempt-") }
            }
            if grown != nil { toMedia.append(seconds(ContinuousClock.now - killed)) }
        } else {
            say("  \(jobID): not taken over within 30 s")
        }
        // The fleet back to full strength for the next kill.
        let replacement = try startService()
        _ = await awaitStatus(replacement.name)
        _ = await waitFor(.seconds(40)) { events.finished(jobID) != nil || events.failed(jobID) != nil }
        call.feeds.stop()
    }
    say(
        String(
            format:
                "takeover after SIGKILL (%d kills): recording_started again p50 %.2f s, p95 %.2f s; the new attempt's first media bytes p50 %.2f s, p95 %.2f s (no baseline: a lone `conclave record` has nobody to take over)",
            toStarted.count,
            percentile(toStarted, 0.5),
            percentile(toStarted, 0.95),
            percentile(toMedia, 0.5),
            percentile(toMedia, 0.95)
        )
    )
}
await submitter.close()
await connection.close()
