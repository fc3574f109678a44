/// Who is speaking when, from audio levels with hysteresis.
///
/// Each participant's audio is decoded once and measured in 100 ms windows (mean square). Whether
/// a participant speaks is their mean over the last second above `threshold`, so the pauses
/// between words do not count as silence. The floor changes when the holder stops speaking, or
/// when another participant has been clearly louder (`margin`, 6 dB, on a 300 ms mean that
/// follows the voice closely) for a whole second: a layout built on it does not flicker between
/// people who talk at once, and a short interjection does not take it. Nobody speaking means nil.
public struct ActiveSpeakerTimeline: Sendable {
    /// Seconds per measured window.
    public static let window = 0.1
    /// Windows averaged into whether someone speaks (1 s), and into how loud they are (300 ms).
    static let presenceWindows = 10
    static let loudnessWindows = 3
    /// Windows another participant must stay clearly louder before taking the floor (1 s).
    static let holdWindows = 10
    /// Mean square of speech: -50 dBFS.
    static let threshold: Float = 1e-5
    /// "Clearly louder": four times the power (6 dB).
    static let margin: Float = 4

    /// Participant keys, indexed by the changes.
    public let keys: [String]
    /// Where the floor changes: the window it changes in and the participant (an index into
    /// `keys`) from there on, nil for nobody; in window order.
    private let changes: [(window: Int, speaker: Int?)]
    /// Windows measured: the timeline's duration.
    private let windows: Int

    public init(timeline: CompositionTimeline) throws(ComposeError) {
        let windowFrames = Int(Self.window * Double(AudioMixdown.sampleRate))
        // A week at most: a manifest claiming more is damaged, and the levels must fit in memory.
        let frames = min(AudioParticipantTrack.samples(timeline.duration), Int64(7 * 86_400 * AudioMixdown.sampleRate))
        let windows = Int((max(frames, 0) + Int64(windowFrames) - 1) / Int64(windowFrames))
        keys = timeline.participants.map(\.key)
        var presence: [[Float]] = []
        var loudness: [[Float]] = []
        var buffer = [Float](repeating: 0, count: windowFrames)
        for participant in timeline.participants {
            let track = AudioParticipantTrack(participant: participant)
            var powers = [Float](repeating: 0, count: windows)
            for window in 0..<windows {
                for index in buffer.indices { buffer[index] = 0 }
                buffer.withUnsafeMutableBufferPointer { output in
                    track.add(start: Int64(window * windowFrames), count: windowFrames, into: output, channels: 1)
                }
                var sum: Float = 0
                for value in buffer { sum += value * value }
                powers[window] = sum / Float(windowFrames)
            }
            presence.append(Self.smoothed(powers, over: Self.presenceWindows))
            loudness.append(Self.smoothed(powers, over: Self.loudnessWindows))
        }
        self.windows = windows
        changes = Self.floor(presence: presence, loudness: loudness, windows: windows)
    }

    /// The participant key of the active speaker at `time` (seconds on the call timeline), nil
    /// when nobody speaks (and outside the call).
    public func speaker(at time: Double) -> String? {
        guard time.isFinite, time >= 0 else { return nil }
        let window = Int(min(time / Self.window, Double(Int32.max)))
        guard window < windows else { return nil }
        var low = 0
        var high = changes.count
        while low < high {
            let middle = (low + high) / 2
            if changes[middle].window <= window { low = middle + 1 } else { high = middle }
        }
        guard low > 0, let speaker = changes[low - 1].speaker else { return nil }
        return keys[speaker]
    }

    /// The mean of each window and the ones before it, over `smoothing` windows.
    static func smoothed(_ powers: [Float], over smoothing: Int) -> [Float] {
        var result = [Float](repeating: 0, count: powers.count)
        var sum: Float = 0
        for index in powers.indices {
            sum += powers[index]
            if index >= smoothing { sum -= powers[index - smoothing] }
            result[index] = max(0, sum) / Float(min(index + 1, smoothing))
        }
        return result
    }

    /// The floor's holder in each window, as a list of changes.
    static func floor(presence: [[Float]], loudness: [[Float]], windows: Int) -> [(window: Int, speaker: Int?)] {
        var changes: [(window: Int, speaker: Int?)] = []
        var holder: Int?
        var challenger: Int?
        var challengeWindows = 0
        for window in 0..<windows {
            var loudest: Int?
            for participant in presence.indices where presence[participant][window] > threshold {
                if loudest.map({ loudness[participant][window] > loudness[$0][window] }) ?? true {
                    loudest = participant
                }
            }
            var next = holder
            if let current = holder, presence[current][window] > threshold {
                // Held: another takes it only after being clearly louder for a whole second.
                if let loudest, loudest != current, loudness[loudest][window] > loudness[current][window] * margin {
                    challengeWindows = challenger == loudest ? challengeWindows + 1 : 1
                    challenger = loudest
                    if challengeWindows >= holdWindows { next = loudest }
                } else {
                    challenger = nil
                    challengeWindows = 0
                }
            } else {
                // Nobody holds it, or the holder stopped: the loudest speaker takes it at once.
                next = loudest
                challenger = nil
                challengeWindows = 0
            }
            if next != holder || changes.isEmpty {
                if next != holder {
                    challenger = nil
                    challengeWindows = 0
                }
                changes.append((window, next))
                holder = next
            }
        }
        return changes
    }
}
