import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A RabbitMQ cluster of several nodes, each in a network namespace of its own as if on a machine
/// of its own, started from the project's `config/rabbitmq`.
///
/// The namespaces hang off one bridge on this side (a /29 from 198.18.0.0/15, the range set aside
/// for network test beds): the bridge has `.1`, node *i* has `.2 + i`, so the nodes reach each
/// other (Erlang distribution, node names `rabbit@ADDRESS` with long names) and the tests reach
/// every node, and nothing leaves the machine. Every node runs its own epmd on its own address,
/// so default ports serve everywhere. Node 0 starts first; the others then start side by side and
/// join it as they boot (peer discovery from the configuration, listing node 0). The definitions
/// are imported on node 0 once all have joined, so the quorum queue is created with a replica on
/// every node and its first leader on node 0, as on a running production cluster.
///
/// ``kill(node:)`` is a machine lost (SIGKILL of the node's VM); ``start(node:)`` brings it back with
/// its data, and it rejoins by itself. ``stop()`` kills everything in the namespaces, deletes them
/// and the bridge. Namespaces are named `conclave-<pid>-<tag>` like JanusTestBed's, so a dead
/// run's namespaces are removed by the next Janus test bed.
public final class RabbitMQCluster: RabbitMQBroker, @unchecked Sendable {
    // @unchecked: mutable state (`pids`, `stopped`) is guarded by `lock`.

    /// One node: where it lives and how to reach it.
    public struct Node: Sendable, Hashable {
        public var index: Int
        public var namespace: String
        /// The node's address on the bridge.
        public var address: String
        /// `rabbit@ADDRESS`.
        public var name: String
        public var directory: URL
        /// `ws://ADDRESS:15674/ws`.
        public var webSocketURL: String { "ws://\(address):\(RabbitMQCluster.webSTOMPPort)/ws" }
    }

    public static let webSTOMPPort = 15674
    static let amqpPort = 5672
    static let stompPort = 61613

    public let configuration: RabbitMQTestBed.Configuration
    public let nodes: [Node]
    /// The bridge on this side, and its address (what the nodes see the tests come from).
    public let bridge: String
    public let bridgeAddress: String
    private let tag: String
    private let logger: Logger
    private let lock = NSLock()
    private var pids: [Int: pid_t] = [:]
    private var stopped = false
    /// Errors of nodes started side by side, by index.
    private var startErrors: [Int: any Error] = [:]

    /// Creates the namespaces, starts every node, clusters them and imports the definitions (the
    /// quorum queue gets a replica on every node).
    public init(
        nodeCount: Int = 3,
        configuration: RabbitMQTestBed.Configuration = RabbitMQTestBed.Configuration(),
        logger: Logger = Logger(label: "rabbitmq-cluster")
    ) throws {
        guard (1...5).contains(nodeCount) else {
            throw RabbitMQTestBedError("a test cluster has 1 to 5 nodes, not \(nodeCount)")
        }
        self.configuration = configuration
        self.logger = logger
        guard getuid() == 0 else {
            throw RabbitMQTestBedError("the RabbitMQ cluster creates network namespaces and must run as root")
        }
        _ = try RabbitMQTestBed.which("rabbitmq-server")
        _ = try RabbitMQTestBed.which("rabbitmqctl")
        _ = try RabbitMQTestBed.which("ip")
        let (base, tag) = Self.pickSubnet()
        self.tag = tag
        bridge = "cv\(tag)b"
        bridgeAddress = Self.address(base + 1)
        nodes = (0..<nodeCount).map { index in
            let namespace = "conclave-\(getpid())-\(tag)n\(index)"
            let address = Self.address(base + 2 + index)
            return Node(
                index: index,
                namespace: namespace,
                address: address,
                name: "rabbit@\(address)",
                directory: FileManager.default.temporaryDirectory.appendingPathComponent(namespace)
            )
        }
        do {
            try createNetwork()
            for node in nodes { try writeConfiguration(node) }
            // Node 0 alone first: a node that joins while node 0's database is not up yet fails
            // its boot. The others boot together, each joining node 0 as it boots, instead of
            // booting alone and restarting their application to join (stop_app, reset,
            // join_cluster, start_app), which took a boot's time again for each, one after the other.
            try start(node: 0)
            try startTogether(nodes.dropFirst().map(\.index))
            // Created now, with every node in it, rather than at node 0's boot and then grown onto
            // the others: a replica added by a membership change moments before node 0 is killed
            // (as the tests do) was seen missing from node 0's state when it restarted, which
            // then elected itself alone.
            let definitions = nodes[0].directory.appendingPathComponent("definitions.json").path
            try evaluate(
                node: 0,
                """
                {ok, Definitions} = file:read_file("\(definitions)"),
                ok = rabbit_definitions:import_raw(Definitions)
                """
            )
        } catch {
            teardown()
            throw error
        }
    }

