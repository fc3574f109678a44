import ConclaveCall
import JanusProtocol
import Testing

/// The `auto` layer choice as a state machine over synthetic receive samples.
@Suite struct LayerAdaptationTests {
    static let clean = LayerAdaptation.Sample(received: 100, lost: 0)
    static let lossy = LayerAdaptation.Sample(received: 90, lost: 10)

    /// Feeds `samples`, returning the target after each.
    func run(_ adaptation: inout LayerAdaptation, _ samples: [LayerAdaptation.Sample]) -> [VideoRoom.Substream] {
        samples.map { sample in
            _ = adaptation.observe(sample)
            return adaptation.target
        }
    }

    @Test func sustainedLossStepsDownOneLayerAtATime() {
        var adaptation = LayerAdaptation()
        #expect(adaptation.target == .high)
        #expect(adaptation.observe(Self.lossy) == nil, "one lossy second is not enough")
        #expect(adaptation.observe(Self.lossy) == .medium)
        #expect(adaptation.observe(Self.lossy) == nil)
        #expect(adaptation.observe(Self.lossy) == .low)
        #expect(run(&adaptation, Array(repeating: Self.lossy, count: 4)) == Array(repeating: .low, count: 4))
    }

    @Test func heavyLossStepsDownAtTheFirstSample() {
        // A rate limit well below the layer's rate drops a third of its packets or more.
        var adaptation = LayerAdaptation()
        let capped = LayerAdaptation.Sample(received: 60, lost: 40)
        #expect(adaptation.observe(capped) == .medium)
        #expect(adaptation.observe(capped) == .low)
        #expect(adaptation.observe(capped) == nil, "nothing below the lowest")
        // Just under the heavy mark still waits for a second sample.
        var moderate = LayerAdaptation()
        #expect(moderate.observe(LayerAdaptation.Sample(received: 81, lost: 19)) == nil)
        #expect(moderate.observe(LayerAdaptation.Sample(received: 81, lost: 19)) == .medium)
    }

    @Test func isolatedLossDoesNotMove() {
        var adaptation = LayerAdaptation()
        let samples = (0..<20).map { $0 % 2 == 0 ? Self.lossy : Self.clean }
        #expect(run(&adaptation, samples).allSatisfy { $0 == .high })
    }

    @Test func probesUpAfterAQuietPeriodAndBacksOffWhenTheProbeFails() {
        var adaptation = LayerAdaptation(initial: .medium)
        // Six quiet seconds: a probe to high.
        #expect(run(&adaptation, Array(repeating: Self.clean, count: 5)).allSatisfy { $0 == .medium })
        #expect(adaptation.observe(Self.clean) == .high)
        // Loss during the probe: straight back down, at the first lossy sample.
        #expect(adaptation.observe(Self.lossy) == .medium)
        // The next probe waits twice as long.
        #expect(run(&adaptation, Array(repeating: Self.clean, count: 11)).allSatisfy { $0 == .medium })
        #expect(adaptation.observe(Self.clean) == .high)
        #expect(adaptation.observe(Self.lossy) == .medium)
        // And then four times, never more than the maximum.
        #expect(run(&adaptation, Array(repeating: Self.clean, count: 23)).allSatisfy { $0 == .medium })
        #expect(adaptation.observe(Self.clean) == .high)
        #expect(adaptation.observe(Self.lossy) == .medium)
        #expect(run(&adaptation, Array(repeating: Self.clean, count: 23)).allSatisfy { $0 == .medium })
        #expect(adaptation.observe(Self.clean) == .high, "capped at 24 samples")
        // A probe that holds stays, and the quiet time starts over for the next one.
        #expect(run(&adaptation, Array(repeating: Self.clean, count: 10)).allSatisfy { $0 == .high })
    }

    @Test func aProbeThatHoldsResetsTheWait() {
        var adaptation = LayerAdaptation(initial: .low)
        let targets = run(&adaptation, Array(repeating: Self.clean, count: 12))
        #expect(targets[5] == .medium && targets[11] == .high, "\(targets)")
    }

    @Test func silenceSaysNothing() {
        var adaptation = LayerAdaptation(initial: .low)
        let silent = LayerAdaptation.Sample(received: 0, lost: 0)
        #expect(run(&adaptation, Array(repeating: silent, count: 30)).allSatisfy { $0 == .low })
        #expect(LayerAdaptation.Sample(received: 0, lost: 0).lossFraction == 0)
        #expect(LayerAdaptation.Sample(received: 3, lost: -2).lossFraction == 0, "negative loss (duplicates) is none")
    }

