import Foundation
import JanusTestBed
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A machine of the recorder fleet, for tests: a network namespace of its own that reaches the
/// broker and the given Janus test beds, and nothing else.
///
/// A recorder service on another machine than the broker and Janus is what the fleet is built for;
/// running each service in its own namespace makes the test exercise that (its own address, its
/// own ICE candidates, no loopback shared with the broker) without a second machine. The namespace
/// has one link, a veth pair on a /30 from 198.18.0.0/15 like ``JanusTestBed``'s, to the test's
/// side, and routes over it to exactly:
/// - the test side's end, where a ``TCPRelay`` forwards to the broker's Web-STOMP port on
///   127.0.0.1 (the broker listens on loopback only, which the namespace does not share);
/// - each Janus's address (a /32), forwarded on the test's side from this link to that Janus's
///   own link. Forwarding is switched on for these test links only (`conf.<link>.forwarding`), and
///   each Janus namespace gets a route back to this host's address.
///
/// Janus's media goes the way its signaling does: Janus gathers candidates on its own link only
/// (seen: a direct link from this namespace into Janus's failed every ICE check).
/// Any other destination is unreachable from inside. The namespace is named
/// `conclave-<pid>-<tag>` like the Janus test bed's, so one left behind by a test process that
/// died is removed by the next test bed's clean-up.
final class RecorderHost: @unchecked Sendable {
    // @unchecked: every stored property is set in init; `stopped` is guarded by its Mutex.
    let namespace: String
    /// The test side's end of the link: where the broker's relay listens.
    let gatewayAddress: String
    /// This host's end of the link: its one ICE address.
    let address: String
    private let uplink: String
    private let relay: TCPRelay
    private let stopped = Mutex(false)

    /// The broker as seen from inside the namespace.
    var brokerURL: String { "ws://\(gatewayAddress):\(relay.port)/ws" }
    /// The addresses to gather ICE candidates on.
    var iceAddresses: [String] { [address] }

    /// Creates the namespace, its link and relay, and the routes to each of `janus`.
    init(brokerPort: Int, janus: [JanusTestBed]) throws {
        let tag = String(format: "%06x", UInt32.random(in: 0..<0xFF_FFFF))
        let namespace = "conclave-\(getpid())-\(tag)"
        self.namespace = namespace
        let uplink = "cv\(tag)u"
        self.uplink = uplink
        let inside = "cv\(tag)v"
        let subnet = try Self.freeSubnet()
        gatewayAddress = subnet.first
        address = subnet.second
        func inNamespace(_ arguments: [String]) throws {
            try Self.ip(["netns", "exec", namespace, "ip"] + arguments)
        }
        do {
            try Self.ip(["netns", "add", namespace])
            try inNamespace(["link", "set", "lo", "up"])
            try Self.ip(["link", "add", uplink, "type", "veth", "peer", "name", inside])
            try Self.ip(["link", "set", inside, "netns", namespace])
            try Self.ip(["addr", "add", "\(subnet.first)/30", "dev", uplink])
            try Self.ip(["link", "set", uplink, "up"])
            try inNamespace(["addr", "add", "\(subnet.second)/30", "dev", inside])
            try inNamespace(["link", "set", inside, "up"])
            try Self.enableForwarding(on: uplink)
            for bed in janus {
                try Self.enableForwarding(on: bed.hostInterface)
                try inNamespace(["route", "add", "\(bed.janusAddress)/32", "via", subnet.first])
                try bed.runInNamespace(["ip", "route", "replace", "\(subnet.second)/32", "via", bed.hostAddress])
            }
            relay = try TCPRelay(listeningOn: subnet.first, forwardingTo: brokerPort)
        } catch {
            Self.remove(namespace, uplink: uplink)
            throw error
        }
    }

    deinit { stop() }

    /// The command that runs `arguments` inside the namespace (`ip netns exec` execs in place, so
    /// the process started is the program itself: signals reach it directly).
    func command(_ arguments: [String]) throws -> [String] {
        [try Self.ipPath(), "netns", "exec", namespace] + arguments
    }

