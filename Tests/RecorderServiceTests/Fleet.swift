import ConclaveE2EE
import ConclaveTestSupport
import Foundation
import JanusClient
import JanusProtocol
import JanusTestBed
import RabbitMQTestBed
import RecorderJobs
import STOMPClient
import STOMPProtocol
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every event on `recorder.events`, as a watcher sees them; a test waits for one that matches.
final class EventLog: Sendable {
    private let collector: StreamCollector<RecorderEvent>

    init(_ messages: AsyncStream<STOMPMessage>) {
        let (events, continuation) = AsyncStream.makeStream(of: RecorderEvent.self)
        Task {
            for await message in messages {
                if let event = try? RecorderEvent.decode(message.body) { continuation.yield(event) }
            }
            continuation.finish()
        }
        collector = StreamCollector(events)
    }

    var events: [RecorderEvent] { collector.items }

    /// The first event (already seen or still to come) that matches, or nil after `limit`.
    func first(within limit: Duration, where predicate: @escaping @Sendable (RecorderEvent) -> Bool) async
        -> RecorderEvent?
    {
        await collector.first(within: limit, where: predicate)
    }

    func started(_ jobID: String, attempt: Int = 1, within limit: Duration = .seconds(30)) async -> RecordingStarted? {
        let event = await first(within: limit) {
            if case .recordingStarted(let started) = $0 {
                started.jobID == jobID && started.attempt == attempt
            } else {
                false
            }
        }
        if case .recordingStarted(let started)? = event { return started }
        return nil
    }

    func finished(_ jobID: String, within limit: Duration = .seconds(60)) async -> RecordingFinished? {
        let event = await first(within: limit) {
            if case .recordingFinished(let finished) = $0 { finished.jobID == jobID } else { false }
        }
        if case .recordingFinished(let finished)? = event { return finished }
        return nil
    }

    func failed(within limit: Duration = .seconds(30), _ matches: @escaping @Sendable (RecordingFailed) -> Bool) async
        -> RecordingFailed?
    {
        let event = await first(within: limit) {
            if case .recordingFailed(let failed) = $0 { matches(failed) } else { false }
        }
        if case .recordingFailed(let failed)? = event { return failed }
        return nil
    }
}

/// A broker with the recorder topology, the shared Janus, the fleet's device key and a watcher
/// that submits jobs and reads every event. Services are `conclave recorder serve` processes.
final class Fleet: @unchecked Sendable {
    // @unchecked: every stored property is set in init and only read afterwards.
    static let deviceID: UInt64 = 900
    let broker: RabbitMQTestBed
    let janus: JanusTestBed
    let directory: URL
    let storage: URL
    let dataDirectory: String
    let passcodeFile: String
    let fleetKey: DevicePublicKey
    let watcher: STOMPConnection
    let log: EventLog

    init() async throws {
        broker = try RabbitMQTestBed.shared()
        janus = try TestJanus.shared()
        directory = try TestPaths.temporaryDirectory("recorder-fleet")
        storage = directory.appendingPathComponent("storage")
        dataDirectory = directory.appendingPathComponent("fleet-key").path
        let created = try conclave([
            "keys", "init", "--type", "p256", "--display", "\(Self.deviceID):recorder", "--device-id",
            "\(Self.deviceID)", "--data-dir", dataDirectory,
        ])
        guard created.succeeded else { throw SubprocessError(description: "keys init: \(created.errorOutput)") }
        let shown = try conclave(["keys", "show", "--public", "--data-dir", dataDirectory])
        fleetKey = try DevicePublicKey(
            publicKeyString: String(decoding: shown.stdout, as: UTF8.self).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
        )
        passcodeFile = directory.appendingPathComponent("recorder.passcode").path
        let passcode = try broker.addRecorder(Self.deviceID)
        _ = FileManager.default.createFile(
            atPath: passcodeFile,
            contents: Data(passcode.utf8),
            attributes: [.posixPermissions: 0o600]
        )
        let watcherPasscode = RabbitMQTestBed.randomPasscode()
        try broker.importUser(login: "watcher", passcode: watcherPasscode, permissions: (".*", ".*", ".*"))
        // Bounded and retried with a fresh connection: a WebSocket stuck before its handshake
        // fails the test after three tries instead of hanging the run.
        var connected: STOMPConnection?
        for _ in 0..<3 {
            let attempt = try STOMPConnection(
                configuration: STOMPClientConfiguration(
                    url: broker.webSocketURL,
                    virtualHost: RabbitMQTestBed.virtualHost,
                    credentials: STOMPCredentials(login: "watcher", passcode: watcherPasscode)
                )
            )
            attempt.start()
            let up = await firstWithin(.seconds(20)) { (try? await attempt.waitUntilConnected()) != nil }
            if up == true {
                connected = attempt
                break
            }
            Task { await attempt.close() }
        }
        guard let connected else {
            throw SubprocessError(description: "the watcher did not connect to \(broker.webSocketURL) in three tries")
        }
        watcher = connected
        log = EventLog(watcher.messages)
        watcher.subscribe(id: "events", destination: RecorderTopology.allEvents)
    }

