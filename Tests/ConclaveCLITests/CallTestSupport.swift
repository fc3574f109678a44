import ConclaveTestSupport
import Foundation
import JanusTestBed

#if canImport(Glibc)
    import Glibc
#endif

/// A `conclave join` or `rejoin` running in the background, its output going to files so that a
/// test can read the status lines at any time.
final class CallProcess: @unchecked Sendable {
    // @unchecked: `process` is set up in init; afterwards only thread-safe Process calls are made.
    let name: String
    private let process: Process
    let stdoutFile: URL
    let stderrFile: URL
    let started = ContinuousClock.now

    init(_ name: String, arguments: [String], in directory: URL, environment: [String: String] = [:]) throws {
        self.name = name
        let binary = TestPaths.productsDirectory.appendingPathComponent("conclave").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw SubprocessError(description: "no conclave binary at \(binary): run swift build first")
        }
        stdoutFile = directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(4)).out")
        stderrFile = directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(4)).err")
        _ = FileManager.default.createFile(atPath: stdoutFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
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
    var isRunning: Bool { process.isRunning }

    /// Every `--status json` line so far.
    var statusLines: [[String: Any]] {
        guard let text = try? String(contentsOf: stdoutFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    var lastStatus: [String: Any]? { statusLines.last }

    var errorOutput: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// The participant with user id `id` in the latest status line.
    func participant(_ id: String) -> [String: Any]? {
        (lastStatus?["participants"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    func framesDecrypted(from id: String) -> Int { participant(id)?["framesDecrypted"] as? Int ?? 0 }

    func undecryptable(from id: String) -> Int { participant(id)?["undecryptable"] as? Int ?? 0 }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the exit; SIGKILLs after `timeout` and returns nil then.
    func waitForExit(timeout: Duration = .seconds(15)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
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

/// Polls `condition` every 100 ms until it holds (returns the time it took) or `timeout` passes (nil).
func waitUntil(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Duration? {
    let start = ContinuousClock.now
    while ContinuousClock.now - start < timeout {
        if condition() { return ContinuousClock.now - start }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return nil
}

/// A call created with `conclave call create` for local participants, each with a data
/// directory (device key) of its own.
struct CallFixture {
    let bed: JanusTestBed
    let directory: URL
    let callID: UInt64
    private(set) var room: UInt64 = 0
    let names: [String]
    let janusArguments: [String]

    /// Creates device keys for `names` and the call (created by the first name).
    init(bed: JanusTestBed, names: [String] = ["alice", "bob"], apiSecret: String? = nil, extraKeys: [String] = [])
        throws
    {
        self.bed = bed
        self.names = names
        directory = try TestPaths.temporaryDirectory("conclave-call")
        callID = UInt64.random(in: 1...9_000_000_000)
        janusArguments = ["--janus", bed.webSocketURL] + (apiSecret.map { ["--api-secret", $0] } ?? [])
        var participants: [String] = []
        for name in names + extraKeys {
            let created = try conclave([
                "keys", "init", "--type", name.hasPrefix("a") ? "p256" : "rsa", "--data-dir", dataDirectory(name),
            ])
            guard created.succeeded else { throw SubprocessError(description: "keys init: \(created.errorOutput)") }
            let key = try conclave(["keys", "show", "--public", "--data-dir", dataDirectory(name)])
            let keyFile = directory.appendingPathComponent("\(name).pub")
            try key.stdout.write(to: keyFile)
            if names.contains(name) {
                participants += ["--participant", "\(name):\(name.capitalized)=@\(keyFile.path)"]
            }
        }
        let create = try conclave(
            [
                "call", "create", "--call-id", "\(callID)", "--codecs", "h264", "--out",
                directory.appendingPathComponent("invitations").path,
                "--data-dir", dataDirectory(names[0]),
            ] + janusArguments + participants
        )
        guard create.succeeded else { throw SubprocessError(description: "call create: \(create.errorOutput)") }
        let invitation = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: invitationPath(names[0])))
        )
        guard let room = ((invitation as? [String: Any])?["roomId"] as? NSNumber)?.uint64Value else {
            throw SubprocessError(description: "no roomId in the invitation")
        }
        self.room = room
    }

    func dataDirectory(_ name: String) -> String { directory.appendingPathComponent("data-\(name)").path }

    func invitationPath(_ name: String) -> String {
        directory.appendingPathComponent("invitations/\(name).json").path
    }

    /// The stored call record of `name`, or nil.
    func storedCall(_ name: String) -> Data? {
        FileManager.default.contents(atPath: dataDirectory(name) + "/keys/calls/\(callID).json")
    }

    /// Media and status options every participant uses: small pattern, JSON status, the bed's ICE address.
    var mediaArguments: [String] {
        ["--status", "json", "--ice-address", bed.hostAddress, "--width", "320", "--height", "240", "--fps", "15"]
    }

    /// Starts `conclave join` for `name` with its invitation.
    func join(
        _ name: String,
        invitation: String? = nil,
        _ extra: [String] = [],
        environment: [String: String] = [:]
    ) throws -> CallProcess {
        try CallProcess(
            name,
            arguments: ["join", "--data-dir", dataDirectory(name), "--invitation", invitation ?? invitationPath(name)]
                + janusArguments + mediaArguments + extra,
            in: directory,
            environment: environment
        )
    }

    /// Runs `conclave join` for `name` to completion (for the error cases).
    func joinToCompletion(_ name: String, invitation: String? = nil, _ extra: [String] = []) throws -> ProcessResult {
        try conclave(
            [
                "join", "--data-dir", dataDirectory(name), "--invitation", invitation ?? invitationPath(name),
                "--duration", "5",
            ]
                + janusArguments + mediaArguments + extra
        )
    }
}
