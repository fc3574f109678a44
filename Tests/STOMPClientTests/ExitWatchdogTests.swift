import Foundation
import Testing

@testable import RabbitMQTestBed

/// The watchdog that kills the shared broker when the test process is killed: the end of its
/// pipe is what a killed process produces, so firing it is the same event, without killing the
/// test runner.
@Suite("The test bed's exit watchdog")
struct ExitWatchdogTests {
    @Test func theEndOfTheProcessKillsTheGroupAndRemovesTheFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("watchdog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // A script whose sleep is a grandchild, as rabbitmq-server's Erlang VM is.
        let (leader, grandchild) = try Self.scriptWithGrandchild(in: folder)
        let watchdog = try ExitWatchdog(killingGroupOf: leader.processIdentifier, removing: folder)
        #expect(kill(grandchild, 0) == 0, "armed, the watchdog waits")

        watchdog.fire()
        #expect(Self.isGone(grandchild), "the grandchild is killed with the group, not only the leader")
        leader.waitUntilExit()
        #expect(leader.terminationReason == .uncaughtSignal)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func aGroupThatAlreadyEndedIsLeftAlone() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("watchdog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (leader, grandchild) = try Self.scriptWithGrandchild(in: folder)
        let watchdog = try ExitWatchdog(killingGroupOf: leader.processIdentifier, removing: nil)
        kill(-leader.processIdentifier, SIGKILL)  // the owner's own stop
        leader.waitUntilExit()
        watchdog.fire()  // nothing left to kill, no folder to remove: it ends cleanly
        #expect(Self.isGone(grandchild))
        #expect(FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func noOtherChildInheritsThePipe() throws {
        // Children are started by posix_spawn elsewhere in the tests (Chromium, Janus) without
        // closing inherited descriptors: the writer must be close-on-exec, or such a child would
        // hold the pipe open after a killed test process, and the watchdog would never fire.
        let target = try Self.sleeper()
        let watchdog = try ExitWatchdog(killingGroupOf: target.processIdentifier, removing: nil)
        let flags = fcntl(watchdog.writer, F_GETFD)
        #expect(flags != -1 && flags & FD_CLOEXEC != 0)
        watchdog.fire()
        target.waitUntilExit()
        #expect(target.terminationStatus == SIGKILL)
    }

    /// `sh` starting a background `sleep` and waiting for it; returns once the sleep's pid is
    /// written.
    static func scriptWithGrandchild(in folder: URL) throws -> (Process, pid_t) {
        let pidFile = folder.appendingPathComponent("grandchild.pid")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "sleep 300 & echo $! > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; wait", pidFile.path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOf: pidFile, encoding: .utf8),
                let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                return (process, pid)
            }
            usleep(10_000)
        }
        throw RabbitMQTestBedError("the script wrote no pid within 10 s")
    }

    /// Gone or a zombie (the grandchild's parent, the script, may be killed first).
    static func isGone(_ pid: pid_t) -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            if status.split(separator: ")").last?.split(separator: " ").first == "Z" { return true }
            usleep(10_000)
        }
        return false
    }

    static func sleeper() throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["300"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }
}