    deinit { teardown() }

    // MARK: Nodes

    /// The pid of node `index`'s VM while it runs.
    public func pid(node index: Int) -> pid_t? { lock.withLock { pids[index] } }

    /// The node is lost at once (SIGKILL of its VM): its connections drop, nothing is flushed.
    public func kill(node index: Int) {
        guard let pid = lock.withLock({ pids.removeValue(forKey: index) }) else { return }
        Glibc.kill(pid, SIGKILL)
        RabbitMQTestBed.waitForExit(pid, timeout: .seconds(10))
    }

    /// Starts node `index` again with its data; it rejoins the cluster. Returns once it serves.
    public func start(node index: Int) throws {
        let node = nodes[index]
        let server = try launch(node)
        try awaitStartup(node, server: server)
    }

    /// Starts `indices` at once (each on a thread of its own) and returns once all serve.
    private func startTogether(_ indices: [Int]) throws {
        let group = DispatchGroup()
        for index in indices {
            group.enter()
            Thread {
                defer { group.leave() }
                do { try self.start(node: index) } catch { self.lock.withLock { self.startErrors[index] = error } }
            }.start()
        }
        group.wait()
        let errors = lock.withLock { startErrors }
        if let (_, error) = errors.sorted(by: { $0.key < $1.key }).first { throw error }
    }

    /// Node names the cluster reports as running, seen from node `index`.
    public func runningNodes(from index: Int = 0) throws -> [String] {
        try evaluate(node: index, "[io:format(\"~s~n\", [Node]) || Node <- rabbit_nodes:all_running()], ok")
            .split(separator: "\n").map(String.init).sorted()
    }