    deinit {
        broker.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts `conclave recorder serve` as `name`: here, or on `host` (its own namespace, which
    /// reaches the broker and its Janus test beds only; the storage folder is shared).
    func startService(_ name: String, _ extra: [String] = [], on host: RecorderHost? = nil) throws -> ServiceProcess {
        let network =
            host.map { host in
                ["--broker", host.brokerURL] + host.iceAddresses.flatMap { ["--ice-address", $0] }
            } ?? ["--broker", broker.webSocketURL, "--ice-address", janus.hostAddress]
        return try ServiceProcess(
            name,
            arguments: [
                "recorder", "serve", "--storage", storage.path, "--data-dir", dataDirectory, "--passcode-file",
                passcodeFile, "--service-id", name, "--max-calls", "4", "--log-level", "warning",
            ] + network + extra,
            in: directory,
            host: host
        )
    }

    /// A machine for a service: a namespace that reaches the broker and `janus` only.
    func makeHost(reaching janus: [JanusTestBed]) throws -> RecorderHost {
        try RecorderHost(brokerPort: broker.webSTOMPPort, janus: janus)
    }

    /// Waits until `name` announces its status (its job subscription is then being set up).
    func awaitService(_ name: String) async -> Bool {
        await log.first(within: .seconds(30)) {
            if case .serviceStatus(let status) = $0 { status.serviceID == name } else { false }
        } != nil
    }

    /// Publishes `body` on the job queue.
    func submit(_ body: [UInt8]) async throws {
        try await watcher.send(
            STOMPFrame(
                .send,
                headers: [.init("destination", RecorderTopology.submitDestination), .init("persistent", "true")],
                body: body
            )
        )
    }

    /// A job for `room`, its key wrapped for the fleet's device.
    func job(
        _ jobID: String,
        callID: UInt64,
        room: UInt64,
        key: CallKey,
        output: String,
        stop: StopCondition,
        wrappedFor recipient: DevicePublicKey? = nil
    ) throws -> RecordJob {
        RecordJob(
            version: 1,
            jobID: jobID,
            callID: callID,
            room: room,
            janusURL: janus.webSocketURL,
            crypto: .ecall,
            wrappedKey: try KeyWrapping.wrap(key, for: recipient ?? fleetKey),
            keyEpoch: 0,
            recorderDeviceID: Self.deviceID,
            output: output,
            stop: stop,
            display: "recorder",
            submittedAt: RecorderTime.format(Date())
        )
    }

    /// Jobs in the queue, ready or delivered and not yet acknowledged.
    func jobsInQueue() throws -> Int {
        try jobQueue("messages")
    }

    /// Info item `item` of the job queue (`messages`, `messages_ready`, `consumers`), as
    /// `rabbitmqctl list_queues` reports it.
    func jobQueue(_ item: String) throws -> Int {
        guard let value = try broker.queueInfo(item)[RecorderTopology.jobQueueName] else {
            throw SubprocessError(description: "no \(item) of \(RecorderTopology.jobQueueName)")
        }
        return value
    }

    /// The jobs in the queue once the count reaches `expected`, or the last count after `limit`
    /// (the broker's counts of a quorum queue trail its acknowledgements by up to its tick,
    /// config/rabbitmq/advanced.config).
    func jobsInQueue(settlingAt expected: Int, within limit: Duration = .seconds(15)) async throws -> Int {
        let deadline = ContinuousClock.now + limit
        var count = try jobsInQueue()
        while count != expected, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            count = try jobsInQueue()
        }
        return count
    }

    /// A new VideoRoom with H264 video.
    func createRoom() async throws -> (room: UInt64, connection: JanusConnection) {
        let connection = try await JanusConnection.connect(to: janus.webSocketURL)
        let admin = try await VideoRoomHandle.attach(to: try await connection.createSession())
        let room = try await admin.createRoom(.init(room: TestJanus.uniqueRoomID(), videoCodecs: ["h264", "vp8"]))
        return (room, connection)
    }
}

/// A `conclave recorder serve` process, its output in files (read at any time), killed at the end.
final class ServiceProcess: @unchecked Sendable {
    // @unchecked: `process` is set up in init; afterwards only thread-safe Process calls are made.
    let name: String
    private let process: Process
    let stdoutFile: URL
    let stderrFile: URL

    init(_ name: String, arguments: [String], in directory: URL, host: RecorderHost? = nil) throws {
        self.name = name
        stdoutFile = directory.appendingPathComponent("\(name).out")
        stderrFile = directory.appendingPathComponent("\(name).err")
        _ = FileManager.default.createFile(atPath: stdoutFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process = Process()
        let command = [try TestPaths.conclave()] + arguments
        let launched = try host?.command(command) ?? command
        process.executableURL = URL(fileURLWithPath: launched[0])
        process.arguments = Array(launched.dropFirst())
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var pid: Int32 { process.processIdentifier }
    var output: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// The exit status, or nil if still running after `limit` (then killed).
    func waitForExit(within limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            if ContinuousClock.now > deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationReason == .uncaughtSignal ? -process.terminationStatus : process.terminationStatus
    }
}

/// Runs the built `conclave` binary to completion.
func conclave(_ arguments: [String]) throws -> ProcessResult {
    try runProcess(try TestPaths.conclave(), arguments, timeout: .seconds(60))
}
