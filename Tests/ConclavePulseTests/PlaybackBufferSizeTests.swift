import ConclavePulse
import Testing

/// The speaker's buffer policy, on instants the test makes.
@Suite struct PlaybackBufferSizeTests {
    let start = ContinuousClock.now

    @Test func anUnderrunGrowsTheBufferByAStepUpToTheCeiling() {
        var size = PlaybackBufferSize(floor: .milliseconds(40), ceiling: .milliseconds(80))
        #expect(size.current == .milliseconds(40))
        #expect(size.underrun(at: start) == .milliseconds(60))
        #expect(size.underrun(at: start + .seconds(10)) == .milliseconds(80))
        #expect(size.underrun(at: start + .seconds(20)) == nil, "already at the ceiling")
        #expect(size.current == .milliseconds(80))
        #expect(size.growths == 2)
    }

    @Test func underrunsWhileAGrowthSettlesAreTheSameStall() {
        var size = PlaybackBufferSize(floor: .milliseconds(40), ceiling: .milliseconds(100))
        #expect(size.underrun(at: start) == .milliseconds(60))
        #expect(size.underrun(at: start + .milliseconds(30)) == nil)
        #expect(size.underrun(at: start + .milliseconds(1_990)) == nil)
        #expect(size.underrun(at: start + PlaybackBufferSize.settling) == .milliseconds(80))
        #expect(size.growths == 2)
    }

    @Test func aCalmPeriodTakesBackAStepDownToTheFloor() {
        var size = PlaybackBufferSize(floor: .milliseconds(40), ceiling: .milliseconds(80))
        #expect(size.elapsed(to: start + .seconds(600)) == nil, "at the floor nothing shrinks")
        _ = size.underrun(at: start)
        #expect(size.elapsed(to: start + .seconds(60)) == nil)
        // An underrun that did not grow the buffer still restarts the calm.
        #expect(size.underrun(at: start + .seconds(61)) == .milliseconds(80))
        #expect(size.elapsed(to: start + .seconds(61) + PlaybackBufferSize.calm - .milliseconds(1)) == nil)
        let calm = start + .seconds(61) + PlaybackBufferSize.calm
        #expect(size.elapsed(to: calm) == .milliseconds(70))
        #expect(size.elapsed(to: calm + .seconds(1)) == nil, "a calm period shrinks it once")
        #expect(size.elapsed(to: calm + PlaybackBufferSize.calm) == .milliseconds(60))
        #expect(size.elapsed(to: calm + PlaybackBufferSize.calm * 2) == .milliseconds(50))
        #expect(size.elapsed(to: calm + PlaybackBufferSize.calm * 3) == .milliseconds(40))
        #expect(size.elapsed(to: calm + PlaybackBufferSize.calm * 4) == nil)
        #expect(size.current == .milliseconds(40))
    }

    @Test func aCeilingBelowTheFloorNeverGrows() {
        var size = PlaybackBufferSize(floor: .milliseconds(40), ceiling: .milliseconds(20))
        #expect(size.ceiling == .milliseconds(40))
        #expect(size.underrun(at: start) == nil)
        #expect(size.growths == 0)
    }
}
