import ConclaveAV
public import ConclaveCore
import ConclaveFiles
import ConclaveRTP
import Foundation

/// How long the recorder waits before fixing a segment's layout, and when it splits segments.
public struct RecorderTiming: Sendable, Hashable {
    /// How long after a segment's first frame the recorder waits to see which kinds (audio,
    /// video) the participant sends before creating the file. Subscribers deliver video only from
    /// a keyframe on, so this covers a sender's keyframe interval; the journals hold the frames
    /// meanwhile, so a crash loses nothing.
    public var layoutWait: Duration
    /// How long a track waits for its first sender report (needed to place it on the call
    /// timeline) before falling back to arrival times.
    public var syncWait: Duration
    /// How long audio is held while video waits for its first keyframe; after that the segment
    /// is written without video.
    public var keyframeWait: Duration
    /// Silence from a participant (no frame on any track) longer than this starts a new segment.
    public var longGap: Duration
    /// An audio or video timestamp jump longer than this counts as a gap in the manifest.
    public var reportedGap: Duration

    public init(
        layoutWait: Duration = .seconds(3),
        syncWait: Duration = .seconds(3),
        keyframeWait: Duration = .seconds(15),
        longGap: Duration = .seconds(10),
        reportedGap: Duration = .milliseconds(100)
    ) {
        self.layoutWait = layoutWait
        self.syncWait = syncWait
        self.keyframeWait = keyframeWait
        self.longGap = longGap
        self.reportedGap = reportedGap
    }
}

/// Counters and times of one track of one segment, as the manifest reports them.
public struct TrackProgress: Sendable, Hashable {
    public var codec: MediaCodec
    public var dimensions: VideoDimensions?
    /// Frames handed to the muxer.
    public var framesReceived = 0
    /// Frames in the container.
    public var framesWritten = 0
    /// Video frames before the first keyframe, which nothing could decode.
    public var framesDroppedBeforeKeyframe = 0
    /// Frames refused: a timestamp that does not advance (a repeat, or a frame up to a second
    /// late), an empty frame, or one the container cannot hold.
    public var framesRejected = 0
    /// RTP timestamp jumps the arrival times cannot explain (a sender that reset its clock, or a
    /// hostile one): the frame was kept and timed by its arrival instead of its timestamp.
    public var timestampJumps = 0
    /// Frames the receiver gave up on between this track's frames (lost packets, frames it
    /// could not complete or decode): the jitter buffer's count, so silence is not counted.
    public var framesLost = 0
    /// Timestamp jumps longer than the reported gap, and their total length.
    public var gaps = 0
    public var gapMicroseconds: Int64 = 0
    /// The track's first and last frame on the call timeline (microseconds since the recording's start).
    public var firstTimestamp: Int64?
    public var lastTimestamp: Int64?

    init(codec: MediaCodec) { self.codec = codec }
}

/// Turns the frames of one segment (audio and/or video of one participant) into one container.
///
/// The same code runs live and in `recordings repair`, fed in arrival order either way, so a
/// repaired file has the layout and timing the live file would have had. It buffers the first
/// frames until it knows which tracks exist, has the first video keyframe and, for each track,
/// a sender report (or has waited long enough), then places each track on the call timeline:
/// the track's first frame's RTP timestamp goes through the stream's sender report to the
/// sender's wall clock, plus the participant's clock offset (the smallest arrival-minus-sender
/// time seen, that is the sender's clock error plus the fastest network delay). Audio and video of
/// a participant share the sender's clock, so they line up; participants share the recorder's
/// clock, so they line up with each other. After the start, each track's frames are timed by
/// their RTP timestamps, so gaps keep their real length.
///
/// It is the one place that decides timing and gating on the way to disk: it unwraps RTP
/// timestamps, refuses repeats, keeps and re-times jumps, drops video until a frame a decoder can
/// start from, and aligns tracks by sender reports; the ``SegmentFileWriter`` (a
/// `MediaFileWriter`) gets frames with their final pts and only writes them. The jitter buffer's
/// own wait for a keyframe is a different concern: after a loss it stops handing out frames that
/// reference the lost one, so a live decoder does not show corruption; this muxer's gate is about
/// where a file may start.
public final class SegmentMuxer {
    /// The container path without its extension (`.webm` or `.mkv` is chosen from the codecs).
    public let basePath: String
    /// The call timeline's origin (Unix microseconds).
    public let recordingStart: Int64
    public let timing: RecorderTiming

