import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A private RabbitMQ with Web-STOMP on loopback, started from the project's `config/rabbitmq`.
///
/// Every port is chosen free at start (AMQP, Web-STOMP, plain STOMP, Erlang distribution, and a
/// private `epmd`, so nothing is shared with another broker on the machine). The node runs as the
/// `rabbitmq` user (Debian's wrapper switches to it when started as root), so its folder belongs
/// to that user. Readiness is the node's own `rabbit:await_startup`, not a fixed sleep, and the
/// test bed controls the node with Erlang expressions over `erl_call` (``evaluate(_:timeout:)``), which
/// costs milliseconds where each `rabbitmqctl` boots an Erlang VM. ``stop()`` kills the node and
/// its epmd by pid and removes the folder. Tests that never stop, restart or pause the broker take
/// the process's shared one with ``shared()`` instead.
public final class RabbitMQTestBed: RabbitMQBroker, @unchecked Sendable {
    // @unchecked: mutable state (`nodePID`, `stopped`) is guarded by `lock`.

    /// What to start.
    public struct Configuration: Sendable {
        /// The folder with rabbitmq.conf (template), enabled_plugins and definitions.json.
        public var templateDirectory: URL
        /// How long the node may take to start.
        public var startTimeout: Duration
        /// Outlives this object (`conclave-testbed broker` stops it itself).
        public var persistent = false

        public init(
            templateDirectory: URL = RabbitMQTestBed.defaultTemplateDirectory,
            startTimeout: Duration = .seconds(90)
        ) {
            self.templateDirectory = templateDirectory
            self.startTimeout = startTimeout
        }
    }

