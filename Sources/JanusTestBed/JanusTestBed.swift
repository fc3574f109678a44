import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A real Janus WebRTC Server running as a test host in a network namespace of its own.
///
/// Janus never offers loopback ICE candidates, so on a single machine its media would otherwise flow
/// over the machine's outward address. The test bed instead creates a namespace joined to this side
/// by a veth pair on a /30 from 198.18.0.0/15 (the range set aside for network test beds), starts
/// Janus inside it from the project's `config/janus` (templated into a temporary folder), and waits
/// until its WebSocket transport answers. Every packet of a test stays on that veth link.
///
/// Names and addresses are unique per instance so concurrent runs never collide; ``stop()`` kills
/// Janus by its own pid and deletes the namespace (which removes the veth pair). Namespaces left
/// behind by a process that died are removed the next time a test bed starts.
public final class JanusTestBed: @unchecked Sendable {
    // @unchecked: mutable state (`janusPID`, `stopped`) is guarded by `lock`.

    /// What to start.
    public struct Configuration: Sendable {
        /// The folder holding janus.jcfg and the plugin/transport configs (with @PLACEHOLDERS@).
        public var templateDirectory: URL
        /// Janus `session_timeout`, seconds.
        public var sessionTimeout: Int
        /// Janus `reclaim_session_timeout`, seconds; > 0 so `claim` works after a dropped WebSocket.
        public var reclaimTimeout: Int
        /// Janus `api_secret`, or nil for none.
        public var apiSecret: String?
        /// The WebSocket port inside the namespace.
        public var webSocketPort: Int
        /// How long to wait for Janus to answer after starting it.
        public var startTimeout: Duration
        /// Whether the test bed outlives this process (`conclave-testbed up`): its namespace is then
        /// named so that the clean-up of dead runs' namespaces leaves it alone.
        public var persistent = false

        /// The defaults the test suite and the demo use.
        public init(
            templateDirectory: URL = JanusTestBed.defaultTemplateDirectory,
            sessionTimeout: Int = 60,
            reclaimTimeout: Int = 30,
            apiSecret: String? = nil,
            webSocketPort: Int = 8188,
            startTimeout: Duration = .seconds(20)
        ) {
            self.templateDirectory = templateDirectory
            self.sessionTimeout = sessionTimeout
            self.reclaimTimeout = reclaimTimeout
            self.apiSecret = apiSecret
            self.webSocketPort = webSocketPort
            self.startTimeout = startTimeout
        }
    }

