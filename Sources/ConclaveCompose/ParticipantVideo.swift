import ConclaveAV
import ConclaveCore

/// One participant's video on the call timeline: their segments decoded in order, read ahead one
/// frame so the compositor can ask for "the latest frame at or before t".
///
/// A segment that cannot be opened or stops decoding ends there (the rest of it composes as a
/// gap) and adds a line to `problems`; the next segment carries on. A file of a recording still
/// being written is read up to where it ends now, without a problem.
final class ParticipantVideo {
    /// A decoded picture and its time on the call timeline (seconds).
    struct Picture {
        var frame: VideoFrame
        var time: Double
    }

    let participant: CompositionTimeline.Participant
    private(set) var problems: [String] = []
    /// The latest picture at or before the last time asked for.
    private(set) var current: Picture?
    private var upcoming: Picture?
    private var segments: ArraySlice<CompositionTimeline.Segment>
    private var open: OpenSegment?
    private var decoded: [Picture] = []

    private struct OpenSegment {
        var segment: CompositionTimeline.Segment
        var demuxer: MediaDemuxer
        var decoder: MediaStreamDecoder
        var stream: Int
        var draining = false
    }

    /// Whether the recording is still being written: its last cluster may be cut short, which is
    /// where the composite ends for now, not a problem.
    private let stillWriting: Bool

    init(_ participant: CompositionTimeline.Participant, stillWriting: Bool) {
        self.participant = participant
        self.stillWriting = stillWriting
        self.segments = participant.segments.filter(\.hasVideo)[...]
    }

    /// Moves to time `t` (non-decreasing between calls) and returns the picture to show then:
    /// the latest at or before `t`, nil when there is none.
    func picture(at t: Double) -> Picture? {
        if upcoming == nil { upcoming = nextPicture() }
        while let next = upcoming, next.time <= t + Self.tolerance {
            current = next
            upcoming = nextPicture()
        }
        return current
    }

    /// Timestamps are rounded to the container's millisecond ticks: a frame due at t may carry
    /// t - 0.5 ms.
    static let tolerance = 0.001

    private func nextPicture() -> Picture? {
        while decoded.isEmpty {
            guard fill() else { return nil }
        }
        return decoded.removeFirst()
    }

    /// Decodes more of the current segment (opening the next when needed); false at the end of
    /// the last one.
    private func fill() -> Bool {
        guard var segment = open ?? openNext() else { return false }
        do throws(MediaFileError) {
            if segment.draining {
                open = nil
                return true
            }
            guard let packet = try segment.demuxer.readPacket() else {
                segment.draining = true
                open = segment
                append(try segment.decoder.decode(nil), segment.segment)
                return true
            }
            open = segment
            guard packet.streamIndex == segment.stream else { return true }
            append(try segment.decoder.decode(packet), segment.segment)
        } catch {
            if !stillWriting {
                problems.append("\(Self.name(segment.segment.path)): \(error.reason); composed as a gap from there")
            }
            open = nil
        }
        return true
    }

    private func append(_ outputs: [MediaStreamDecoder.Output], _ segment: CompositionTimeline.Segment) {
        for case .video(let frame, let time) in outputs {
            let seconds = Double(time.components.seconds) + Double(time.components.attoseconds) / 1e18
            decoded.append(Picture(frame: frame, time: segment.startOffset + seconds))
        }
    }

    private func openNext() -> OpenSegment? {
        while let segment = segments.popFirst() {
            do throws(MediaFileError) {
                let demuxer = try MediaDemuxer(path: segment.path)
                guard let stream = demuxer.firstStream(of: .video) else {
                    problems.append("\(Self.name(segment.path)): no video stream; composed as a gap")
                    continue
                }
                let decoder = try MediaStreamDecoder(demuxer: demuxer, stream: stream)
                let opened = OpenSegment(segment: segment, demuxer: demuxer, decoder: decoder, stream: stream.index)
                open = opened
                return opened
            } catch {
                problems.append("\(Self.name(segment.path)): \(error.reason); composed as a gap")
            }
        }
        return nil
    }

    /// The file name of a segment, as the manifest names it.
    static func name(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
