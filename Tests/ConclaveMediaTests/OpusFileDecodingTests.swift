import ConclaveAV
import ConclaveTestSupport
import Foundation
import Testing

/// Opus in files decodes with libopus, the reference decoder.
struct OpusFileDecodingTests {
    @Test("a recorded microphone's beeps decode as beeps, without the burst FFmpeg's own Opus decoder adds after some")
    func toneEndingsDecodeCleanly() throws {
        // Bob's recording of Alice's microphone playing 100 ms beeps every 500 ms (from a run of
        // MicrophoneCallTests). FFmpeg's native decoder adds a 5 ms burst after 7 of its 11 beeps,
        // 105 ms after their onsets.
        let path = TestPaths.packageRoot.appendingPathComponent("Tests/Vectors/opus-tone-endings.webm").path
        let demuxer = try MediaDemuxer(path: path)
        let audio = try #require(demuxer.firstStream(of: .audio))
        let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: audio)
        var outputs: [MediaStreamDecoder.Output] = []
        while let packet = try demuxer.readPacket() {
            guard packet.streamIndex == audio.index else { continue }
            outputs += try decoder.decode(packet)
        }
        outputs += try decoder.decode(nil)
        var mono: [Int16] = []
        for case .audio(let samples, let channels, let rate) in outputs {
            #expect(rate == 48_000)
            mono += stride(from: 0, to: samples.count, by: max(1, channels)).map { samples[$0] }
        }
        let onsets = Beeps.onsets(in: mono)
        let spacings = zip(onsets, onsets.dropFirst()).map { $1 - $0 }
        #expect(onsets.count == 11, "onsets at \(onsets)")
        #expect(spacings.allSatisfy { abs($0 - 24_000) <= 960 }, "spacings \(spacings)")
    }
}
