import Foundation

/// The test signal: 100 ms beeps of 1 kHz every 500 ms, 48 kHz mono s16.
public enum Beeps {
    public static let sampleRate = 48_000
    public static let period = 24_000
    public static let length = 4_800
    public static let amplitude = 8_000.0

    /// Sample `index` of the beep track (index 0 starts a beep).
    public static func sample(_ index: Int) -> Int16 {
        let position = index % period
        guard position < length else { return 0 }
        return Int16(amplitude * sin(2 * Double.pi * 1_000 * Double(position) / Double(sampleRate)))
    }

    /// `seconds` of the track, after `lead` samples of silence, as raw s16le bytes.
    public static func track(seconds: Int, lead: Int = 0) -> Data {
        var samples = [Int16](repeating: 0, count: lead)
        samples += (0..<(seconds * sampleRate)).map(sample)
        return samples.withUnsafeBufferPointer { Data(buffer: $0) }
    }

    /// Where beeps start in `samples`: the first 5 ms window of a run of loud windows, in samples.
    public static func onsets(in samples: [Int16]) -> [Int] {
        let window = 240
        var onsets: [Int] = []
        var loud = false
        var start = 0
        while start + window <= samples.count {
            var energy = 0.0
            for sample in samples[start..<(start + window)] { energy += Double(sample) * Double(sample) }
            let rms = (energy / Double(window)).squareRoot()
            if rms > 1_000, !loud { onsets.append(start) }
            loud = rms > 1_000
            start += window
        }
        return onsets
    }

    /// The longest run of near-silence (in samples) between the first and the last onset, where a
    /// glitch (a gap in the audio) would show as a silence longer than the gap between beeps.
    public static func longestSilence(in samples: [Int16], from first: Int, to last: Int) -> Int {
        var longest = 0
        var run = 0
        for sample in samples[first..<last] {
            if abs(Int(sample)) < 50 {
                run += 1
                longest = max(longest, run)
            } else {
                run = 0
            }
        }
        return longest
    }

    /// Reads a raw s16le file.
    public static func read(_ url: URL) throws -> [Int16] {
        let data = try Data(contentsOf: url)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }
}