    /// Kills what still runs inside, deletes the namespace (its veth pairs go with it) and stops
    /// the relay. Safe to call twice.
    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        relay.stop()
        Self.remove(namespace, uplink: uplink)
    }

    private static func remove(_ namespace: String, uplink: String) {
        if let pids = try? ip(["netns", "pids", namespace]) {
            for pid in pids.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) { kill(pid, SIGKILL) }
        }
        _ = try? ip(["netns", "del", namespace])
        _ = try? ip(["link", "del", uplink])  // normally gone with the namespace
    }

    /// A /30 in 198.18.0.0/15: its `.1` and `.2` addresses.
    struct Subnet: Hashable {
        var first: String
        var second: String
    }

    /// A /30 whose addresses are not in use on this side.
    private static func freeSubnet() throws -> Subnet {
        let inUse = try ip(["-4", "-o", "addr", "show"])
        while true {
            let base = 4 * Int.random(in: 0..<32_768)
            let prefix = "198.\(18 + (base >> 16)).\((base >> 8) & 0xFF)."
            let subnet = Subnet(first: prefix + "\((base & 0xFF) + 1)", second: prefix + "\((base & 0xFF) + 2)")
            if !inUse.contains(subnet.first + "/") && !inUse.contains(subnet.second + "/") { return subnet }
        }
    }

    /// Forwards what arrives on `interface` (IPv4 decides per incoming link; the machine-wide
    /// switch stays as it is).
    private static func enableForwarding(on interface: String) throws {
        let path = "/proc/sys/net/ipv4/conf/\(interface)/forwarding"
        // Written in place: /proc/sys takes no temporary file and rename.
        guard let file = FileHandle(forWritingAtPath: path) else {
            throw TestBedError("cannot switch forwarding on for \(interface) (\(path))")
        }
        defer { try? file.close() }
        try file.write(contentsOf: Data("1\n".utf8))
    }

    private static func ipPath() throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        where FileManager.default.isExecutableFile(
            atPath: "\(directory)/ip"
        ) {
            return "\(directory)/ip"
        }
        throw TestBedError("ip (iproute2) is not installed: run scripts/setup")
    }

    @discardableResult
    private static func ip(_ arguments: [String]) throws -> String {
        try JanusTestBed.runCommand(try ipPath(), arguments)
    }
}

/// Forwards every TCP connection made to an address of this side to a port on 127.0.0.1, byte for
/// byte, both ways: how a namespace without our loopback reaches a server that listens on it.
///
/// Blocking sockets and a thread per direction: a test relays a handful of quiet STOMP
/// connections, and threads of its own keep the relay off the cooperative pool the tests run on.
final class TCPRelay: @unchecked Sendable {
    // @unchecked: `listener` and `target` are set in init; `open` is guarded by its Mutex.
    /// The port the relay listens on (chosen by the kernel).
    let port: Int
    private let listener: Int32
    private let target: Int
    /// The sockets of the relayed connections, closed at ``stop()``; nil once stopped.
    private let open = Mutex<Set<Int32>?>([])

    init(listeningOn address: String, forwardingTo targetPort: Int) throws {
        target = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestBedError("relay: socket: \(String(cString: strerror(errno)))") }
        var address4 = try Self.address(address, port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 64) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TestBedError("relay: cannot listen on \(address): \(reason)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address4.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting and cuts every relayed connection.
    func stop() {
        let sockets = open.withLock { open in
            defer { open = nil }
            return open ?? []
        }
        // The accept loop closes the listener when accept fails; shutting down wakes it.
        shutdown(listener, Int32(SHUT_RDWR))
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            guard let upstream = try? connectToTarget() else {
                close(client)
                continue
            }
            let admitted = open.withLock { open -> Bool in
                guard open != nil else { return false }
                open?.formUnion([client, upstream])
                return true
            }
            guard admitted else {
                close(client)
                close(upstream)
                return
            }
            let remaining = Countdown(2)
            let finish: @Sendable () -> Void = { [self] in
                guard remaining.next() == 0 else { return }
                // Both directions ended: the sockets are closed under the lock, so `stop()` never
                // shuts down a number the kernel has handed out again.
                open.withLock { open in
                    open?.subtract([client, upstream])
                    close(client)
                    close(upstream)
                }
            }
            Thread.detachNewThread {
                Self.pump(from: client, to: upstream)
                finish()
            }
            Thread.detachNewThread {
                Self.pump(from: upstream, to: client)
                finish()
            }
        }
    }

    private func connectToTarget() throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestBedError("relay: socket") }
        var address4 = try Self.address("127.0.0.1", port: target)
        let connected = withUnsafePointer(to: &address4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            throw TestBedError("relay: cannot connect to 127.0.0.1:\(target)")
        }
        return fd
    }

    /// Copies until end of stream or an error, then passes the end on (half-close).
    private static func pump(from source: Int32, to sink: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            var sent = 0
            while sent < count {
                // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE for the process.
                let written = buffer.withUnsafeBytes {
                    send(sink, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL))
                }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break copying }
                sent += written
            }
        }
        shutdown(sink, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
    }

    /// Counts the two directions of a connection down to the last one, which closes it.
    private final class Countdown: Sendable {
        private let count: Mutex<Int>
        init(_ count: Int) { self.count = Mutex(count) }
        func next() -> Int {
            count.withLock { count in
                count -= 1
                return count
            }
        }
    }

    private static func address(_ text: String, port: Int) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, text, &address.sin_addr) == 1 else { throw TestBedError("relay: bad address \(text)") }
        return address
    }
}
