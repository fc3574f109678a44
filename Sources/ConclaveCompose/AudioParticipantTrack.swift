import ConclaveAV
import ConclaveCore

/// One participant's audio on the call timeline, read segment by segment and handed out window
/// by window: the mixer, the stems and the active speaker all read through it.
///
/// Each decoded frame sits at its segment's `startOffset` plus its own pts, so gaps (before the
/// join, after the leave, between segments, lost packets) are silence and positions never come
/// from counting samples. A frame within `snapTolerance` of where the previous one ended is
/// joined to it, which absorbs the 1 ms rounding of Matroska timestamps without a click and
/// without drift: a frame further off than that takes its own timestamp again, so a position is
/// never more than 1 ms from the one its timestamp gives. A segment that cannot be opened or
/// read further is silence from there, with a line in `problems`.
final class AudioParticipantTrack {
    let key: String
    private var segments: [CompositionTimeline.Segment]
    private var segmentIndex = 0
    private var reader: AudioTrackReader?
    private var segmentStart: Int64 = 0
    /// The decoded frame being handed out: interleaved `chunkChannels` channels, from timeline
    /// sample `chunkStart`, `chunkFrames` long, of which `chunkUsed` are consumed.
    private var chunk: [Float] = []
    private var chunkChannels = 1
    private var chunkStart: Int64 = 0
    private var chunkFrames = 0
    private var chunkUsed = 0
    /// Where the previous frame ended on the timeline.
    private var expectedNext: Int64?
    private(set) var problems: [String] = []
    private var exhausted = false

    /// How far (48 kHz samples, 1 ms) a frame may sit from its predecessor's end and still be
    /// joined to it: Matroska stores milliseconds.
    static let snapTolerance: Int64 = 48

    init(participant: CompositionTimeline.Participant) {
        key = participant.key
        segments = participant.segments.filter(\.hasAudio).sorted { $0.startOffset < $1.startOffset }
        chunk.reserveCapacity(5_760 * 2)
    }

    /// Timeline samples of `seconds`, held to ±2^50 so that sums stay far inside Int64.
    static func samples(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return 0 }
        return Int64(max(-1e15, min(1e15, (seconds * Double(AudioMixdown.sampleRate)).rounded())))
    }

    /// Adds this participant's audio for timeline samples `start ..< start + count` into
    /// `output`, which holds `count` frames of `channels` (1 or 2) interleaved channels: mono
    /// audio goes to both channels of a stereo output, stereo is averaged into a mono one.
    /// Windows must come in order; audio before `start` that was not asked for is dropped.
    func add(start: Int64, count: Int, into output: UnsafeMutableBufferPointer<Float>, channels: Int) {
        let end = start + Int64(count)
        while true {
            if chunkUsed >= chunkFrames {
                guard decodeNext() else { return }
                continue
            }
            let available = chunkStart + Int64(chunkUsed)
            let chunkEnd = chunkStart + Int64(chunkFrames)
            if chunkEnd <= start {
                chunkUsed = chunkFrames
                continue
            }
            if available >= end { return }
            let from = max(available, start)
            let to = min(chunkEnd, end)
            let sourceIndex = Int(from - chunkStart)
            let targetIndex = Int(from - start)
            let frames = Int(to - from)
            mix(from: sourceIndex, to: targetIndex, frames: frames, into: output, channels: channels)
            chunkUsed = Int(to - chunkStart)
            if to == end { return }
        }
    }

    private func mix(
        from source: Int,
        to target: Int,
        frames: Int,
        into output: UnsafeMutableBufferPointer<Float>,
        channels: Int
    ) {
        chunk.withUnsafeBufferPointer { input in
            switch (chunkChannels, channels) {
            case (1, 1):
                for index in 0..<frames { output[target + index] += input[source + index] }
            case (1, _):
                for index in 0..<frames {
                    let value = input[source + index]
                    output[(target + index) * 2] += value
                    output[(target + index) * 2 + 1] += value
                }
            case (_, 1):
                for index in 0..<frames {
                    output[target + index] += (input[(source + index) * 2] + input[(source + index) * 2 + 1]) * 0.5
                }
            default:
                for index in 0..<frames {
                    output[(target + index) * 2] += input[(source + index) * 2]
                    output[(target + index) * 2 + 1] += input[(source + index) * 2 + 1]
                }
            }
        }
    }

    /// Decodes the next frame of the current segment, opening the next segment when one ends;
    /// false when every segment is done.
    private func decodeNext() -> Bool {
        while !exhausted {
            if reader == nil {
                guard segmentIndex < segments.count else {
                    exhausted = true
                    return false
                }
                let segment = segments[segmentIndex]
                segmentIndex += 1
                do throws(MediaFileError) {
                    reader = try AudioTrackReader(path: segment.path)
                    segmentStart = Self.samples(segment.startOffset)
                    expectedNext = nil
                } catch {
                    problems.append("\(Self.fileName(segment.path)): \(error.reason); its audio is silence")
                    continue
                }
            }
            guard let current = reader else { continue }
            do throws(MediaFileError) {
                guard let block = try current.next(into: &chunk) else {
                    finishSegment(current)
                    continue
                }
                // A corrupt timestamp may be anywhere in Int64; held where sums cannot overflow.
                let limit: Int64 = 1 << 52
                var position = segmentStart + max(-limit, min(limit, block.position))
                if let expected = expectedNext, abs(position - expected) <= Self.snapTolerance {
                    position = expected
                }
                chunkChannels = current.channels
                chunkStart = position
                chunkFrames = block.frames
                chunkUsed = 0
                expectedNext = position + Int64(block.frames)
                return true
            } catch {
                problems.append(
                    "\(Self.fileName(current.path)): \(error.reason); its audio is silence from there"
                )
                finishSegment(current)
            }
        }
        return false
    }

    private func finishSegment(_ finished: AudioTrackReader) {
        if finished.packetsRejected > 0 {
            problems.append(
                "\(Self.fileName(finished.path)): \(finished.packetsRejected) audio packets could not be decoded (silence)"
            )
        }
        reader = nil
    }

    static func fileName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
