import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A private PulseAudio server for one test: its own runtime directory, a unix socket any client
/// may use (`auth-anonymous=1`), and null sinks standing in for speakers; each sink's `.monitor`
/// source stands in for a microphone (play into the sink, record its monitor).
///
/// The server is ready when its log says the start-up is complete and a client (`pactl info`)
/// connects: no sleeping. ``restart()`` kills it with SIGKILL and starts it again on the same
/// socket, as a crashed desktop server comes back.
public final class TestPulseServer: @unchecked Sendable {
    // @unchecked: `pid` is replaced only by `start`/`stop`, which a test calls from one task.
    /// The runtime directory (socket, configuration, state).
    public let directory: URL
    /// The null sinks loaded at start, in order; the first is the default sink.
    public let sinks: [String]
    private var pid: pid_t?

    /// `PULSE_SERVER` for clients: `unix:DIR/native`.
    public var serverAddress: String { "unix:\(directory.path)/native" }

    /// The environment a client process needs to reach this server (and no other).
    public var environment: [String: String] {
        ["PULSE_SERVER": serverAddress, "PULSE_RUNTIME_PATH": directory.path, "XDG_RUNTIME_DIR": directory.path]
    }

    /// Starts a server with `sinks` as null sinks; throws (failing the test) when `pulseaudio` is
    /// missing or does not come up.
    public init(sinks: [String] = ["speaker", "mic"]) throws {
        directory = try TestPaths.temporaryDirectory("conclave-pulse")
        self.sinks = sinks
        var script = "load-module module-native-protocol-unix auth-anonymous=1 socket=\(directory.path)/native\n"
        for sink in sinks {
            script +=
                "load-module module-null-sink sink_name=\(sink) rate=48000 sink_properties=device.description=\(sink)\n"
        }
        if let first = sinks.first { script += "set-default-sink \(first)\n" }
        try script.write(to: directory.appendingPathComponent("test.pa"), atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the server (again) and waits until a client connects.
    ///
    /// The daemon is spawned directly, not through Foundation's `Process`: pulseaudio closes every
    /// inherited descriptor at start, which `Process` takes for an exit and then blocks its
    /// monitor thread in `waitpid` on the live daemon (every later `Process` in the test hangs).
    public func start() throws {
        let arguments = [
            try which("pulseaudio"), "-n", "-F", directory.appendingPathComponent("test.pa").path,
            "--exit-idle-time=-1", "--daemonize=no", "--use-pid-file=no", "--log-target=stderr", "--log-level=info",
            "--disallow-exit",
        ]
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in [
            "XDG_RUNTIME_DIR": directory.path, "HOME": directory.path, "PULSE_RUNTIME_PATH": directory.path,
            "XDG_CONFIG_HOME": directory.path, "PULSE_STATE_PATH": directory.path,
        ] {
            environment[name] = value
        }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SubprocessError(description: "pipe: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        posix_spawn_file_actions_addclose(&actions, ends[1])
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, nil, argv, envp)
        close(ends[1])
        guard status == 0 else {
            close(ends[0])
            throw SubprocessError(description: "cannot start pulseaudio: \(String(cString: strerror(status)))")
        }
        self.pid = pid
        let reader = LineReader(FileHandle(fileDescriptor: ends[0], closeOnDealloc: true))
        // The daemon logs this line once every module of test.pa is loaded.
        var log: [String] = []
        while let line = reader.nextLine(timeout: .seconds(20)) {
            log.append(line)
            if line.contains("Daemon startup complete") { break }
        }
        guard log.last?.contains("Daemon startup complete") == true else {
            stop()
            throw SubprocessError(description: "pulseaudio did not start:\n\(log.suffix(20).joined(separator: "\n"))")
        }
        // From here the log only needs draining, so the daemon never blocks on a full pipe.
        Thread.detachNewThread { reader.drain() }
        let info = try pactl(["info"])
        guard info.succeeded else {
            stop()
            throw SubprocessError(description: "pulseaudio started but pactl cannot connect: \(info.errorOutput)")
        }
    }

    /// Kills the server with SIGKILL (no clean shutdown) and reaps it; idempotent.
    public func stop() {
        guard let pid else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        self.pid = nil
    }

    /// Kills the server and starts it again on the same socket.
    public func restart() throws {
        stop()
        try start()
    }

    /// Runs `pactl` against this server.
    @discardableResult
    public func pactl(_ arguments: [String]) throws -> ProcessResult {
        try runProcess("pactl", arguments, environment: environment, timeout: .seconds(20))
    }

    /// The index of the module that loaded null sink `sink` (for `pactl unload-module`).
    public func moduleIndex(ofSink sink: String) throws -> String {
        let modules = try pactl(["list", "short", "modules"])
        for line in modules.output.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count >= 3, fields[1] == "module-null-sink", fields[2].contains("sink_name=\(sink) ") {
                return String(fields[0])
            }
        }
        throw SubprocessError(description: "no module-null-sink for \(sink) in:\n\(modules.output)")
    }

    /// Starts `parec` recording `source` (raw 48 kHz mono s16le), read with
    /// ``PulseRecording/read(samples:timeout:)``.
    public func record(_ source: String) throws -> PulseRecording {
        try PulseRecording(source: source, environment: environment)
    }

    /// Starts `pacat` playing raw 48 kHz mono s16le `file` into `sink`.
    public func play(_ file: URL, into sink: String) throws -> BackgroundProcess {
        try BackgroundProcess(
            "pacat",
            [
                "--playback", "--device=\(sink)", "--format=s16le", "--rate=48000", "--channels=1", "--raw",
                "--latency-msec=20", file.path,
            ],
            environment: environment
        )
    }
}

/// `parec` on a source, read as it records: a test reads the next stretch of audio as soon as it
/// has been played, with no sleeping.
public final class PulseRecording: @unchecked Sendable {
    // @unchecked: used by one test task at a time.
    private let process: Process
    private let output: Pipe

    init(source: String, environment: [String: String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: try which("parec"))
        process.arguments = [
            "--device=\(source)", "--format=s16le", "--rate=48000", "--channels=1", "--raw", "--latency-msec=20",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit { stop() }

    /// The next `count` samples, or fewer when `timeout` passes or `parec` ends first.
    public func read(samples count: Int, timeout: Duration) -> [Int16] {
        let deadline = ContinuousClock.now + timeout
        var bytes = Data()
        let handle = output.fileHandleForReading
        while bytes.count < count * 2 {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(left.components.seconds * 1000 + 1, 1000))
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            let chunk = handle.readData(ofLength: count * 2 - bytes.count)
            if chunk.isEmpty { break }
            bytes.append(chunk)
        }
        return bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// Stops `parec` (idempotent).
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Reads lines from a pipe with a bound on each wait.
private final class LineReader: @unchecked Sendable {
    // @unchecked: read by the starting test, then only by the draining thread.
    private let handle: FileHandle
    private var buffer = Data()

    init(_ handle: FileHandle) { self.handle = handle }

    /// Reads and discards until the writer closes the pipe.
    func drain() {
        while !handle.availableData.isEmpty {}
    }

    func nextLine(timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(left.components.seconds * 1000 + 1, 1000))
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }
}