    /// Where it stands.
    public enum State: Sendable, Hashable {
        /// Holding frames until the layout and the timeline position are known.
        case buffering
        /// Writing the container.
        case writing
        /// Stopped by a write error; the reason names the file and the cause.
        case stopped(String)
        /// Closed.
        case finished
    }

    public private(set) var state = State.buffering
    /// The container's path once created.
    public private(set) var path: String?
    /// Where the file starts on the call timeline (microseconds since the recording's start).
    public private(set) var fileStart: Int64?
    /// Per-track counters.
    public private(set) var tracks: [MediaKind: TrackProgress] = [:]

    private struct Pending {
        var kind: MediaKind
        var frame: EncodedFrame
        var arrival: Int64
    }

    private var pending: [Pending] = []
    private var clocks: [MediaKind: SenderReportClock] = [:]
    private var firstArrival: [MediaKind: Int64] = [:]
    private let makeWriter: MakeWriter
    private var writer: (any SegmentFileWriter)?
    private var trackIndex: [MediaKind: Int] = [:]
    /// Where the track's first frame sits in the file, in ticks of its clock (the writer's time base).
    private var startTicks: [MediaKind: Int64] = [:]
    /// The timestamp of the track's last written frame, after `rtpAdjustment`.
    private var lastRTP: [MediaKind: UInt32] = [:]
    /// Added to each frame's RTP timestamp (wrapping) since the track's last jump, so the writer
    /// sees a timeline that only ever advances by sane steps.
    private var rtpAdjustment: [MediaKind: UInt32] = [:]
    private var lastWrittenArrival: [MediaKind: Int64] = [:]
    private var elapsedTicks: [MediaKind: Int64] = [:]
    private var trackStart: [MediaKind: Int64] = [:]

    /// How far an RTP timestamp step may outrun the arrival times before it counts as a jump.
    /// Real steps follow the sender's clock, which arrival times track up to network jitter and a
    /// jitter buffer's bursts; a step beyond that is a reset or a hostile sender.
    static let jumpTolerance: Int64 = 10_000_000
    /// How far back a timestamp may go and still be a late or repeated frame (refused) rather
    /// than a sender whose clock went back (a jump, kept).
    static let reorderWindow: Int64 = 1_000_000
    /// How far sender reports may place a track from its first frame's arrival, and the tracks
    /// of a segment from each other; reports that place them further are ignored and arrival
    /// times used instead. The real difference is a network delay.
    static let maximumTrackSkew: Int64 = 60_000_000

    /// The longest cluster of a live file: what a `kill -9` can cut from its end.
    public static let liveClusterMilliseconds = 500

    /// Whether the container is written as a live stream (see ``init(basePath:recordingStart:timing:live:)``).
    public let live: Bool
    private var liveDescriptor: Int32 = -1

    /// - Parameter live: write the container as a stream that is never rewritten in place:
    ///   libavformat then closes a Matroska cluster at least every ``liveClusterMilliseconds`` and the file needs no
    ///   trailer to play, so a file cut by `kill -9` plays up to about its last second. A live
    ///   file has no index (cues) or duration; the recorder rebuilds a seekable one from the
    ///   journals at a clean finish, and `recordings repair` does it after a crash.
    public convenience init(
        basePath: String,
        recordingStart: Int64,
        timing: RecorderTiming = RecorderTiming(),
        live: Bool = false
    ) {
        self.init(
            basePath: basePath,
            recordingStart: recordingStart,
            timing: timing,
            live: live,
            makeWriter: SegmentMuxer.mediaFileWriter
        )
    }

    /// Creates the writer of a segment's container: the path (or `pipe:` descriptor) to write,
    /// the container, the tracks and the libavformat muxer options.
    typealias MakeWriter = (String, MediaFileWriter.Container, [MediaFileWriter.Track], [String: String])
        throws(MediaFileError) -> any SegmentFileWriter

