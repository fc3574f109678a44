import Foundation

/// The outcome of a finished child process.
public struct ProcessResult: Sendable {
    /// The exit status (or the terminating signal's number when `terminatedBySignal`).
    public var status: Int32
    /// True when the process was killed by a signal, including the timeout's SIGKILL.
    public var terminatedBySignal: Bool
    /// Everything the process wrote to standard output.
    public var stdout: Data
    /// Everything the process wrote to standard error.
    public var stderr: Data

    /// Standard output as UTF-8 text.
    public var output: String { String(decoding: stdout, as: UTF8.self) }
    /// Standard error as UTF-8 text.
    public var errorOutput: String { String(decoding: stderr, as: UTF8.self) }
    /// Exited normally with status 0.
    public var succeeded: Bool { !terminatedBySignal && status == 0 }
}

/// An error starting or waiting for a child process.
public struct SubprocessError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Runs a program to completion with a bounded run time, capturing its output.
///
/// Tests use this for `ffprobe`, `ffmpeg`, `ip`, the Python peers and the `conclave` binary itself.
/// A process that outlives `timeout` is killed, so a hung child fails its test instead of the suite.
@discardableResult
public func runProcess(
    _ executable: String,
    _ arguments: [String],
    input: Data? = nil,
    environment: [String: String]? = nil,
    currentDirectory: URL? = nil,
    timeout: Duration = .seconds(120)
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : try which(executable))
    process.arguments = arguments
    if let environment {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    let stdoutPipe = Pipe()
    let stderrPipe = Pipe()
    let stdinPipe = Pipe()
    process.standardOutput = stdoutPipe
    process.standardError = stderrPipe
    process.standardInput = stdinPipe

    // Drain both pipes concurrently so a chatty child never blocks on a full pipe.
    let group = DispatchGroup()
    let outBox = DataBox()
    let errBox = DataBox()
    try process.run()
    group.enter()
    DispatchQueue.global().async {
        outBox.data = stdoutPipe.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    group.enter()
    DispatchQueue.global().async {
        errBox.data = stderrPipe.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    if let input { stdinPipe.fileHandleForWriting.write(input) }
    try? stdinPipe.fileHandleForWriting.close()

    let deadline = DispatchTime.now() + .nanoseconds(Int(timeout.components.seconds * 1_000_000_000))
    let exited = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
        process.waitUntilExit()
        exited.signal()
    }
    if exited.wait(timeout: deadline) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        exited.wait()
    }
    group.wait()
    return ProcessResult(
        status: process.terminationStatus,
        terminatedBySignal: process.terminationReason == .uncaughtSignal,
        stdout: outBox.data,
        stderr: errBox.data
    )
}

/// Finds a program on `PATH`.
public func which(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin"] {
        let candidate = "\(directory)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw SubprocessError(description: "\(name) is not installed (run scripts/setup)")
}

private final class DataBox: @unchecked Sendable {
    // @unchecked: written by exactly one reader thread, read only after DispatchGroup.wait().
    var data = Data()
}
