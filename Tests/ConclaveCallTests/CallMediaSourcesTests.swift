import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclaveOpus
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

    /// The call's wrapper keeps a microphone's pacing by its device (the call sends it unpaced),
    /// and a generated tone's pacing on the wall clock.
    @Test func rebasingKeepsWhoPacesTheSource() throws {
        let microphone = RebasingFrameSource(
            EncodingAudioSource(raw: DevicePacedSilence(), encoder: try OpusAudioEncoder())
        )
        #expect(microphone.pacedByDevice)
        #expect(MediaPacer(sending: microphone).mode == .unpaced)
        let tone = try #require(try CallMediaSources.audio(.generated))
        #expect(!tone.pacedByDevice)
        #expect(MediaPacer(sending: tone).mode == .realTime)
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

/// Silence from a "device" that paces itself, as a microphone does.
private final class DevicePacedSilence: AudioFrameSource {
    let timeline = FrameTimeline.audio()
    var channels: Int { 1 }
    var pacedByDevice: Bool { true }
    func nextFrame() throws -> AudioFrame? {
        try AudioFrame(channels: 1, samples: [Int16](repeating: 0, count: 960), rtpTimestamp: 0)
    }
}
