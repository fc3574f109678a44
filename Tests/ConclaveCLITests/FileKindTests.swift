import ConclaveTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A FIFO or a folder where a file is expected (device.json, --invitation, --config) is refused
/// at once in one line, instead of hanging on the FIFO or printing a framework error.
@Suite struct FileKindTests {
    /// Runs `conclave`, failing the test if it takes more than a few seconds.
    func runQuickly(_ arguments: [String]) throws -> ProcessResult {
        let binary = TestPaths.productsDirectory.appendingPathComponent("conclave").path
        let start = ContinuousClock.now
        let result = try runProcess(binary, arguments, timeout: .seconds(10))
        #expect(ContinuousClock.now - start < .seconds(5), "took \(ContinuousClock.now - start)")
        #expect(!result.terminatedBySignal, "killed after hanging")
        return result
    }

    func expectRefused(_ result: ProcessResult, path: String, kind: SpecialFile) {
        #expect(result.status != 0)
        #expect(
            result.errorOutput.contains("refusing \(path): it is a \(kind.word), not a regular file"),
            "\(result.errorOutput)"
        )
        #expect(!result.errorOutput.contains("NSCocoaErrorDomain"))
        #expect(!result.errorOutput.contains("permission"))
        #expect(result.errorOutput.split(separator: "\n").count == 1, "\(result.errorOutput)")
    }

    @Test(arguments: SpecialFile.allCases)
    func deviceKeyFile(kind: SpecialFile) throws {
        let directory = try TestPaths.temporaryDirectory("conclave-kind")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys")
        try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: true)
        chmod(keys.path, 0o700)
        let device = keys.appendingPathComponent("device.json").path
        try kind.make(device)
        expectRefused(try runQuickly(["keys", "show", "--data-dir", directory.path]), path: device, kind: kind)
    }

    @Test(arguments: SpecialFile.allCases)
    func invitation(kind: SpecialFile) throws {
        let directory = try TestPaths.temporaryDirectory("conclave-kind")
        defer { try? FileManager.default.removeItem(at: directory) }
        let invitation = directory.appendingPathComponent("invitation.json").path
        try kind.make(invitation)
        let result = try runQuickly([
            "join", "--invitation", invitation, "--data-dir", directory.path, "--janus", "ws://127.0.0.1:9",
        ])
        expectRefused(result, path: invitation, kind: kind)
    }

    @Test(arguments: SpecialFile.allCases)
    func configuration(kind: SpecialFile) throws {
        let directory = try TestPaths.temporaryDirectory("conclave-kind")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("conclave.json").path
        try kind.make(config)
        let joined = try runQuickly([
            "join", "--config", config, "--room", "1", "--call-id", "1", "--crypto", "none", "--janus",
            "ws://127.0.0.1:9",
        ])
        expectRefused(joined, path: config, kind: kind)
        let checked = try runQuickly(["config", "check", config])
        expectRefused(checked, path: config, kind: kind)
    }
}
