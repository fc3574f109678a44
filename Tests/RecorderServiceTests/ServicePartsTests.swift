import ConclaveRecorder
import ConclaveTestSupport
import Foundation
import Testing

@testable import ConclaveRecorderService

#if canImport(Glibc)
    import Glibc
#endif

/// The service's pure parts and file rules, without a broker or Janus.
@Suite("Recorder service parts")
struct ServicePartsTests {
    @Test func storageRootRefusesEveryWayOut() throws {
        let directory = try TestPaths.temporaryDirectory("recorder-storage")
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = try StorageRoot(preparing: directory.appendingPathComponent("root").path)
        var info = stat()
        #expect(stat(root.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let outside = directory.appendingPathComponent("outside").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root.path + "/team", withIntermediateDirectories: true)
        #expect(symlink(outside, root.path + "/team/escape") == 0)
        #expect(symlink("/etc/passwd", root.path + "/file-link") == 0)

        #expect(try root.resolve("team/call-1") == root.path + "/team/call-1")
        #expect(try root.resolve("new/deeper//call") == root.path + "/new/deeper/call")
        for bad in ["", "/tmp/x", "../x", "team/../../x", "./x", "team/escape/call", "team/escape", "file-link/x"] {
            #expect(throws: RecorderServiceError.self, "\(bad)") { try root.resolve(bad) }
        }
        let error = try #require(throws: RecorderServiceError.self) { try root.resolve("team/escape/call") }
        #expect(error.reason.contains("symlink"))
        // Only reads: nothing was created on the way.
        #expect(!FileManager.default.fileExists(atPath: root.path + "/new"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    func writeManifest(_ folder: String, status: String, start: String, first: Double, last: Double) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let json = """
            {"formatVersion":1,"callID":"1","recorderVersion":"t","cryptoFormat":"none","keyEpochs":[],
             "startTime":"\(start)","status":"\(status)","notRecorded":[],
             "participants":[{"key":"u","feedIDs":[1],"recorded":true,"framesUndecryptable":0,
               "segments":[{"index":1,"feedID":1,"startReason":"joined","file":"u.webm","journals":[],
                 "tracks":[{"kind":"audio","codec":"opus","firstTimestamp":\(first),"lastTimestamp":\(last),
                   "framesReceived":1,"framesWritten":1,"framesLost":0,"framesUndecryptable":0,
                   "framesDroppedBeforeKeyframe":0,"gaps":0,"gapSeconds":0}]}]}]}
            """
        try json.write(toFile: folder + "/manifest.json", atomically: true, encoding: .utf8)
    }

    @Test func attemptsContinueInNumberedFoldersOnlyForARedelivery() throws {
        let directory = try TestPaths.temporaryDirectory("recorder-attempts")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("call").path
        #expect(
            try AttemptPlan.plan(output: output, redelivered: true)
                == .init(directory: output, attempt: 1, previous: nil)
        )
        try writeManifest(output, status: "recording", start: "2026-01-01T10:00:00.000Z", first: 1, last: 20)
        // Not a redelivery: a second job for the same folder is refused, as `record` refuses it.
        #expect(throws: RecorderServiceError.self) { try AttemptPlan.plan(output: output, redelivered: false) }
        let second = try AttemptPlan.plan(output: output, redelivered: true)
        #expect(second == .init(directory: output + "/attempt-2", attempt: 2, previous: output))
        #expect(second.relativePrevious == "..")
        try writeManifest(second.directory, status: "recording", start: "2026-01-01T10:00:23.000Z", first: 0.5, last: 9)
        // attempt-3 was made but never written to: skipped, its number not reused.
        try FileManager.default.createDirectory(atPath: output + "/attempt-3", withIntermediateDirectories: true)
        let fourth = try AttemptPlan.plan(output: output, redelivered: true)
        #expect(fourth == .init(directory: output + "/attempt-4", attempt: 4, previous: output + "/attempt-2"))
        #expect(fourth.relativePrevious == "../attempt-2")

        // The outage: from attempt 1's last frame (10:00:20) to attempt 2's first (10:00:23.5).
        let first = try RecordingManifest.read(from: output)
        let next = try RecordingManifest.read(from: second.directory)
        let continuation = try #require(Outage.continuation(plan: second, previous: first, current: next))
        #expect(continuation.attempt == 2 && continuation.previous == "..")
        #expect(continuation.outageStart == "2026-01-01T10:00:20.000Z")
        #expect(continuation.outageEnd == "2026-01-01T10:00:23.500Z")
        #expect(abs((continuation.outageSeconds ?? 0) - 3.5) < 0.001)
        #expect(
            Outage.continuation(
                plan: .init(directory: output, attempt: 1, previous: nil),
                previous: nil,
                current: first
            ) == nil
        )
    }

    @Test func cpuWindowAveragesTheLastSeconds() {
        var window = CPUWindow(span: 5)
        #expect(window.cores == 0)
        window.add(.init(wall: 0, cpu: 0))
        window.add(.init(wall: 1, cpu: 0.5))
        #expect(abs(window.cores - 0.5) < 1e-9)
        // Two cores' worth from 1 s to 11 s: the window forgets the idle start.
        for second in 2...11 { window.add(.init(wall: Double(second), cpu: 0.5 + 2 * Double(second - 1))) }
        #expect(abs(window.cores - 2) < 1e-9)
        // A reading back in time is ignored.
        window.add(.init(wall: 3, cpu: 100))
        #expect(abs(window.cores - 2) < 1e-9)
        #expect(CPUWindow.processCPUSeconds() > 0)
    }

    @Test func admissionNeedsASlotTheBudgetAndNoDrain() {
        let admission = Admission(maxCalls: 2, cpuBudget: 1.5)
        #expect(admission.admits(active: 0, cores: 0, draining: false))
        #expect(admission.admits(active: 1, cores: 1.4, draining: false))
        #expect(!admission.admits(active: 2, cores: 0, draining: false))
        #expect(!admission.admits(active: 0, cores: 1.5, draining: false))
        #expect(!admission.admits(active: 0, cores: 0, draining: true))
    }
}