    /// A muxer that writes through `makeWriter` (tests pass a fake to see what the muxer decided).
    init(basePath: String, recordingStart: Int64, timing: RecorderTiming, live: Bool, makeWriter: @escaping MakeWriter)
    {
        self.basePath = basePath
        self.recordingStart = recordingStart
        self.timing = timing
        self.live = live
        self.makeWriter = makeWriter
    }

    private static func mediaFileWriter(
        path: String,
        container: MediaFileWriter.Container,
        tracks: [MediaFileWriter.Track],
        muxerOptions: [String: String]
    ) throws(MediaFileError) -> any SegmentFileWriter {
        try MediaFileWriter(path: path, container: container, tracks: tracks, muxerOptions: muxerOptions)
    }

    deinit {
        if liveDescriptor >= 0 { _ = Glibc.close(liveDescriptor) }
    }

    /// The kinds the container was created with (empty until it is).
    public var writtenKinds: Set<MediaKind> { Set(trackIndex.keys) }

    /// Whether video frames are arriving but no keyframe yet (the caller should ask for one).
    public var isWaitingForKeyframe: Bool {
        state == .buffering && (tracks[.video]?.framesDroppedBeforeKeyframe ?? 0) > 0
            && !pending.contains { $0.kind == .video }
    }

    /// Takes a sender report of the segment's `kind` stream.
    public func senderReport(_ report: SenderReportTime, kind: MediaKind, codec: MediaCodec) {
        var clock = clocks[kind] ?? SenderReportClock(clockRate: codec.clockRate)
        clock.update(ntp: report.ntp, rtpTimestamp: report.rtpTimestamp)
        clocks[kind] = clock
    }

    /// Takes one frame; writes it, holds it, or (video before its first keyframe) drops it.
    /// `framesLostBefore` (frames the receiver gave up on just before this one) counts as lost
    /// when the track already has a frame in this segment.
    ///
    /// Throws when the container cannot be written; the muxer is then stopped and keeps what it wrote.
    public func append(kind: MediaKind, frame: EncodedFrame, arrival: Int64, framesLostBefore: Int = 0)
        throws(MediaFileError)
    {
        var progress = tracks[kind] ?? TrackProgress(codec: frame.codec)
        if progress.framesReceived > 0 {
            progress.framesLost = progress.framesLost.clampedAdding(max(framesLostBefore, 0))
        }
        progress.framesReceived = progress.framesReceived.clampedAdding(1)
        tracks[kind] = progress
        switch state {
        case .stopped, .finished:
            return
        case .buffering:
            if firstArrival[kind] == nil { firstArrival[kind] = arrival }
            if kind == .video, !pending.contains(where: { $0.kind == .video }), !Self.startsDecoding(frame) {
                tracks[kind]?.framesDroppedBeforeKeyframe += 1
                return
            }
            pending.append(Pending(kind: kind, frame: frame, arrival: arrival))
            try openIfReady(now: arrival)
        case .writing:
            try write(kind: kind, frame: frame, arrival: arrival)
        }
    }

    /// Whether a video track may start at `frame`: a keyframe, and for H264 one that carries the
    /// SPS and PPS the container needs before anything can be decoded. Only frames before a
    /// track's first one are checked, so the scan is not paid per frame.
    static func startsDecoding(_ frame: EncodedFrame) -> Bool {
        frame.isKeyframe && (frame.codec != .h264 || H264AnnexB.parameterSets(in: frame.data) != nil)
    }

    /// Lets time pass without a frame: opens the file if the waits have run out.
    public func tick(now: Int64) throws(MediaFileError) {
        if state == .buffering { try openIfReady(now: now) }
    }

    /// Pushes buffered container bytes to the file.
    public func flush() throws(MediaFileError) {
        guard state == .writing, let writer else { return }
        do {
            try writer.flush()
        } catch {
            let error = relabeled(error)
            stop(error)
            throw error
        }
    }

