import ConclaveCompose
import Foundation
import RecordingTestBed
import Testing

/// Stems of a recording made through `CallRecorder` by `RecordingTestBed`.
@Suite struct StemsFixtureTests {
    @Test func everyStemHasTheCallsDurationItsOwnFilesBeepsAndSilenceWhereMuted() throws {
        let (call, timeline) = try AudioFixture.standard.get()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stems-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var problems: [String] = []
        let paths = try AudioExport.writeStems(timeline, to: directory, progress: { _, _ in }) { problems.append($0) }
        #expect(problems.isEmpty)
        #expect(paths.map { ($0 as NSString).lastPathComponent } == timeline.participants.map { $0.key + ".wav" })
        #expect(Set(timeline.participants.map(\.key)) == ["u1", "u2", "u3", "u4"])
        let callFrames = Int((timeline.duration * 48_000).rounded())
        for (participant, path) in zip(timeline.participants, paths) {
            let stem = try decodeFile(path)
            #expect(stem.channels == 1)
            // The call's duration, to within one 20 ms audio frame.
            #expect(abs(stem.samples.count - callFrames) <= 960, "\(path): \(stem.samples.count) samples")
            // The participant's own files, each placed at its offset.
            var own = [Float](repeating: 0, count: stem.samples.count)
            for segment in participant.segments {
                let file = try decodeFile(segment.path)
                let start = Int((segment.startOffset * 48_000).rounded())
                for index in 0..<(file.samples.count / file.channels) where start + index < own.count {
                    own[start + index] = file.samples[index * file.channels]
                }
            }
            let stemBeeps = beepTimes(stem.samples, channels: 1, seconds: call.seconds, window: 24)
            let ownBeeps = beepTimes(own, channels: 1, seconds: call.seconds, window: 24)
            #expect(stemBeeps.map { $0 != nil } == ownBeeps.map { $0 != nil }, "\(participant.key)")
            for (stemBeep, ownBeep) in zip(stemBeeps, ownBeeps) {
                guard let stemBeep, let ownBeep else { continue }
                #expect(abs(stemBeep - ownBeep) <= 0.001, "\(participant.key): \(stemBeep) and \(ownBeep)")
            }
        }
        // u2 joins at 5 s and u3 leaves at 15 s: silence outside; u4 is muted from 5 s to 15 s.
        let bob = try decodeFile(directory + "/u2.wav").samples
        let cem = try decodeFile(directory + "/u3.wav").samples
        let dia = try decodeFile(directory + "/u4.wav").samples
        #expect(bob[0..<(48_000 * 49 / 10)].allSatisfy { abs($0) < 0.001 })
        #expect(cem[(48_000 * 151 / 10)...].allSatisfy { abs($0) < 0.001 })
        #expect(dia[(48_000 * 51 / 10)..<(48_000 * 149 / 10)].allSatisfy { abs($0) < 0.001 })
        #expect(dia[(48_000 * 2)..<(48_000 * 3)].contains { abs($0) > 0.05 })
    }
}
