import ConclaveAudio
import Testing

/// The window's active speaker: who takes the floor, when, and when it is cleared.
struct ActiveSpeakerDetectorTests {
    /// Runs `checks` checks of `levels`; the changes reported.
    private func run(_ detector: inout ActiveSpeakerDetector, _ levels: [UInt64: Float], checks: Int)
        -> [ActiveSpeakerDetector.Change]
    {
        var changes: [ActiveSpeakerDetector.Change] = []
        for _ in 0..<checks {
            if let change = detector.decide(levels) { changes.append(change) }
        }
        return changes
    }

    @Test("a check falls due every 100 ms of played audio, whatever the chunk size")
    func checksFollowTheAudioClock() {
        var detector = ActiveSpeakerDetector()
        var due = 0
        for _ in 0..<100 where detector.advance(samples: 441) { due += 1 }
        #expect(due == 441 * 100 / ActiveSpeakerDetector.interval)
    }

    @Test("the loudest speaker takes the floor after three checks, not before")
    func takesTheFloorAfterThreeChecks() {
        var detector = ActiveSpeakerDetector()
        #expect(run(&detector, [1: 0.2, 2: 0.02], checks: 2).isEmpty)
        #expect(run(&detector, [1: 0.2, 2: 0.02], checks: 1) == [.init(speaker: 1)])
        #expect(detector.speaker == 1)
        #expect(run(&detector, [1: 0.2, 2: 0.02], checks: 10).isEmpty)
    }

    @Test("a short burst from someone else does not move the floor; a sustained one does")
    func hysteresis() {
        var detector = ActiveSpeakerDetector()
        _ = run(&detector, [1: 0.2], checks: 3)
        #expect(run(&detector, [1: 0.05, 2: 0.3], checks: 2).isEmpty)
        #expect(run(&detector, [1: 0.2, 2: 0.01], checks: 1).isEmpty)
        #expect(detector.speaker == 1)
        #expect(run(&detector, [1: 0.05, 2: 0.3], checks: 3) == [.init(speaker: 2)])
    }

    @Test("two seconds with nobody above the threshold clear the floor; quiet levels never take it")
    func silenceClears() {
        var detector = ActiveSpeakerDetector()
        #expect(run(&detector, [1: 0.005, 2: 0.001], checks: 50).isEmpty)
        _ = run(&detector, [1: 0.2], checks: 3)
        #expect(run(&detector, [1: 0.001], checks: 19).isEmpty)
        #expect(run(&detector, [1: 0.001], checks: 1) == [.init(speaker: nil)])
        #expect(detector.speaker == nil)
    }

    @Test("a speaker who leaves gives the floor up to the next one")
    func speakerLeaves() {
        var detector = ActiveSpeakerDetector()
        _ = run(&detector, [1: 0.2, 2: 0.05], checks: 3)
        #expect(run(&detector, [2: 0.05], checks: 3) == [.init(speaker: 2)])
    }
}