    @Test func theCeilingIsTheLowestLayerAsTallAsTheTile() {
        // Layers of 480, 240 and 120 lines; a picture drawn down to 90 % of its height is sharp enough.
        let cases: [(drawn: Int, expected: VideoRoom.Substream)] = [
            (480, .high), (300, .high), (260, .medium), (240, .medium), (140, .medium), (130, .low), (60, .low),
        ]
        for (drawn, expected) in cases {
            #expect(LayerAdaptation.ceiling(drawnHeight: drawn, highestHeight: 480) == expected, "drawn \(drawn)")
        }
        #expect(LayerAdaptation.ceiling(drawnHeight: 100, highestHeight: nil) == .high, "unknown: no cap")
        #expect(LayerAdaptation.ceiling(drawnHeight: 0, highestHeight: 480) == .high)
        #expect(LayerAdaptation.highestHeight(pictureHeight: 120, received: .low) == 480)
        #expect(LayerAdaptation.highestHeight(pictureHeight: 240, received: .medium) == 480)
        #expect(LayerAdaptation.highestHeight(pictureHeight: 480, received: .high) == 480)
        #expect(LayerAdaptation.highestHeight(pictureHeight: Int.max, received: .low) == nil, "no overflow")
        #expect(LayerAdaptation.highestHeight(pictureHeight: -1, received: .low) == nil)
    }

    @Test func aSmallTileCapsTheLayerAtOnceAndAGrownOneProbesUp() {
        var adaptation = LayerAdaptation()
        #expect(adaptation.observe(Self.clean, ceiling: .low) == .low, "straight down to the tile's layer")
        for _ in 0..<30 { #expect(adaptation.observe(Self.clean, ceiling: .low) == nil, "no probe above the tile") }
        // The window made fullscreen: a probe at once, held, then the next after the quiet time.
        #expect(adaptation.observe(Self.clean, ceiling: .high) == .medium)
        var targets: [VideoRoom.Substream] = []
        for _ in 0..<12 {
            _ = adaptation.observe(Self.clean, ceiling: .high)
            targets.append(adaptation.target)
        }
        #expect(targets.prefix(5).allSatisfy { $0 == .medium } && targets.last == .high, "\(targets)")
        // A tile growing on a lossy path does not probe.
        var lossyPath = LayerAdaptation(initial: .low)
        _ = lossyPath.observe(Self.clean, ceiling: .low)
        #expect(lossyPath.observe(Self.lossy, ceiling: .high) == nil)
        #expect(lossyPath.target == .low)
    }

    @Test func theHighestHeightIsLearntOnlyFromTwoSamplesThatAgree() {
        var heights = HighestHeights()
        #expect(heights.note(feed: 1, pictureHeight: 120, received: .low) == nil)
        #expect(heights.note(feed: 1, pictureHeight: 120, received: .low) == 480)
        // Janus reported the switch to high before the window showed a high picture.
        #expect(heights.note(feed: 1, pictureHeight: 120, received: .high) == 480)
        #expect(heights.note(feed: 1, pictureHeight: 480, received: .high) == 480)
        #expect(heights.note(feed: 2, pictureHeight: 240, received: .medium) == nil, "per feed")
        // A feed that left is forgotten; one still subscribed is kept.
        heights.keep(only: [2])
        #expect(heights.note(feed: 1, pictureHeight: 480, received: .high) == nil)
        #expect(heights.note(feed: 2, pictureHeight: 240, received: .medium) == 480)
    }

    @Test func randomSamplesKeepTheTargetInRangeAndMoveOneStepAtATime() {
        var random = SystemRandomNumberGenerator()
        var adaptation = LayerAdaptation()
        var previous = adaptation.target
        for _ in 0..<10_000 {
            let sample = LayerAdaptation.Sample(
                received: Int.random(in: -5...200, using: &random),
                lost: Int.random(in: -5...50, using: &random)
            )
            let change = adaptation.observe(sample)
            #expect(abs(adaptation.target.rawValue - previous.rawValue) <= 1)
            #expect(change == nil || change == adaptation.target)
            previous = adaptation.target
        }
    }
}