    /// Writes what is held (if the file was never opened) and closes the container.
    public func finish() throws(MediaFileError) {
        if state == .buffering, !pending.isEmpty { try open() }
        guard state == .writing, let writer else {
            if state == .buffering { state = .finished }
            return
        }
        state = .finished
        defer { closeLiveDescriptor() }
        do { try writer.close() } catch { throw relabeled(error) }
        if liveDescriptor >= 0, fsync(liveDescriptor) != 0 {
            throw MediaFileError(path: path ?? basePath, kind: .writeFailed, reason: String(cString: strerror(errno)))
        }
    }

    /// Errors name the file, not the `pipe:` descriptor libavformat wrote through.
    private func relabeled(_ error: MediaFileError) -> MediaFileError {
        var error = error
        if let path { error.path = path }
        return error
    }

    private func closeLiveDescriptor() {
        if liveDescriptor >= 0 { _ = Glibc.close(liveDescriptor) }
        liveDescriptor = -1
    }

    // MARK: - Opening

    private func openIfReady(now: Int64) throws(MediaFileError) {
        guard let first = pending.first?.arrival ?? firstArrival.values.min() else { return }
        // Arrival times come from journals too, which may hold anything: no step may trap.
        let waited = now.clampedSubtracting(first)
        guard waited >= timing.layoutWait.microsecondsValue else { return }
        let hasVideoKeyframe = pending.contains { $0.kind == .video }
        let videoSeen = firstArrival[.video] != nil
        if videoSeen, !hasVideoKeyframe, waited < timing.keyframeWait.microsecondsValue { return }
        for (kind, arrival) in firstArrival where pending.contains(where: { $0.kind == kind }) {
            if clocks[kind] == nil, now.clampedSubtracting(arrival) < timing.syncWait.microsecondsValue { return }
        }
        try open()
    }

    private func open() throws(MediaFileError) {
        let kinds = [MediaKind.video, .audio].filter { kind in pending.contains { $0.kind == kind } }
        guard !kinds.isEmpty else { return }
        var firstFrames: [MediaKind: Pending] = [:]
        for item in pending where firstFrames[item.kind] == nil { firstFrames[item.kind] = item }

        // The participant's clock offset: recorder arrival minus sender time, smallest seen.
        var clockOffset: Int64?
        for item in pending {
            guard let senderTime = clocks[item.kind]?.unixMicroseconds(forRTPTimestamp: item.frame.rtpTimestamp) else {
                continue
            }
            clockOffset = min(clockOffset ?? .max, item.arrival.clampedSubtracting(senderTime))
        }
        var positions: [MediaKind: Int64] = [:]
        var arrivalPositions: [MediaKind: Int64] = [:]
        for kind in kinds {
            guard let first = firstFrames[kind] else { continue }
            arrivalPositions[kind] = first.arrival.clampedSubtracting(recordingStart)
            if let clockOffset,
                let senderTime = clocks[kind]?.unixMicroseconds(forRTPTimestamp: first.frame.rtpTimestamp)
            {
                positions[kind] = senderTime.clampedAdding(clockOffset).clampedSubtracting(recordingStart)
            } else {
                positions[kind] = arrivalPositions[kind]
            }
        }
        // Sender reports place tracks to within the network delay of their arrival; reports (or
        // timestamps) that place them further off, or far apart, are not believed.
        let misplaced = positions.contains { kind, position in
            let arrival = arrivalPositions[kind] ?? position
            return position.clampedSubtracting(arrival).magnitude > UInt64(Self.maximumTrackSkew)
        }
        let spread = (positions.values.max() ?? 0).clampedSubtracting(positions.values.min() ?? 0)
        if misplaced || spread > Self.maximumTrackSkew { positions = arrivalPositions }
        let start = positions.values.min() ?? 0
        fileStart = start

        let videoCodec = firstFrames[.video]?.frame.codec
        let container: MediaFileWriter.Container = videoCodec == .h264 ? .matroska : .webm
        let path = basePath + (container == .matroska ? ".mkv" : ".webm")
        var writerTracks: [MediaFileWriter.Track] = []
        for kind in kinds {
            guard let first = firstFrames[kind], let position = positions[kind] else { continue }
            // Only arrival times from a damaged or hostile journal spread the tracks this far.
            let offset = min(position.clampedSubtracting(start), Self.maximumTrackSkew)
            trackIndex[kind] = writerTracks.count
            trackStart[kind] = position
            startTicks[kind] = Self.ticks(microseconds: offset, clockRate: Int64(max(first.frame.codec.clockRate, 1)))
            if kind == .video {
                let dimensions = VideoDimensions.of(first.frame) ?? VideoDimensions(width: 640, height: 480)
                tracks[kind]?.dimensions = dimensions
                writerTracks.append(.video(first.frame.codec, width: dimensions.width, height: dimensions.height))
            } else {
                // The TOC byte's stereo flag (RFC 6716 section 3.1).
                let stereo = (first.frame.data.first ?? 0) & 0x04 != 0
                writerTracks.append(.opus(channels: stereo ? 2 : 1))
            }
        }
        self.path = path
        do throws(MediaFileError) {
            var target = path
            // Decrypted media: owner-only whatever the umask. libavformat creates the non-live
            // file itself with the umask's mode, so it gets a 0600 file (which keeps its mode
            // when libavformat truncates it) instead.
            do throws(FileError) {
                if live {
                    // libavformat's pipe protocol writes to a descriptor it does not seek on.
                    liveDescriptor = try PrivateFiles.openPrivateFile(path)
                    target = "pipe:\(liveDescriptor)"
                } else {
                    try PrivateFiles.createPrivateFile(path)
                }
            } catch {
                throw MediaFileError(path: path, kind: .writeFailed, reason: error.reasonWithoutPath)
            }
            writer = try makeWriter(
                target,
                container,
                writerTracks,
                // A live file closes a cluster at least every half second (libavformat's default
                // for a stream is a second), so a file cut by `kill -9` loses at most that much.
                live ? ["cluster_time_limit": "\(Self.liveClusterMilliseconds)"] : [:]
            )
        } catch {
            let error = relabeled(error)
            stop(error)
            throw error
        }
        state = .writing
        let held = pending
        pending = []
        for item in held where trackIndex[item.kind] != nil {
            try write(kind: item.kind, frame: item.frame, arrival: item.arrival)
        }
    }