    /// The nodes holding a replica of quorum queue `queue` (in virtual host `ecall`), and those of
    /// them online, seen from node `index` (as `rabbitmqctl list_queues name members online`).
    public func quorumMembers(of queue: String, from index: Int = 0) throws -> (members: [String], online: [String]) {
        let output = try evaluate(
            node: index,
            """
            Join = fun (Nodes) when is_list(Nodes) -> lists:join(",", [atom_to_list(N) || N <- Nodes]);
                       (_) -> ""  % a classic queue has no members
                   end,
            [io:format("~s\t~s\t~s~n", [Name, Join(Members), Join(Online)])
                || [{name, {resource, _, queue, Name}}, {members, Members}, {online, Online}]
                    <- rabbit_amqqueue:collect_info_all(<<"\(RabbitMQTestBed.virtualHost)">>, [name, members, online])],
            ok
            """
        )
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 3, fields[0] == queue else { continue }
            func nodes(_ field: Substring) -> [String] { field.split(separator: ",").map(String.init).sorted() }
            return (nodes(fields[1]), nodes(fields[2]))
        }
        throw RabbitMQTestBedError("no quorum queue \(queue) on \(nodes[index].name): \(output.prefix(500))")
    }

    /// Runs `rabbitmqctl` against node `index`, inside its namespace. Each call boots an Erlang VM
    /// (1–3 s): the test bed itself uses ``evaluate(node:_:timeout:)``.
    @discardableResult
    public func rabbitmqctl(node index: Int, _ arguments: [String], input: String? = nil) throws -> String {
        let node = nodes[index]
        return try Self.run(
            namespace: node.namespace,
            "rabbitmqctl",
            ["-n", node.name, "-q"] + arguments,
            input: input,
            environment: environment(node)
        )
    }

    /// `rabbitmqctl` against the first node that runs (users and queues are the cluster's).
    @discardableResult
    public func rabbitmqctl(_ arguments: [String], input: String?) throws -> String {
        try rabbitmqctl(node: try firstRunning(), arguments, input: input)
    }

    /// Evaluates Erlang `expressions` on node `index` (from inside its namespace) with `erl_call`
    /// (see ``RabbitMQBroker/evaluate(_:timeout:)``) and returns what they printed.
    @discardableResult
    public func evaluate(node index: Int, _ expressions: String, timeout: Duration = .seconds(120)) throws -> String {
        let node = nodes[index]
        return try ErlangCall.evaluate(
            expressions,
            node: node.name,
            longName: true,
            environment: environment(node),
            namespace: node.namespace,
            timeout: timeout
        )
    }

    /// Evaluates on the first node that runs (users and queues are the cluster's).
    @discardableResult
    public func evaluate(_ expressions: String, timeout: Duration) throws -> String {
        try evaluate(node: try firstRunning(), expressions, timeout: timeout)
    }

    private func firstRunning() throws -> Int {
        let running = lock.withLock { pids.keys.sorted() }
        guard let index = running.first else { throw RabbitMQTestBedError("no node of the cluster runs") }
        return index
    }

    /// The last lines of node `index`'s log.
    public func logTail(node index: Int, lines: Int = 30) -> String {
        let node = nodes[index]
        let file = node.directory.appendingPathComponent("log/\(node.name).log")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return "(no log for \(node.name))" }
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    // MARK: Set-up

    private func createNetwork() throws {
        try Self.ip(["link", "add", bridge, "type", "bridge"])
        try Self.ip(["addr", "add", "\(bridgeAddress)/29", "dev", bridge])
        try Self.ip(["link", "set", bridge, "up"])
        for node in nodes {
            let outside = "cv\(tag)\(node.index)h"
            let inside = "cv\(tag)\(node.index)n"
            try Self.ip(["netns", "add", node.namespace])
            try Self.ip(["link", "add", outside, "type", "veth", "peer", "name", inside])
            try Self.ip(["link", "set", inside, "netns", node.namespace])
            try Self.ip(["link", "set", outside, "master", bridge])
            try Self.ip(["link", "set", outside, "up"])
            try Self.ip(["netns", "exec", node.namespace, "ip", "addr", "add", "\(node.address)/29", "dev", inside])
            try Self.ip(["netns", "exec", node.namespace, "ip", "link", "set", inside, "up"])
            try Self.ip(["netns", "exec", node.namespace, "ip", "link", "set", "lo", "up"])
        }
    }

    private func writeConfiguration(_ node: Node) throws {
        let fileManager = FileManager.default
        for folder in ["mnesia", "log"] {
            try fileManager.createDirectory(
                at: node.directory.appendingPathComponent(folder),
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
            "@ADDRESS@": node.address, "@AMQP_PORT@": "\(Self.amqpPort)", "@WEB_STOMP_PORT@": "\(Self.webSTOMPPort)",
            "@STOMP_PORT@": "\(Self.stompPort)",
            "@DEFINITIONS@": node.directory.appendingPathComponent("definitions.json").path,
        ]
        var conf = try read("rabbitmq.conf")
        for (key, value) in values { conf = conf.replacingOccurrences(of: key, with: value) }
        // No import at boot: the cluster imports the definitions once every node has joined.
        conf = conf.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("definitions.") }.joined(separator: "\n")
        if node.index > 0 {
            // Joins node 0 at its first boot (node 0 is up by then); later boots rejoin from its data.
            conf += """

                cluster_formation.peer_discovery_backend = classic_config
                cluster_formation.classic_config.nodes.1 = \(nodes[0].name)

                """
        }
        try conf.write(to: node.directory.appendingPathComponent("rabbitmq.conf"), atomically: true, encoding: .utf8)
        // Only what the node loads on its code path (``PluginFolder``), else the installed folder.
        _ = PluginFolder.make(
            at: node.directory.appendingPathComponent("plugins"),
            enabledPlugins: try read("enabled_plugins")
        )
        for name in ["enabled_plugins", "definitions.json"] {
            try read(name).write(to: node.directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        // Optional: a template folder of one's own may have none.
        if let advanced = try? read("advanced.config") {
            try advanced.write(
                to: node.directory.appendingPathComponent("advanced.config"),
                atomically: true,
                encoding: .utf8
            )
        }
        try RabbitMQTestBed.run("chown", ["-R", "rabbitmq:rabbitmq", node.directory.path])
    }

    private func environment(_ node: Node) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment.merge([
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_USE_LONGNAME": "true",
            "RABBITMQ_MNESIA_BASE": node.directory.appendingPathComponent("mnesia").path,
            "RABBITMQ_LOG_BASE": node.directory.appendingPathComponent("log").path,
            "RABBITMQ_CONFIG_FILE": node.directory.appendingPathComponent("rabbitmq").path,
            "RABBITMQ_ADVANCED_CONFIG_FILE": node.directory.appendingPathComponent("advanced.config").path,
            "RABBITMQ_ENABLED_PLUGINS_FILE": node.directory.appendingPathComponent("enabled_plugins").path,
            "RABBITMQ_FEATURE_FLAGS_FILE": node.directory.appendingPathComponent("mnesia/feature_flags").path,
            "ERL_EPMD_ADDRESS": node.address,
        ]) { $1 }
        let plugins = node.directory.appendingPathComponent("plugins")
        if FileManager.default.fileExists(atPath: plugins.path) { environment["RABBITMQ_PLUGINS_DIR"] = plugins.path }
        return environment
    }

    /// Starts the node's server inside its namespace (epmd comes with the first start).
    private func launch(_ node: Node) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try RabbitMQTestBed.which("ip"))
        process.arguments = ["netns", "exec", node.namespace, try RabbitMQTestBed.which("rabbitmq-server")]
        process.environment = environment(node)
        let output = node.directory.appendingPathComponent("log/server.out")
        if !FileManager.default.fileExists(atPath: output.path) {
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        }
        let handle = try FileHandle(forWritingTo: output)
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? handle.close()
        return process
    }

    /// Waits until the node serves (``RabbitMQTestBed/awaitStartup(of:timeout:evaluate:)``).
    private func awaitStartup(_ node: Node, server: Process) throws {
        let pid: pid_t
        do {
            pid = try RabbitMQTestBed.awaitStartup(
                of: server,
                timeout: configuration.startTimeout,
                evaluate: { try self.evaluate(node: node.index, $0, timeout: $1) }
            )
        } catch {
            throw RabbitMQTestBedError("\(node.name) did not start: \(error)\n\(logTail(node: node.index))")
        }
        lock.withLock { pids[node.index] = pid }
        logger.debug("rabbitmq node started", metadata: ["node": "\(node.name)", "pid": "\(pid)"])
    }

    // MARK: Teardown

    /// Kills every process in the namespaces, deletes them and the bridge, removes the folders.
    /// Safe to call twice.
    public func stop() { teardown() }

    private func teardown() {
        let first = lock.withLock { () -> Bool in
            defer {
                stopped = true
                pids.removeAll()
            }
            return !stopped
        }
        guard first else { return }
        for node in nodes {
            // The VM, its helpers and the namespace's epmd: everything in there is ours.
            if let listed = try? Self.ip(["netns", "pids", node.namespace]) {
                for pid in listed.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) {
                    Glibc.kill(pid, SIGKILL)
                    RabbitMQTestBed.waitForExit(pid, timeout: .seconds(10))
                }
            }
            _ = try? Self.ip(["netns", "del", node.namespace])
            try? FileManager.default.removeItem(at: node.directory)
        }
        _ = try? Self.ip(["link", "del", bridge])
    }

    // MARK: Helpers

    /// `198.18.0.0/15` offset `offset`, as text.
    static func address(_ offset: Int) -> String {
        "198.\(18 + (offset >> 16)).\((offset >> 8) & 0xFF).\(offset & 0xFF)"
    }

    /// A /29 in 198.18.0.0/15 whose bridge address is not in use here, and a tag for the names.
    static func pickSubnet() -> (base: Int, tag: String) {
        let inUse = (try? ip(["-4", "-o", "addr", "show"])) ?? ""
        while true {
            let base = 8 * Int.random(in: 0..<16_384)
            let tag = String(format: "%05x", UInt32.random(in: 0..<0xF_FFFF))
            if !inUse.contains(" \(address(base + 1))/") { return (base, tag) }
        }
    }

    @discardableResult
    static func ip(_ arguments: [String]) throws -> String {
        try RabbitMQTestBed.run("ip", arguments)
    }

    /// Runs a rabbitmq command inside `namespace`.
    @discardableResult
    static func run(
        namespace: String,
        _ name: String,
        _ arguments: [String],
        input: String? = nil,
        environment: [String: String]
    ) throws -> String {
        try RabbitMQTestBed.run(
            "ip",
            ["netns", "exec", namespace, try RabbitMQTestBed.which(name)] + arguments,
            input: input,
            environment: environment
        )
    }
}
