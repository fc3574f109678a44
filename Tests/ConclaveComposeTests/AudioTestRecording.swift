import ConclaveAV
import ConclaveCompose
import ConclaveCore
import ConclaveOpus
import Foundation

/// A recording folder built directly from Opus files (ConclaveOpus's encoder, ConclaveAV's
/// writer) and a hand-written manifest: the audio tests' input where they need exact control
/// of beeps, lost packets and broken files.
struct AudioTestRecording {
    let directory: String
    private var participants: [(key: String, segments: [String])] = []
    /// Seconds on the call timeline where the call ends (the manifest's `endTime`).
    var duration: Double
    /// The manifest's status: `recording` for a call still going.
    var status = "finished"

    /// One participant's segment: beeps (1 kHz, `beepLength` s) at `beeps` seconds from the
    /// file's start, `length` seconds long, with the 20 ms packets in `lost` (seconds from the
    /// start, half-open) left out as a receiver would have lost them.
    struct Segment {
        var file: String
        var startOffset: Double
        var length: Double
        var beeps: [Double]
        var beepLength = 0.1
        var amplitude: Float = 0.3
        var lost: Range<Double>? = nil
        var tone: Double = 1_000
        /// A continuous tone over these ranges (speech for the active speaker), besides beeps.
        var talk: [Range<Double>] = []
        /// Write random bytes instead of a container.
        var corrupt = false
    }

    init(duration: Double) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("compose-audio-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(
            atPath: path,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        directory = path
        self.duration = duration
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Adds a participant with its segments (files written now).
    mutating func add(_ key: String, _ segments: [Segment]) throws {
        var entries: [String] = []
        for (index, segment) in segments.enumerated() {
            let path = directory + "/" + segment.file
            if segment.corrupt {
                let bytes = (0..<4_096).map { _ in UInt8.random(in: 0...255) }
                try Data(bytes).write(to: URL(fileURLWithPath: path))
            } else {
                try Self.writeOpus(segment, to: path)
            }
            let end = segment.startOffset + segment.length
            entries.append(
                """
                {"index": \(index + 1), "feedID": \(participants.count + 1), "startReason": "joined",
                 "file": "\(segment.file)", "startOffset": \(segment.startOffset), "endOffset": \(end),
                 "journals": [], "tracks": [{"kind": "audio", "codec": "opus", "firstTimestamp": \(segment.startOffset),
                 "lastTimestamp": \(end), "framesReceived": 0, "framesWritten": 0, "framesLost": 0,
                 "framesUndecryptable": 0, "framesDroppedBeforeKeyframe": 0, "gaps": 0, "gapSeconds": 0}]}
                """
            )
        }
        participants.append((key, entries))
    }

    /// Writes `manifest.json` and loads the timeline.
    func timeline() throws -> CompositionTimeline {
        let people = participants.enumerated().map { index, participant in
            """
            {"key": "\(participant.key)", "feedIDs": [\(index + 1)], "display": "\(participant.key):\(participant.key)",
             "recorded": true, "framesUndecryptable": 0, "segments": [\(participant.segments.joined(separator: ","))]}
            """
        }
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let manifest = """
            {"formatVersion": 1, "callID": "7", "recorderVersion": "test", "cryptoFormat": "none",
             "keyEpochs": [], "startTime": "\(formatter.string(from: start))",
             "endTime": "\(formatter.string(from: start.addingTimeInterval(duration)))", "status": "\(status)",
             "participants": [\(people.joined(separator: ","))], "notRecorded": []}
            """
        let path = directory + "/manifest.json"
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return try CompositionTimeline.load(directory: directory)
    }

    /// Encodes `segment` as mono Opus in WebM, 20 ms packets timed by their index.
    static func writeOpus(_ segment: Segment, to path: String) throws {
        let encoder = try OpusAudioEncoder(configuration: OpusEncoderConfiguration(channels: 1, bitrate: 32_000))
        let writer = try MediaFileWriter(
            path: path,
            container: .webm,
            tracks: [.opus(channels: 1, preSkip: encoder.lookahead)]
        )
        let frames = Int((segment.length / 0.02).rounded())
        // The encoder's lookahead delays its output: the file's pre-skip takes it back out.
        var samples = [Int16](repeating: 0, count: 960)
        for index in 0..<frames {
            for sample in 0..<960 {
                let time = (Double(index * 960 + sample)) / 48_000
                let beeping =
                    segment.beeps.contains { time >= $0 && time < $0 + segment.beepLength }
                    || segment.talk.contains { $0.contains(time) }
                let value = beeping ? Double(segment.amplitude) * sin(2 * .pi * segment.tone * time) : 0
                samples[sample] = Int16((value * 32_767).rounded())
            }
            let frame = try AudioFrame(
                channels: 1,
                samples: samples,
                rtpTimestamp: UInt32(truncatingIfNeeded: index * 960)
            )
            guard let packet = try encoder.encode(frame) else { continue }
            if let lost = segment.lost, lost.contains(Double(index) * 0.02) { continue }
            try writer.write(packet, track: 0, pts: Int64(index * 960))
        }
        try writer.close()
    }
}

/// Where beeps start in PCM: the times (seconds from the buffer's start) at which the level in
/// 0.25 ms steps rises above `threshold` after at least `gap` seconds below it.
func beepOnsets(_ samples: [Float], channels: Int, threshold: Float = 0.05, gap: Double = 0.05) -> [Double] {
    let step = 12
    var onsets: [Double] = []
    var quietSince = 0
    var frame = 0
    let frames = samples.count / channels
    var quiet = true
    while frame + step <= frames {
        var peak: Float = 0
        for index in frame..<(frame + step) {
            for channel in 0..<channels { peak = max(peak, abs(samples[index * channels + channel])) }
        }
        if peak > threshold {
            if quiet, Double(frame - quietSince) / 48_000 >= gap || onsets.isEmpty {
                onsets.append(Double(frame) / 48_000)
            }
            quiet = false
        } else {
            if !quiet { quietSince = frame }
            quiet = true
        }
        frame += step
    }
    return onsets
}

/// Reads every block of a mixdown.
func readAll(_ mixdown: AudioMixdown, block: Int = 4_800) throws -> [Float] {
    var samples: [Float] = []
    while let next = try mixdown.next(frames: block) { samples += next }
    return samples
}

/// The decoded PCM of a file (interleaved) placed by its frames' timestamps from the file's zero.
func decodeFile(_ path: String) throws -> (samples: [Float], channels: Int) {
    let reader = try AudioTrackReader(path: path)
    var samples: [Float] = []
    var buffer: [Float] = []
    while let block = try reader.next(into: &buffer) {
        let start = Int(max(block.position, 0)) * reader.channels
        let needed = start + block.frames * reader.channels
        if samples.count < needed { samples += [Float](repeating: 0, count: needed - samples.count) }
        for index in 0..<(block.frames * reader.channels) { samples[start + index] = buffer[index] }
    }
    return (samples, reader.channels)
}