    // MARK: - Writing

    /// Writes one frame, timed by its RTP timestamp relative to the track's previous frame: its
    /// pts is the track's start plus the ticks elapsed since the track's first frame, so the RTP
    /// timestamp's wrap at 2^32 is unwrapped here and the writer sees a pts that only advances.
    ///
    /// A step that does not advance (a repeat, a reordered frame up to ``reorderWindow`` old) is
    /// refused and counted. A step the arrival times cannot explain (forward by more than the time
    /// that passed plus ``jumpTolerance``, or back by more than ``reorderWindow``) is a jump: the
    /// frame is kept, timed by its arrival, and later frames follow on from it. So no sender can
    /// push the timeline out of range or stop the track, whatever timestamps it sends.
    private func write(kind: MediaKind, frame: EncodedFrame, arrival: Int64) throws(MediaFileError) {
        guard let writer, let index = trackIndex[kind], var progress = tracks[kind] else { return }
        // An empty frame carries nothing to play, and a container reader skips it, so the file
        // would not verify against the count written.
        guard !frame.data.isEmpty else {
            progress.framesRejected += 1
            tracks[kind] = progress
            return
        }
        let clockRate = Int64(max(frame.codec.clockRate, 1))
        var elapsed = elapsedTicks[kind] ?? 0
        let adjustment = rtpAdjustment[kind] ?? 0
        var timestamp = frame.rtpTimestamp &+ adjustment
        var newAdjustment = adjustment
        if let last = lastRTP[kind] {
            // Within ±2^31 ticks, so the microseconds stay far inside Int64.
            var step = Int64(Int32(bitPattern: timestamp &- last))
            let stepMicroseconds = step * 1_000_000 / clockRate
            let sinceLast = max(arrival.clampedSubtracting(lastWrittenArrival[kind] ?? arrival), 0)
            if step <= 0, stepMicroseconds >= -Self.reorderWindow {
                progress.framesRejected += 1
                tracks[kind] = progress
                return
            }
            if step <= 0 || stepMicroseconds > sinceLast.clampedAdding(Self.jumpTolerance) {
                step = min(max(Self.ticks(microseconds: sinceLast, clockRate: clockRate), 1), Int64(Int32.max))
                timestamp = last &+ UInt32(step)
                newAdjustment = timestamp &- frame.rtpTimestamp
                progress.timestampJumps += 1
            }
            let gap = step * 1_000_000 / clockRate
            if gap > timing.reportedGap.microsecondsValue {
                progress.gaps += 1
                progress.gapMicroseconds = progress.gapMicroseconds.clampedAdding(gap)
            }
            elapsed = elapsed.clampedAdding(step)
        }
        let pts = (startTicks[kind] ?? 0).clampedAdding(elapsed)
        do {
            try writer.write(frame, track: index, pts: pts, dts: pts)
        } catch  where error.kind == .malformed {
            progress.framesRejected += 1
            tracks[kind] = progress
            return
        } catch {
            tracks[kind] = progress
            let error = relabeled(error)
            stop(error)
            throw error
        }
        lastRTP[kind] = timestamp
        rtpAdjustment[kind] = newAdjustment
        lastWrittenArrival[kind] = arrival
        elapsedTicks[kind] = elapsed
        progress.framesWritten += 1
        let position = (trackStart[kind] ?? 0).clampedAdding(Self.microseconds(ticks: elapsed, clockRate: clockRate))
        if progress.firstTimestamp == nil { progress.firstTimestamp = position }
        progress.lastTimestamp = position
        tracks[kind] = progress
    }

