import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveTestSupport
import Foundation
import Testing

/// Writes encoded frames as the simplest files ffmpeg reads: raw Annex-B H264, hand-built IVF.
enum RawFiles {
    static func annexB(_ frames: [EncodedFrame], to path: String) throws {
        let bytes = frames.flatMap(\.data)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}

extension URL {
    var pathString: String { path }
}

/// Times frames straight from an encoder for `MediaFileWriter`, which takes a pts and decides
/// nothing: ticks since each track's first frame, following the RTP timestamps across their wrap.
/// An encoder's steps are small and forward; for frames from the network, the recorder's
/// SegmentMuxer decides this (and what to do with jumps and repeats).
struct EncoderTimeline {
    private var lastTimestamp: [Int: UInt32] = [:]
    private var lastPTS: [Int: Int64] = [:]

    mutating func pts(of frame: EncodedFrame, track: Int) -> Int64 {
        var pts: Int64 = 0
        if let timestamp = lastTimestamp[track], let previous = lastPTS[track] {
            let step: Int32 = Int32(bitPattern: frame.rtpTimestamp &- timestamp)
            pts = previous + Int64(step)
        }
        lastTimestamp[track] = frame.rtpTimestamp
        lastPTS[track] = pts
        return pts
    }
}

extension MediaFileWriter {
    /// Writes `frame` at the time `timeline` gives its RTP timestamp.
    func write(_ frame: EncodedFrame, track: Int, on timeline: inout EncoderTimeline) throws(MediaFileError) {
        try write(frame, track: track, pts: timeline.pts(of: frame, track: track))
    }
}
