import ConclaveTestSupport
import Foundation
import Testing

/// `--composite`'s checks, made before anything touches the network or the disk.
@Suite struct CompositeOptionTests {
    @Test("join --composite needs --record; record --composite takes .mkv or .mp4 only")
    func compositeOptionIsChecked() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-composite-option")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        let join = try runProcess(
            try TestPaths.conclave(),
            ["join", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "1", "--composite", "call.mkv"],
            environment: home
        )
        #expect(!join.succeeded)
        #expect(join.errorOutput.contains("--composite needs --record"), "\(join.errorOutput)")
        let output = directory.appendingPathComponent("rec")
        let record = try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "1", "--crypto", "none",
                "--out", output.path, "--composite", "call.avi",
            ],
            environment: home
        )
        #expect(!record.succeeded)
        #expect(record.errorOutput.contains("--composite must end in .mkv or .mp4"), "\(record.errorOutput)")
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }

    @Test("record --composite refuses an existing file and leaves it as it was")
    func anExistingCompositeIsNotOverwritten() throws {
        let directory = try TestPaths.temporaryDirectory("conclave-composite-exists")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = ["CONCLAVE_HOME": directory.appendingPathComponent("home").path]
        let existing = directory.appendingPathComponent("earlier.mkv")
        try Data("an earlier composite".utf8).write(to: existing)
        let output = directory.appendingPathComponent("rec")
        let record = try runProcess(
            try TestPaths.conclave(),
            [
                "record", "--janus", "ws://127.0.0.1:9", "--room", "1", "--call-id", "1", "--crypto", "none",
                "--out", output.path, "--composite", existing.path,
            ],
            environment: home
        )
        #expect(!record.succeeded)
        #expect(record.errorOutput.contains("already exists"), "\(record.errorOutput)")
        #expect(try Data(contentsOf: existing) == Data("an earlier composite".utf8))
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }
}
