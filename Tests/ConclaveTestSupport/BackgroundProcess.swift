import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process that runs beside a test (a fake server, a peer) and is killed when the test ends.
public final class BackgroundProcess: @unchecked Sendable {
    // @unchecked: `process` and the pipes are set in init and only read afterwards.
    private let process: Process
    private let stdout: Pipe
    private let stderr: Pipe

    /// Starts `executable` with `arguments`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : try which(executable))
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        stdout = Pipe()
        stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit { stop() }

    /// The process id.
    public var pid: Int32 { process.processIdentifier }

    /// Reads one line of the child's standard output (blocking, bounded by `timeout`).
    public func readLine(timeout: Duration = .seconds(10)) throws -> String {
        let handle = stdout.fileHandleForReading
        var line = Data()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else {
                if !process.isRunning { break }
                continue
            }
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty { break }
            if byte.first == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        let errors = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
        throw SubprocessError(
            description: "no line from \(process.executableURL?.lastPathComponent ?? "child"): \(errors)"
        )
    }

    /// Kills the process (idempotent) and reaps it.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
