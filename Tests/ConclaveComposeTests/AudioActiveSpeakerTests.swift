import ConclaveCompose
import Foundation
import Testing

@Suite struct AudioActiveSpeakerTests {
    @Test func theFloorFollowsWhoeverSpeaksAloneAndIsEmptyInSilence() throws {
        var recording = try AudioTestRecording(duration: 16)
        defer { recording.remove() }
        try recording.add(
            "alice",
            [.init(file: "a.webm", startOffset: 0, length: 16, beeps: [], talk: [1..<5, 11..<13])]
        )
        try recording.add(
            "bob",
            [.init(file: "b.webm", startOffset: 2, length: 14, beeps: [], tone: 700, talk: [4..<7])]
        )
        try recording.add("carol", [.init(file: "c.webm", startOffset: 0, length: 16, beeps: [], tone: 500)])
        let speakers = try ActiveSpeakerTimeline(timeline: try recording.timeline())
        #expect(speakers.speaker(at: 0.5) == nil)
        #expect(speakers.speaker(at: 3) == "alice")
        // Bob (2 + 4 s) talks alone from 6 s to 9 s.
        #expect(speakers.speaker(at: 7.5) == "bob")
        #expect(speakers.speaker(at: 8.9) == "bob")
        #expect(speakers.speaker(at: 10.5) == nil)
        #expect(speakers.speaker(at: 12.5) == "alice")
        #expect(speakers.speaker(at: 15.5) == nil)
        #expect(speakers.speaker(at: -1) == nil)
        #expect(speakers.speaker(at: .nan) == nil)
    }

    @Test func aBriefLouderInterjectionDoesNotTakeTheFloor() throws {
        var recording = try AudioTestRecording(duration: 10)
        defer { recording.remove() }
        try recording.add(
            "alice",
            [.init(file: "a.webm", startOffset: 0, length: 10, beeps: [], amplitude: 0.05, talk: [0.5..<9.5])]
        )
        // Bob is far louder, but only for 300 ms.
        try recording.add(
            "bob",
            [.init(file: "b.webm", startOffset: 0, length: 10, beeps: [], amplitude: 0.8, tone: 700, talk: [5..<5.3])]
        )
        let speakers = try ActiveSpeakerTimeline(timeline: try recording.timeline())
        for time in stride(from: 2.0, through: 9.0, by: 0.25) {
            #expect(speakers.speaker(at: time) == "alice", "at \(time)")
        }
    }
}
