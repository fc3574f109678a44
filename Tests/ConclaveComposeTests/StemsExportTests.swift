import ConclaveAV
import Foundation
import Testing

@testable import ConclaveCompose

@Suite struct StemsExportTests {
    @Test func everyStemHasTheCallsDurationAndItsBeepsAtTheirCallTimes() throws {
        var recording = try AudioTestRecording(duration: 8)
        defer { recording.remove() }
        try recording.add("alice", [.init(file: "a.webm", startOffset: 0.5, length: 6, beeps: [0.5, 5.0])])
        try recording.add("../bob smith", [.init(file: "b.webm", startOffset: 3, length: 4, beeps: [1.0], tone: 700)])
        let timeline = try recording.timeline()
        let directory = recording.directory + "/stems/nested"
        var reported: [(Double, Double)] = []
        let paths = try AudioExport.writeStems(timeline, to: directory) { reported.append(($0, $1)) }
        #expect(paths.map { ($0 as NSString).lastPathComponent } == ["alice.wav", "_._bob_smith.wav"])
        #expect(reported.last.map { $0.0 == $0.1 && $0.1 == 8 } == true)
        var info = stat()
        #expect(stat(directory, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let expected = [[1.0, 5.5], [4.0]]
        for (path, beeps) in zip(paths, expected) {
            #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let decoded = try decodeFile(path)
            #expect(decoded.channels == 1)
            // WAV holds exactly what was written: the call's duration to the sample.
            #expect(decoded.samples.count == 8 * 48_000)
            AudioMixdownTests.expectOnsets(beepOnsets(decoded.samples, channels: 1), beeps)
        }
        // No temporary file is left beside the stems.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == [
                "_._bob_smith.wav", "alice.wav",
            ]
        )
    }

    @Test func aStemsBeepsAreWhereTheyAreInTheParticipantsOwnFile() throws {
        var recording = try AudioTestRecording(duration: 7)
        defer { recording.remove() }
        try recording.add(
            "alice",
            [.init(file: "a.webm", startOffset: 1.5, length: 5, beeps: [0.4, 1.7, 3.9], lost: 2.0..<2.5)]
        )
        let timeline = try recording.timeline()
        let own = try decodeFile(recording.directory + "/a.webm")
        let ownOnsets = beepOnsets(own.samples, channels: own.channels)
        #expect(ownOnsets.count == 3)
        let paths = try AudioExport.writeStems(timeline, to: recording.directory + "/stems") { _, _ in }
        let stem = try decodeFile(paths[0])
        AudioMixdownTests.expectOnsets(
            beepOnsets(stem.samples, channels: 1),
            ownOnsets.map { $0 + 1.5 },
            tolerance: 0.001
        )
    }

    @Test func stemNamesAreFileSafeAndUnique() {
        #expect(
            AudioExport.stemNames(for: ["alice", "Alice", "a/b", "a:b", ".hidden", "", "ü"])
                == ["alice.wav", "Alice-2.wav", "a_b.wav", "a_b-2.wav", "_hidden.wav", "participant.wav", "_.wav"]
        )
    }
}