    /// `config/rabbitmq` of the checkout this library was built from.
    public static var defaultTemplateDirectory: URL {
        if let configured = ProcessInfo.processInfo.environment["CONCLAVE_RABBITMQ_CONFIG"] {
            return URL(fileURLWithPath: configured)
        }
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }  // Sources/RabbitMQTestBed/RabbitMQTestBed.swift
        return url.appendingPathComponent("config/rabbitmq")
    }

    /// The virtual host of the signaling topology.
    public static let virtualHost = "ecall"

    public let configuration: Configuration
    /// The node's folder (config, mnesia, logs).
    public let directory: URL
    /// `NAME@localhost`.
    public let nodeName: String
    public let amqpPort: Int
    public let webSTOMPPort: Int
    public let stompPort: Int
    public let distributionPort: Int
    public let epmdPort: Int
    /// What a STOMP-over-WebSocket client connects to.
    public var webSocketURL: String { "ws://127.0.0.1:\(webSTOMPPort)/ws" }
    public var logFile: URL { directory.appendingPathComponent("log/\(nodeName).log") }
    private var pidFile: URL { directory.appendingPathComponent("node.pid") }

    private let logger: Logger
    private let lock = NSLock()
    private var nodePID: pid_t?
    private var epmdProcess: Process?
    private var stopped = false
    /// Set for the process's shared node (``shared()``): its processes die with the test process
    /// even when it is killed, which `atexit` cannot see.
    private let diesWithTestProcess: Bool
    private var watchdogs: [ExitWatchdog] = []
    /// Set on a handle of the process's shared node (``shared()``): which lease it is.
    /// ``stop()`` hands that lease back instead of killing the node, which the handle does not own.
    let lease: Int?
    /// A handle of the shared node (``shared()``), not a broker of its own.
    public var isShared: Bool { lease != nil }

    /// The pid of the broker's Erlang VM, while it runs.
    public var pid: pid_t? { lock.withLock { nodePID } }
    /// The pid of the broker's private epmd.
    public var epmdPID: pid_t? { lock.withLock { epmdProcess?.processIdentifier } }

    /// Writes the configuration, starts epmd and the node, and waits until the node is up.
    public convenience init(
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "rabbitmq-testbed")
    ) throws {
        try self.init(configuration: configuration, logger: logger, diesWithTestProcess: false)
    }

    /// A node whose processes are killed when the test process ends, however it ends
    /// (``ExitWatchdog``); the shared node is one.
    init(configuration: Configuration, logger: Logger, diesWithTestProcess: Bool) throws {
        self.configuration = configuration
        self.logger = logger
        self.diesWithTestProcess = diesWithTestProcess
        lease = nil
        try Self.requireTools()
        let ports = try Self.freePorts(5)
        (amqpPort, webSTOMPPort, stompPort, distributionPort, epmdPort) = (
            ports[0], ports[1], ports[2], ports[3], ports[4]
        )
        let tag = String(format: "%06x", UInt32.random(in: 0..<0xFF_FFFF))
        let name = configuration.persistent ? "conclave-broker-\(tag)" : "conclave-\(getpid())-\(tag)"
        nodeName = "\(name)@localhost"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("rabbitmq-\(name)")
        do {
            try writeConfiguration()
            try startEPMD()
            try bootNode()
        } catch {
            teardown()
            throw error
        }
    }

    /// A handle of `node` (the shared one) for lease `number`: the same ports and folder, no
    /// processes of its own.
    init(leaseOf node: RabbitMQTestBed, number: Int) {
        configuration = node.configuration
        logger = node.logger
        lease = number
        diesWithTestProcess = false
        (amqpPort, webSTOMPPort, stompPort, distributionPort, epmdPort) = (
            node.amqpPort, node.webSTOMPPort, node.stompPort, node.distributionPort, node.epmdPort
        )
        nodeName = node.nodeName
        directory = node.directory
        stopped = true  // nothing of this handle's to tear down
    }

    deinit {
        // A handle dropped without stop() still hands its lease back.
        if let lease {
            SharedRabbitMQ.release(lease: lease)
        } else {
            teardown()
        }
    }

    // MARK: Configuration

    private func writeConfiguration() throws {
        let fileManager = FileManager.default
        for folder in ["mnesia", "log"] {
            try fileManager.createDirectory(
                at: directory.appendingPathComponent(folder),
                withIntermediateDirectories: true
            )
        }
        let template = configuration.templateDirectory
        func read(_ name: String) throws -> String {
            do {
                return try String(contentsOf: template.appendingPathComponent(name), encoding: .utf8)
            } catch {
                throw RabbitMQTestBedError("cannot read \(name) in \(template.path): \(error)")
            }
        }
        let values = [
            "@ADDRESS@": "127.0.0.1", "@AMQP_PORT@": "\(amqpPort)", "@WEB_STOMP_PORT@": "\(webSTOMPPort)",
            "@STOMP_PORT@": "\(stompPort)",
            "@DEFINITIONS@": directory.appendingPathComponent("definitions.json").path,
        ]
        var conf = try read("rabbitmq.conf")
        for (key, value) in values { conf = conf.replacingOccurrences(of: key, with: value) }
        try conf.write(to: directory.appendingPathComponent("rabbitmq.conf"), atomically: true, encoding: .utf8)
        // Only what the node loads on its code path (``PluginFolder``), else the installed folder.
        _ = PluginFolder.make(
            at: directory.appendingPathComponent("plugins"),
            enabledPlugins: try read("enabled_plugins")
        )
        for name in ["enabled_plugins", "definitions.json"] {
            try read(name).write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        // Optional: a template folder of one's own may have none.
        if let advanced = try? read("advanced.config") {
            try advanced.write(
                to: directory.appendingPathComponent("advanced.config"),
                atomically: true,
                encoding: .utf8
            )
        }
        try Self.run("chown", ["-R", "rabbitmq:rabbitmq", directory.path])
    }

    /// The environment every rabbitmq command of this node needs (Debian's wrapper keeps it across `su`).
    private var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment.merge([
            "RABBITMQ_NODENAME": nodeName,
            "RABBITMQ_MNESIA_BASE": directory.appendingPathComponent("mnesia").path,
            "RABBITMQ_LOG_BASE": directory.appendingPathComponent("log").path,
            "RABBITMQ_CONFIG_FILE": directory.appendingPathComponent("rabbitmq").path,
            "RABBITMQ_ADVANCED_CONFIG_FILE": directory.appendingPathComponent("advanced.config").path,
            "RABBITMQ_ENABLED_PLUGINS_FILE": directory.appendingPathComponent("enabled_plugins").path,
            "RABBITMQ_FEATURE_FLAGS_FILE": directory.appendingPathComponent("mnesia/feature_flags").path,
            "RABBITMQ_PID_FILE": pidFile.path,
            "RABBITMQ_DIST_PORT": "\(distributionPort)",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": "\(epmdPort)",
        ]) { $1 }
        let plugins = directory.appendingPathComponent("plugins")
        if FileManager.default.fileExists(atPath: plugins.path) { environment["RABBITMQ_PLUGINS_DIR"] = plugins.path }
        return environment
    }

    // MARK: Processes

    private func startEPMD() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.epmdPath())
        process.arguments = ["-port", "\(epmdPort)", "-address", "127.0.0.1"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        lock.withLock { epmdProcess = process }
        try watchUntilExit(process, removing: directory)
    }

    /// Starts the node (after ``stopBroker()``, with the state it had: users, permissions) and
    /// waits until it serves.
    public func startBroker() throws {
        try refuseIfShared("start")
        try bootNode()
    }

    /// A shared broker outlives the test holding it, so only a private one may be stopped,
    /// started or restarted by a test.
    private func refuseIfShared(_ action: String) throws {
        guard isShared else { return }
        throw RabbitMQTestBedError(
            "cannot \(action) the shared broker (other tests use it): use RabbitMQTestBed() for a private one"
        )
    }

    private func bootNode() throws {
        try? FileManager.default.removeItem(at: pidFile)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.which("rabbitmq-server"))
        process.environment = environment
        let output = directory.appendingPathComponent("log/server.out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? handle.close()
        try watchUntilExit(process, removing: nil)
        let pid: pid_t
        do {
            pid = try Self.awaitStartup(
                of: process,
                timeout: configuration.startTimeout,
                evaluate: { try self.evaluate($0, timeout: $1) }
            )
        } catch {
            throw RabbitMQTestBedError("RabbitMQ did not start: \(error)\n\(logTail())")
        }
        lock.withLock { nodePID = pid }
        logger.debug("rabbitmq started", metadata: ["node": "\(nodeName)", "pid": "\(pid)"])
    }

    /// Waits until the node started by `server` serves, and returns its VM's pid.
    ///
    /// `rabbit:await_startup` on the node returns once its boot steps, definitions and plugins are
    /// done (what `rabbitmqctl wait` ends with). Until the node's distribution is up, `erl_call`
    /// cannot connect (epmd answers at once that no such node is registered), and it is tried
    /// again every 50 ms while `server` runs: a node that fails to boot fails the wait when its
    /// process exits, not at the timeout.
    static func awaitStartup(
        of server: Process,
        timeout: Duration,
        evaluate: (String, Duration) throws -> String
    ) throws -> pid_t {
        let deadline = ContinuousClock.now + timeout
        let milliseconds = max(Int(timeout.components.seconds) * 1000, 1000)
        var lastError: any Error = RabbitMQTestBedError("no attempt")
        while ContinuousClock.now < deadline {
            guard server.isRunning else {
                throw RabbitMQTestBedError(
                    "rabbitmq-server exited with status \(server.terminationStatus) (last: \(lastError))"
                )
            }
            do {
                let output = try evaluate(
                    "ok = rabbit:await_startup(\(milliseconds)), io:format(\"~s\", [os:getpid()])",
                    ContinuousClock.now.duration(to: deadline) + .seconds(1)
                )
                guard let pid = pid_t(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                    throw RabbitMQTestBedError("the node answered no pid: \(output.prefix(200))")
                }
                return pid
            } catch {
                lastError = error
                // Not up yet (or its cookie not written yet, at the very first boot on a machine).
                usleep(50_000)
            }
        }
        throw RabbitMQTestBedError("not up within \(timeout): \(lastError)")
    }

    /// Stops the node gracefully, keeping its state for ``startBroker()``: `rabbit:stop_and_halt`,
    /// as `rabbitmqctl shutdown` calls it, then waits until the VM has exited.
    public func stopBroker() throws {
        try refuseIfShared("stop")
        guard let pid = lock.withLock({ nodePID }) else { return }
        // Spawned: the call returns before the node halts under it.
        try evaluate("_ = spawn(fun () -> rabbit:stop_and_halt() end), ok")
        Self.waitForExit(pid, timeout: .seconds(30))
        lock.withLock { nodePID = nil }
    }

    /// Stops and starts the node (connections drop; users and permissions stay).
    public func restartBroker() throws {
        try stopBroker()
        try startBroker()
    }

    /// Freezes the node (SIGSTOP; a private broker only: a shared one's handle has no pid): connections stay open but nothing arrives, as with a hung server.
    public func pause() {
        if let pid = pid { kill(pid, SIGSTOP) }
    }

    /// Resumes a paused node (SIGCONT).
    public func resume() {
        if let pid = pid { kill(pid, SIGCONT) }
    }

    /// The login of device `id`, as ECall names it.
    public static func login(forDevice id: UInt64) -> String { "device-\(id)" }

    /// 32 random bytes, base64url: a passcode that needs no quoting anywhere.
    public static func randomPasscode() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<24).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
    }

    /// Runs `rabbitmqctl -n NODE arguments` against this node; `input` goes to its standard input.
    /// Each call boots an Erlang VM (1–3 s): the test bed itself uses ``evaluate(_:timeout:)``.
    @discardableResult
    public func rabbitmqctl(_ arguments: [String], input: String? = nil) throws -> String {
        try Self.run("rabbitmqctl", ["-n", nodeName, "-q"] + arguments, input: input, environment: environment)
    }

    /// Evaluates Erlang `expressions` (separated by commas, no final period, value `ok`) on the
    /// node with `erl_call` (see ``ErlangCall``) and returns what they printed.
    @discardableResult
    public func evaluate(_ expressions: String, timeout: Duration = .seconds(120)) throws -> String {
        try ErlangCall.evaluate(
            expressions,
            node: nodeName,
            longName: false,
            environment: environment,
            timeout: timeout
        )
    }

    /// The last lines of the node's log, for error messages.
    public func logTail(lines: Int = 30) -> String {
        guard let text = try? String(contentsOf: logFile, encoding: .utf8) else { return "(no RabbitMQ log)" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    // MARK: Teardown

    /// Kills the node and its epmd by pid and removes the folder; for the shared broker
    /// (``shared()``), hands it back emptied instead. Safe to call twice.
    public func stop() {
        if let lease {
            SharedRabbitMQ.release(lease: lease)
        } else {
            teardown()
        }
    }

    /// Leaves the broker running when this object goes away; ``stop(pid:epmdPID:directory:)`` stops it.
    public func detach() {
        lock.withLock { stopped = true }
    }

    /// Stops a detached broker.
    public static func stop(pid: pid_t?, epmdPID: pid_t?, directory: URL?) {
        for target in [pid, epmdPID].compactMap({ $0 }) {
            kill(target, SIGCONT)
            kill(target, SIGKILL)
            waitForExit(target, timeout: .seconds(10))
        }
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    private func teardown() {
        let (first, node, epmd) = lock.withLock { () -> (Bool, pid_t?, Process?) in
            defer {
                stopped = true
                nodePID = nil
                epmdProcess = nil
            }
            return (!stopped, nodePID, epmdProcess)
        }
        guard first else { return }
        if let node {
            kill(node, SIGCONT)
            kill(node, SIGKILL)
            Self.waitForExit(node, timeout: .seconds(10))
        }
        // The VM's helpers (erl_child_setup, inet_gethost) die with it; epmd is ours to end.
        if let epmd, epmd.isRunning {
            kill(epmd.processIdentifier, SIGKILL)
            epmd.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
        for watchdog in lock.withLock({ watchdogs }) { watchdog.fire() }
        lock.withLock { watchdogs = [] }
    }

    /// Arms an ``ExitWatchdog`` for `process`'s group when this node dies with the test process.
    private func watchUntilExit(_ process: Process, removing folder: URL?) throws {
        guard diesWithTestProcess else { return }
        let watchdog = try ExitWatchdog(killingGroupOf: process.processIdentifier, removing: folder)
        lock.withLock { watchdogs.append(watchdog) }
    }

    // MARK: Helpers

    /// Waits until `pid` has exited (it may not be our child: poll its existence). A zombie has
    /// exited: an orphan (a node's VM whose wrapper was killed first) is reaped by init on init's
    /// own schedule, two seconds at a time here, and waiting for that made a cluster's teardown
    /// take half a minute; a zombie holds no socket, port or file any more.
    static func waitForExit(_ pid: pid_t, timeout: Duration) {
        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        while ContinuousClock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            if kill(pid, 0) != 0 && errno == ESRCH { return }
            if isZombie(pid) { return }
            usleep(20_000)
        }
    }

    /// `pid` has exited and waits to be reaped (state Z in /proc/PID/stat, after the command name).
    static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return stat[end...].dropFirst().trimmingCharacters(in: .whitespaces).first == "Z"
    }

    private static func requireTools() throws {
        guard getuid() == 0 else {
            throw RabbitMQTestBedError(
                "the RabbitMQ test bed must run as root (it starts the node as the rabbitmq user)"
            )
        }
        _ = try which("rabbitmq-server")
        _ = try which("rabbitmqctl")
        _ = try epmdPath()
    }

    static func epmdPath() throws -> String {
        let root = "/usr/lib/erlang"
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: root) {
            for entry in entries.sorted() where entry.hasPrefix("erts-") {
                let path = "\(root)/\(entry)/bin/epmd"
                if FileManager.default.isExecutableFile(atPath: path) { return path }
            }
        }
        return try which("epmd")
    }

    static func which(_ name: String) throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/lib/erlang/bin"] {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw RabbitMQTestBedError("\(name) is not installed: run scripts/setup (rabbitmq-server)")
    }

    /// Ports free on 127.0.0.1 now (bound to port 0, read back, released).
    static func freePorts(_ count: Int) throws -> [Int] {
        var ports: [Int] = []
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw RabbitMQTestBedError("cannot open a socket to find a free port") }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            guard bound else { throw RabbitMQTestBedError("cannot bind a socket to find a free port") }
            ports.append(Int(UInt16(bigEndian: address.sin_port)))
        }
        return ports
    }

    /// Runs a command to completion; a non-zero exit is an error with its standard error.
    @discardableResult
    static func run(
        _ name: String,
        _ arguments: [String],
        input: String? = nil,
        environment: [String: String]? = nil
    ) throws -> String {
        let result = try execute(try which(name), arguments, input: input, environment: environment)
        guard result.status == 0 else {
            // The arguments are safe to show: secrets only ever travel on standard input.
            let message = (result.errors + result.output).trimmingCharacters(in: .whitespacesAndNewlines)
            throw RabbitMQTestBedError("\(name) \(arguments.joined(separator: " ")) failed: \(message.prefix(2000))")
        }
        return result.output
    }

    /// Runs `executable` to completion and returns its exit status, standard output and standard error.
    static func execute(
        _ executable: String,
        _ arguments: [String],
        input: String? = nil,
        environment: [String: String]? = nil
    ) throws -> (status: Int32, output: String, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = try input.map(inputFile) ?? FileHandle.nullDevice
        try process.run()
        // Read standard error concurrently so that neither pipe can fill and stall the command.
        let errorData = LockedData()
        let reader = Thread { errorData.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let err = errorData.wait()
        return (
            process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self)
        )
    }
}

extension RabbitMQTestBed {
    /// `input` in a file already unlinked, on /dev/shm (memory) where there is one, read from its
    /// start: a command's standard input that only this process and the command can open, that
    /// never reaches a disk (it may hold a passcode) and, unlike a pipe, cannot raise SIGPIPE in
    /// this process when the command exits without reading it (as `erl_call` does when the node
    /// is not up yet).
    static func inputFile(_ input: String) throws -> FileHandle {
        let folder = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        var template = Array((folder + "/rabbitmq-test-bed-XXXXXX").utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else {
            throw RabbitMQTestBedError("cannot make a command's input: \(String(cString: strerror(errno)))")
        }
        unlink(template)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // the command gets it as its standard input only
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let bytes = Array(input.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
            guard count > 0 else {
                throw RabbitMQTestBedError("cannot write a command's input: \(String(cString: strerror(errno)))")
            }
            written += count
        }
        lseek(fd, 0, SEEK_SET)
        return handle
    }
}

/// Data handed from a reader thread, waited for once.
private final class LockedData: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()

    func set(_ value: Data) {
        data = value
        done.signal()
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}

/// The broker could not be set up or controlled; the message says what and why.
public struct RabbitMQTestBedError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
