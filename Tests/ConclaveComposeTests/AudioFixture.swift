import ConclaveCompose
import Foundation
import RecordingTestBed

/// Recordings made by `RecordingTestBed` for the audio tests, each recorded once per test run.
enum AudioFixture {
    /// The standard call: 20 s, four people (u2 joins at 5 s, u3 leaves at 15 s, u4 is muted
    /// from 5 s to 15 s), each with a steady tone and a beep on every whole second of the call.
    static let standard = Result { try record(SimulatedCall.standard(participants: 4, seconds: 20)) }

    /// Three people who take turns: u1 alone until 6 s, u2 alone from 6 s to 12 s, u3 alone
    /// after (the others muted).
    static let turns = Result {
        try record(
            SimulatedCall(
                members: [
                    .init(feedID: 11, display: "u1:Ann", codec: .vp8, muted: [6..<16]),
                    .init(feedID: 22, display: "u2:Bob", codec: .vp8, muted: [0..<6, 12..<16]),
                    .init(feedID: 33, display: "u3:Cem", codec: .vp8, muted: [0..<12]),
                ],
                seconds: 16,
                width: 160,
                height: 120
            )
        )
    }

    private static func record(_ call: SimulatedCall) throws -> (call: SimulatedCall, timeline: CompositionTimeline) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "audio-fixture-\(UUID().uuidString)"
        )
        .path
        _ = try call.record(to: directory)
        return (call, try CompositionTimeline.load(directory: directory))
    }
}

/// The RMS of mono or interleaved PCM (first channel) in windows of `window` samples.
func levels(_ samples: [Float], channels: Int, window: Int = 120) -> [Float] {
    let frames = samples.count / channels
    return stride(from: 0, to: frames - window + 1, by: window).map { start in
        var sum: Float = 0
        for index in start..<(start + window) {
            let value = samples[index * channels]
            sum += value * value
        }
        return (sum / Float(window)).squareRoot()
    }
}

/// The fixture's beeps in PCM: for each whole second `second` of `seconds`, where the loudest
/// window (2.5 ms unless told) within ±0.5 s first reaches half that level, in seconds (nil when
/// the second holds nothing louder than `floor`).
func beepTimes(_ samples: [Float], channels: Int, seconds: Int, floor: Float = 0.05, window: Int = 120) -> [Double?] {
    let windows = levels(samples, channels: channels, window: window)
    let perSecond = 48_000 / window
    return (0..<seconds).map { second in
        let range = max(0, second * perSecond - perSecond / 2)..<min(windows.count, second * perSecond + perSecond / 2)
        guard let peak = windows[range].max(), peak > floor else { return nil }
        guard let first = windows[range].firstIndex(where: { $0 >= peak / 2 }) else { return nil }
        return Double(first * window) / 48_000
    }
}
