import Foundation
import JanusTestBed

/// A coturn TURN server inside a test bed's namespace, on Janus's side of the veth link.
///
/// It listens (UDP and TCP) and relays only on the namespace's address, with one long-term
/// credential (RFC 8489 section 9.2). Relayed media to Janus stays inside the namespace, and the
/// client reaches the server over the veth link, as it would reach a TURN server on the internet.
/// Needs `turnserver` (Debian package `coturn`); throws a clear error when it is missing.
public final class TurnServer: @unchecked Sendable {
    // @unchecked: every stored property is set in init and only read afterwards.
    /// The address the server listens and relays on (the test bed's Janus-side address).
    public let address: String
    /// The listening port, for UDP and TCP.
    public let port: UInt16
    /// The long-term credential.
    public let username: String
    public let password: String
    /// Where coturn logs (allocations, permissions, errors).
    public let logFile: URL

    private let process: BackgroundProcess
    private let directory: URL

    /// Starts coturn in `bed`'s namespace and waits until it listens.
    public init(
        in bed: JanusTestBed,
        port: UInt16 = 3478,
        username: String = "conclave",
        password: String = "relay-\(UInt32.random(in: 0...UInt32.max))"
    ) throws {
        guard let turnserver = try? which("turnserver") else {
            throw TestBedError("turnserver not found: install the Debian package coturn (scripts/setup does)")
        }
        address = bed.janusAddress
        self.port = port
        self.username = username
        self.password = password
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("turn-\(bed.namespace)-\(port)")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logFile = directory.appendingPathComponent("turnserver.log")
        // An empty configuration file, so that /etc/turnserver.conf is not read.
        let configuration = directory.appendingPathComponent("turnserver.conf")
        try Data().write(to: configuration)
        process = try BackgroundProcess(
            "ip",
            [
                "netns", "exec", bed.namespace, turnserver, "-c", configuration.path,
                "--listening-ip", address, "--relay-ip", address, "--listening-port", "\(port)",
                "--min-port", "40000", "--max-port", "40999",
                "--lt-cred-mech", "--user", "\(username):\(password)", "--realm", "conclave.test", "--fingerprint",
                "--no-tls", "--no-dtls", "--no-cli", "--no-multicast-peers",
                "--db", directory.appendingPathComponent("turndb").path,
                "--pidfile", directory.appendingPathComponent("turnserver.pid").path,
                "--log-file", logFile.path, "--simple-log", "--no-stdout-log", "--verbose",
            ]
        )
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if log.contains("Total General servers") {
                // The listeners open right after the relay servers are created.
                Thread.sleep(forTimeInterval: 0.2)
                return
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        process.stop()
        throw TestBedError("turnserver did not start within 10 s; its log:\n\(log)")
    }

    deinit { stop() }

    /// What coturn logged so far.
    public var log: String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    /// Stops the server and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