    /// `ticks` of a `clockRate` clock in microseconds, rounded down, held at Int64's bounds.
    static func microseconds(ticks: Int64, clockRate: Int64) -> Int64 {
        let (whole, overflow) = (ticks / clockRate).multipliedReportingOverflow(by: 1_000_000)
        if overflow { return ticks < 0 ? .min : .max }
        return whole.clampedAdding(ticks % clockRate * 1_000_000 / clockRate)
    }

    /// `microseconds` in ticks of a `clockRate` clock (at most 2^30 Hz), rounded down, held at Int64's bounds.
    static func ticks(microseconds: Int64, clockRate: Int64) -> Int64 {
        let (whole, overflow) = (microseconds / 1_000_000).multipliedReportingOverflow(by: clockRate)
        if overflow { return microseconds < 0 ? .min : .max }
        return whole.clampedAdding(microseconds % 1_000_000 * clockRate / 1_000_000)
    }

    private func stop(_ error: MediaFileError) {
        state = .stopped(error.description)
        pending = []
        // Finish the file as well as the disk allows; everything already written stays readable.
        try? writer?.close()
        closeLiveDescriptor()
    }
}

/// What a ``SegmentMuxer`` writes its container through: frames already timed (a pts and dts in
/// ticks of the track codec's clock) and gated, to be written as given. `MediaFileWriter` is the
/// real one; tests pass a fake to see what the muxer decided.
protocol SegmentFileWriter: AnyObject {
    /// Writes `frame` to track `track` at `pts`/`dts`; throws `.malformed` for a frame the
    /// container refuses (nothing written), other kinds for write failures.
    func write(_ frame: EncodedFrame, track: Int, pts: Int64, dts: Int64?) throws(MediaFileError)
    /// Pushes buffered bytes to the file.
    func flush() throws(MediaFileError)
    /// Finishes and closes the container.
    func close() throws(MediaFileError)
}

extension MediaFileWriter: SegmentFileWriter {}

extension Duration {
    /// Whole microseconds.
    var microsecondsValue: Int64 {
        let (whole, overflow) = components.seconds.multipliedReportingOverflow(by: 1_000_000)
        if overflow { return components.seconds < 0 ? .min : .max }
        return whole.clampedAdding(components.attoseconds / 1_000_000_000_000)
    }
}

extension FixedWidthInteger {
    /// `self + other`, held at the type's bounds instead of trapping: for times and counts that
    /// come from the network or from files.
    func clampedAdding(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, held at the type's bounds instead of trapping.
    func clampedSubtracting(_ other: Self) -> Self {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other < 0 ? .max : .min
    }
}
