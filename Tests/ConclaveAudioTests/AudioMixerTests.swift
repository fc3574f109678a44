import ConclaveAudio
import Foundation
import Testing

@Suite struct AudioMixerTests {
    private func sine(amplitude: Double, frequency: Double = 1_000, phase: Double = 0) -> [Int16] {
        (0..<960).map {
            Int16(clamping: Int((amplitude * sin(2 * .pi * frequency * Double($0) / 48_000 + phase)).rounded()))
        }
    }

    private func mix(_ inputs: [([Int16], Float)], blocks: Int = 1) -> (
        output: [Int16], gain: Float, levels: [AudioLevel]
    ) {
        var mixer = AudioMixer()
        var output = [Int16](repeating: 0, count: 960)
        var levels: [AudioLevel] = []
        for _ in 0..<blocks {
            mixer.begin()
            levels = inputs.map { samples, volume in samples.withUnsafeBufferPointer { mixer.add($0, volume: volume) } }
            output.withUnsafeMutableBufferPointer { mixer.finish(into: $0) }
        }
        return (output, mixer.limiterGain, levels)
    }

    /// Two full-scale signals in phase sum to twice full scale: the limiter holds them at its
    /// ceiling instead of letting Int16 wrap around to the opposite sign.
    @Test func twoFullScaleSignalsStayWithinInt16WithoutWrapping() {
        let loud = sine(amplitude: 32_767)
        let (output, gain, _) = mix([(loud, 1), (loud, 1)], blocks: 3)
        #expect(gain < 0.6)
        let peak = output.map { abs(Int($0)) }.max() ?? 0
        #expect(peak <= 31_700)
        #expect(peak >= 29_000)
        for (mixed, input) in zip(output, loud) where abs(Int(input)) > 1_000 {
            #expect((mixed > 0) == (input > 0))
        }
    }

    /// Quiet speech is not touched by the limiter: the mix is the exact sum.
    @Test func signalsBelowTheCeilingAreSummedExactly() {
        let a = sine(amplitude: 4_000)
        let b = sine(amplitude: 3_000, frequency: 440)
        let (output, gain, _) = mix([(a, 1), (b, 1)])
        #expect(gain == 1)
        for index in 0..<960 { #expect(abs(Int(output[index]) - (Int(a[index]) + Int(b[index]))) <= 1) }
    }

    @Test(arguments: [(Float(0.5), 0.5), (0, 0), (2, 2), (7, 2), (-1, 0), (.nan, 0)])
    func volumeScalesAParticipantWithinZeroToTwo(volume: Float, expected: Double) {
        let input = sine(amplitude: 5_000)
        let (output, _, levels) = mix([(input, volume)])
        for index in 0..<960 {
            #expect(abs(Double(output[index]) - Double(input[index]) * expected) <= 1.5)
        }
        // The level is the person's, before their volume.
        #expect(abs(Double(levels[0].peak) - 5_000 / 32_768) < 0.001)
    }

    @Test func levelsAreRMSAndPeakOfTheBlock() {
        let (_, _, levels) = mix([(sine(amplitude: 16_384), 1), ([Int16](repeating: 0, count: 960), 1)])
        #expect(abs(Double(levels[0].rms) - 0.5 / 2.0.squareRoot()) < 0.002)
        #expect(abs(Double(levels[0].peak) - 0.5) < 0.001)
        #expect(levels[1] == .silence)
    }
}