    /// `config/janus` of the checkout this library was built from.
    public static var defaultTemplateDirectory: URL {
        if let configured = ProcessInfo.processInfo.environment["CONCLAVE_JANUS_CONFIG"] {
            return URL(fileURLWithPath: configured)
        }
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }  // Sources/JanusTestBed/JanusTestBed.swift
        return url.appendingPathComponent("config/janus")
    }

    /// The configuration this test bed was started with.
    public let configuration: Configuration
    /// The network namespace Janus runs in.
    public let namespace: String
    /// The veth end on this side (the client's ICE address lives here).
    public let hostInterface: String
    /// The veth end inside the namespace (Janus's ICE and WebSocket address live here).
    public let janusInterface: String
    /// This side's address on the link: clients bind ICE here.
    public let hostAddress: String
    /// Janus's address on the link.
    public let janusAddress: String
    /// The folder holding the generated config and `janus.log`.
    public let directory: URL
    /// `ws://<janusAddress>:<port>`: what a client connects to.
    public var webSocketURL: String { "ws://\(janusAddress):\(configuration.webSocketPort)" }
    /// Janus's own log file.
    public var logFile: URL { directory.appendingPathComponent("janus.log") }

    private let logger: Logger
    private let lock = NSLock()
    private var janusPID: pid_t?
    private var stopped = false

    /// The pid of the running Janus, if any.
    public var pid: pid_t? { lock.withLock { janusPID } }

    /// Creates the namespace and link, starts Janus and waits until its WebSocket answers.
    ///
    /// Throws ``TestBedError`` when a tool is missing, a command fails, or Janus does not answer in
    /// time (the error then carries the tail of Janus's log).
    public init(configuration: Configuration = Configuration(), logger: Logger = Logger(label: "janus-testbed"))
        throws
    {
        self.configuration = configuration
        self.logger = logger
        try Self.requireTools()
        Self.removeStaleNamespaces(logger: logger)

        let (index, tag) = Self.pickSubnet()
        let base = 4 * index  // offset within 198.18.0.0/15
        let third = (base >> 8) & 0xFF
        let second = 18 + (base >> 16)
        let fourth = base & 0xFF
        namespace = configuration.persistent ? "conclave-up-\(tag)" : "conclave-\(getpid())-\(tag)"
        hostInterface = "cv\(tag)h"
        janusInterface = "cv\(tag)j"
        janusAddress = "198.\(second).\(third).\(fourth + 1)"
        hostAddress = "198.\(second).\(third).\(fourth + 2)"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(namespace)

        do {
            try createLink()
            try writeConfiguration()
            try startJanus()
        } catch {
            teardown()
            throw error
        }
    }

    deinit { teardown() }

    // MARK: Link

    private func createLink() throws {
        try Self.ip(["netns", "add", namespace])
        try Self.ip(["link", "add", hostInterface, "type", "veth", "peer", "name", janusInterface])
        try Self.ip(["link", "set", janusInterface, "netns", namespace])
        try Self.ip(["addr", "add", "\(hostAddress)/30", "dev", hostInterface])
        try Self.ip(["link", "set", hostInterface, "up"])
        try Self.ip(["netns", "exec", namespace, "ip", "addr", "add", "\(janusAddress)/30", "dev", janusInterface])
        try Self.ip(["netns", "exec", namespace, "ip", "link", "set", janusInterface, "up"])
        try Self.ip(["netns", "exec", namespace, "ip", "link", "set", "lo", "up"])
        logger.debug(
            "test bed link up",
            metadata: ["namespace": "\(namespace)", "host": "\(hostAddress)", "janus": "\(janusAddress)"]
        )
    }

    /// Takes the link down (`up: false`) or brings it back, as a network outage would.
    public func setLink(up: Bool) throws {
        try Self.ip(["link", "set", hostInterface, up ? "up" : "down"])
    }

    /// Runs a command inside the namespace (for nftables impairment rules, say).
    @discardableResult
    public func runInNamespace(_ arguments: [String]) throws -> String {
        try Self.ip(["netns", "exec", namespace] + arguments)
    }

    /// Which packets an impairment applies to, seen from Janus.
    public enum Direction: Sendable, Hashable {
        /// Packets arriving at Janus (publishers' media, subscribers' RTCP).
        case toJanus
        /// Packets Janus sends (media to subscribers, RTCP to publishers).
        case fromJanus
        /// Both.
        case both
    }

    /// Drops `percent` % of the packets in `direction`, at random (nftables inside the namespace).
    public func dropPackets(percent: Int, direction: Direction = .both) throws {
        try impair(rule: "numgen random mod 100 < \(percent) drop;", direction: direction)
    }

    /// Drops every STUN binding request in `direction` (ICE connectivity and consent checks: a
    /// UDP payload that starts with type 0x0001 and STUN's magic cookie) and nothing else, so
    /// that media and DTLS still pass.
    public func dropSTUNBindingRequests(direction: Direction = .toJanus) throws {
        try impair(rule: "meta l4proto udp @th,64,16 0x0001 @th,96,32 0x2112a442 drop;", direction: direction)
    }

    /// Installs one nftables rule for the packets in `direction`, replacing any impairment.
    private func impair(rule: String, direction: Direction) throws {
        try clearImpairment()
        let input = direction == .fromJanus ? "" : rule
        let output = direction == .toJanus ? "" : rule
        let rules = """
            table inet conclave_impair {
              chain input { type filter hook input priority 0; policy accept; \(input) }
              chain output { type filter hook output priority 0; policy accept; \(output) }
            }
            """
        let file = directory.appendingPathComponent("impair.nft")
        try rules.write(to: file, atomically: true, encoding: .utf8)
        try runInNamespace(["nft", "-f", file.path])
    }

    /// Removes the impairment installed by ``dropPackets(percent:direction:)`` or
    /// ``dropSTUNBindingRequests(direction:)``.
    public func clearImpairment() throws {
        _ = try? runInNamespace(["nft", "delete", "table", "inet", "conclave_impair"])
    }

    // MARK: Janus

    private func writeConfiguration() throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        let templates: [String]
        do {
            templates = try fileManager.contentsOfDirectory(atPath: configuration.templateDirectory.path)
                .filter { $0.hasSuffix(".jcfg") }
        } catch {
            throw TestBedError("cannot read the Janus config templates in \(configuration.templateDirectory.path)")
        }
        guard templates.contains("janus.jcfg") else {
            throw TestBedError("no janus.jcfg in \(configuration.templateDirectory.path)")
        }
        let secretLine = configuration.apiSecret.map { "api_secret = \"\($0)\"" } ?? ""
        let values = [
            "@CONFIG_DIR@": directory.path,
            "@SESSION_TIMEOUT@": "\(configuration.sessionTimeout)",
            "@RECLAIM_TIMEOUT@": "\(configuration.reclaimTimeout)",
            "@API_SECRET_LINE@": secretLine,
            "@ICE_INTERFACE@": janusInterface,
            "@WS_IP@": janusAddress,
            "@WS_PORT@": "\(configuration.webSocketPort)",
        ]
        for name in templates {
            var text = try String(
                contentsOf: configuration.templateDirectory.appendingPathComponent(name),
                encoding: .utf8
            )
            for (key, value) in values { text = text.replacingOccurrences(of: key, with: value) }
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
    }

    /// Starts Janus in the namespace and waits until its WebSocket port accepts connections.
    public func startJanus() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.which("ip"))
        process.arguments = [
            "netns", "exec", namespace, try Self.which("janus"),
            "--configs-folder=\(directory.path)", "--config=\(directory.appendingPathComponent("janus.jcfg").path)",
            "--disable-colors",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // `ip netns exec` execs Janus in place, so this pid is Janus's own.
        lock.withLock { janusPID = process.processIdentifier }
        logger.debug("janus started", metadata: ["pid": "\(process.processIdentifier)"])

        let deadline = ContinuousClock.now + configuration.startTimeout
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                throw TestBedError("Janus exited at start (status \(process.terminationStatus))\n\(logTail())")
            }
            if Self.canConnect(host: janusAddress, port: configuration.webSocketPort) { return }
            usleep(50_000)
        }
        throw TestBedError("Janus did not answer on \(webSocketURL) within \(configuration.startTimeout)\n\(logTail())")
    }

    /// Kills Janus with `signal` (SIGKILL simulates a crash) and waits until it is gone.
    public func killJanus(signal: Int32 = SIGKILL) {
        guard
            let pid = lock.withLock({ () -> pid_t? in
                defer { janusPID = nil }; return janusPID
            })
        else { return }
        kill(pid, signal)
        var status: Int32 = 0
        let deadline = ContinuousClock.now + .seconds(5)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(20_000)
        }
    }

    /// Restarts Janus (a crash and a fresh start): every session and room created by API is gone.
    public func restartJanus() throws {
        killJanus()
        try startJanus()
    }

    /// The last lines of Janus's log, for error messages.
    public func logTail(lines: Int = 30) -> String {
        guard let text = try? String(contentsOf: logFile, encoding: .utf8) else { return "(no Janus log)" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    // MARK: Teardown

    /// Kills Janus and deletes the namespace (and with it the veth pair). Safe to call twice.
    public func stop() { teardown() }

    /// Leaves Janus and the namespace running when this object goes away (for `conclave-testbed up`);
    /// ``stop(namespace:pid:)`` removes them later.
    public func detach() {
        lock.withLock { stopped = true }
    }

    /// Stops a detached test bed by its namespace and Janus pid.
    public static func stop(namespace: String, pid: pid_t?) {
        if let pid { kill(pid, SIGKILL) }
        deleteNamespace(namespace)
    }

    private func teardown() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        // Janus keeps nothing worth a graceful exit here, and SIGTERM makes it linger for seconds.
        killJanus(signal: SIGKILL)
        Self.deleteNamespace(namespace)
        _ = try? Self.ip(["link", "del", hostInterface])  // normally gone with the namespace
        try? FileManager.default.removeItem(at: directory)
    }

    private static func deleteNamespace(_ name: String) {
        if let pids = try? ip(["netns", "pids", name]) {
            for pid in pids.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) { kill(pid, SIGKILL) }
        }
        _ = try? ip(["netns", "del", name])
    }

    /// Removes namespaces of earlier runs whose process no longer exists.
    static func removeStaleNamespaces(logger: Logger) {
        guard let list = try? ip(["netns", "list"]) else { return }
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "conclave", let owner = pid_t(parts[1]) else { continue }
            if kill(owner, 0) != 0 && errno == ESRCH {
                logger.notice("removing stale test bed namespace", metadata: ["namespace": "\(name)"])
                deleteNamespace(name)
            }
        }
    }

    // MARK: Helpers

    /// Picks a /30 in 198.18.0.0/15 not in use on this machine, and a tag for the names.
    private static func pickSubnet() -> (index: Int, tag: String) {
        let inUse = (try? ip(["-4", "-o", "addr", "show"])) ?? ""
        while true {
            let index = Int.random(in: 0..<32_768)
            let base = 4 * index
            let prefix = "198.\(18 + (base >> 16)).\((base >> 8) & 0xFF).\((base & 0xFF) + 2)/30"
            let tag = String(format: "%06x", UInt32.random(in: 0..<0xFF_FFFF))
            if !inUse.contains(prefix) { return (index, tag) }
        }
    }

    private static func requireTools() throws {
        guard getuid() == 0 else {
            throw TestBedError("the Janus test bed creates network namespaces and must run as root")
        }
        _ = try which("ip")
        _ = try which("janus")
    }

    static func which(_ name: String) throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"] {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TestBedError("\(name) is not installed: run scripts/setup")
    }

    @discardableResult
    static func ip(_ arguments: [String]) throws -> String {
        try runCommand(try which("ip"), arguments)
    }

    /// Runs `executable` (a path, or a name looked up in `PATH`) to completion and returns its
    /// standard output; a non-zero exit is an error carrying the command and its standard error.
    /// The child starts with no signal blocked (`openssl speed` times itself with SIGALRM, and
    /// the Swift runtime's threads block signals that children would inherit).
    public static func runCommand(_ executable: String, _ arguments: [String]) throws -> String {
        var none = sigset_t()
        sigfillset(&none)
        pthread_sigmask(SIG_UNBLOCK, &none, nil)
        let process = Process()
        if executable.hasPrefix("/") {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [executable] + arguments
        }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The commands run here write little to standard error, so reading it after standard
        // output cannot stall on a full pipe.
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: err, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw TestBedError("\(executable) \(arguments.joined(separator: " ")) failed: \(message)")
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A plain TCP connect with a short timeout: true once Janus's WebSocket transport listens.
    static func canConnect(host: String, port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return false }
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }
}

/// A test bed could not be set up or controlled; the message says what and why.
public struct TestBedError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Starts a program with default signal dispositions and nothing blocked, whatever the calling
/// thread's state (Swift's runtime threads block signals, and `Process` passes that on), so the
/// child reacts to Ctrl-C and SIGTERM as a program started from a shell would. Returns its pid.
public func spawnWithCleanSignals(_ arguments: [String], environment: [String: String]) throws -> pid_t {
    guard let program = arguments.first else { throw TestBedError("no command to run") }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let status = posix_spawnp(&pid, program, nil, &attributes, argv, envp)
    guard status == 0 else { throw TestBedError("cannot run \(program): \(String(cString: strerror(status)))") }
    return pid
}
