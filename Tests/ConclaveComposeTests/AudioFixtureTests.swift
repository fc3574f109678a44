import ConclaveCompose
import Foundation
import RecordingTestBed
import Testing

/// The audio of a recording made through `CallRecorder` by `RecordingTestBed`.
@Suite struct AudioFixtureTests {
    @Test func theMixBeepsOnEveryParticipantsBeepWithin40Milliseconds() throws {
        let (call, timeline) = try AudioFixture.standard.get()
        #expect(abs(timeline.duration - Double(call.seconds)) < 0.1)
        let mixdown = try AudioMixdown(timeline: timeline)
        let mix = try readAll(mixdown, block: 48_000)
        #expect(mixdown.problems.isEmpty)
        #expect(abs(mix.count / 2 - Int(timeline.duration * 48_000)) <= 1)
        let windows = levels(mix, channels: 2)
        for second in 1..<call.seconds {
            let found = beepTimes(mix, channels: 2, seconds: call.seconds)[second]
            #expect(
                found.map { abs($0 - Double(second)) <= 0.04 } == true,
                "beep of second \(second) at \(String(describing: found))"
            )
            // Every participant's beep falls there too: between the beeps only the tones remain,
            // so a participant off by more than 40 ms would show as a second loud run.
            let beepLevel = windows[(second * 400)..<(second * 400 + 36)].max() ?? 0
            let between = windows[(second * 400 + 56)..<(second * 400 + 384)].max() ?? 0
            #expect(between < beepLevel / 2, "second \(second): \(between) between beeps, \(beepLevel) in the beep")
        }
    }

    @Test func theLateJoinerAndTheLeaverAreSilentWhereTheyAreAbsent() throws {
        let (_, timeline) = try AudioFixture.standard.get()
        let bob = try #require(timeline.participants.first { $0.key == "u2" })
        let cem = try #require(timeline.participants.first { $0.key == "u3" })
        #expect(abs((bob.segments.first?.startOffset ?? 0) - 5) < 0.1)
        #expect(abs((cem.segments.last?.endOffset ?? 0) - 15) < 0.1)
    }

    @Test func theActiveSpeakerFollowsWhoeverSpeaksAlone() throws {
        let (_, timeline) = try AudioFixture.turns.get()
        let speakers = try ActiveSpeakerTimeline(timeline: timeline)
        for time in stride(from: 0.5, to: 6, by: 0.5) { #expect(speakers.speaker(at: time) == "u1", "at \(time)") }
        for time in stride(from: 7.5, to: 12, by: 0.5) { #expect(speakers.speaker(at: time) == "u2", "at \(time)") }
        for time in stride(from: 13.5, to: 16, by: 0.5) { #expect(speakers.speaker(at: time) == "u3", "at \(time)") }
        #expect(speakers.speaker(at: 17) == nil)
    }

    @Test(arguments: ["call.opus", "call.flac", "call.wav"])
    func theMixFileOfTheCallOpensWithTheCallsDuration(name: String) throws {
        let (call, timeline) = try AudioFixture.standard.get()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mix-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/" + name
        let problems = try AudioExport.writeMix(timeline, to: path, options: .init()) { _, _ in }
        #expect(problems.isEmpty)
        let decoded = try decodeFile(path)
        let seconds = Double(decoded.samples.count / decoded.channels) / 48_000
        #expect(abs(seconds - timeline.duration) <= 0.02, "\(seconds) s, the call \(timeline.duration) s")
        let beeps = beepTimes(decoded.samples, channels: decoded.channels, seconds: call.seconds)
        for second in 1..<call.seconds {
            #expect(beeps[second].map { abs($0 - Double(second)) <= 0.04 } == true, "\(name): second \(second)")
        }
    }
}
