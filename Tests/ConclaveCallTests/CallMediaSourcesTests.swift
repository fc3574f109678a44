import ConclaveCall
import ConclaveCore
import ConclaveMedia
import Testing

@Suite struct CallMediaSourcesTests {
    @Test func rebasingRestartsMediaTimeButNotTheTimeline() throws {
        let source = try #require(try CallMediaSources.audio(.generated))
        var first: [TimedFrameSummary] = []
        for _ in 0..<5 { first.append(TimedFrameSummary(try #require(try source.nextFrame()))) }
        #expect(first.first?.mediaTime == .zero)
        #expect(first.last?.mediaTime == .milliseconds(80), "20 ms Opus frames")

        source.rebase()
        let next = TimedFrameSummary(try #require(try source.nextFrame()))
        #expect(next.mediaTime == .zero, "a new pacer starts from zero after a recovery")
        #expect(next.rtpTimestamp == first[4].rtpTimestamp &+ 960, "RTP timestamps continue: one stream for receivers")
    }

    @Test func choicesParseAsTheCommandLineWritesThem() {
        #expect(CallMediaChoice("pattern", generatedName: "pattern") == .generated)
        #expect(CallMediaChoice("none", generatedName: "tone") == CallMediaChoice.none)
        #expect(CallMediaChoice("talk.webm", generatedName: "tone") == .file("talk.webm"))
        #expect(throws: (any Error).self) { try CallMediaSources.video(.file("/nonexistent.webm"), settings: .init()) }
    }

    struct TimedFrameSummary {
        var mediaTime: Duration
        var rtpTimestamp: UInt32
        init(_ timed: TimedFrame) {
            mediaTime = timed.mediaTime
            rtpTimestamp = timed.frame.rtpTimestamp
        }
    }
}
