import ConclaveAV
import ConclaveCore
import Foundation
import Synchronization

/// The composite of a call written while the call runs: every participant's latest picture tiled
/// with their name (through the same `TileRenderer` as a composed recording) and their audio
/// mixed, encoded into a Matroska or fragmented MP4 file that plays after a `kill -9` up to
/// within a second of the kill.
///
/// The call's receive path hands in decrypted encoded frames and joins and leaves; they are
/// queued under a lock and nothing else, with no wakeup: a thread of the composite's own wakes
/// once per output frame, takes the queue, decodes (it owns every libav* object of the
/// composite), renders the frame and encodes it with the audio mixed since the last one. The
/// queue is bounded: when the thread falls behind, input video is dropped (and counted) rather
/// than the receive path waiting, and a participant whose video was dropped resumes at their
/// next keyframe. Audio is never dropped unless the queue overflows by far; a participant
/// without audio (a gap, muted) adds silence.
///
/// The composite only ever sees what the caller decrypted: frames that did not decrypt never
/// reach it.
public final class LiveComposite: Sendable {
    /// What a finished live composite wrote and dropped.
    public struct Report: Sendable, Hashable, Codable {
        public var path: String
        /// Pictures written (the call's duration at the frame rate).
        public var frames: Int
        public var duration: Double
        /// Input video frames not composed because the composite fell behind, or that followed
        /// such a drop up to the next keyframe.
        public var videoFramesDropped: Int
        /// Input audio frames not mixed because the queue overflowed.
        public var audioFramesDropped: Int
        /// Frames that would not decode or encode, one line each.
        public var problems: [String]
    }

    /// The counts for status lines while the call runs.
    public struct Figures: Sendable, Hashable {
        public var frames: Int
        public var videoFramesDropped: Int
        public var audioFramesDropped: Int
    }

    /// The most input video frames queued: about two seconds of nine participants at 30 fps.
    public static let videoQueueLimit = 512
    /// The most input audio frames queued: four seconds of nine participants.
    public static let audioQueueLimit = 2_048
    /// Matroska clusters (and MP4 fragments) are closed at least this often, in milliseconds:
    /// what a `kill -9` may cost, besides the frame being encoded.
    static let flushMilliseconds = 500

    public let path: String
    private let inbox: Inbox
    private let counters: Counters
    private let result: Result

    /// Opens `path` (`.mkv`: H264 + Opus; `.mp4`: fragmented, H264 + AAC) and starts the
    /// composite's thread; the call's time 0 is now. Only the grid layout is drawn live.
    ///
    /// The caller makes the file private beforehand (it is opened without changing its mode).
    public init(path: String, options: CompositeOptions = .init()) throws(ComposeError) {
        let ext = (path as NSString).pathExtension.lowercased()
        let muxerOptions: [String: String]
        let format: MediaFileEncoder.Format
        switch ext {
        case "mkv":
            format = .matroska
            muxerOptions = ["cluster_time_limit": "\(Self.flushMilliseconds)"]
        case "mp4":
            format = .mp4
            muxerOptions = [
                "movflags": "frag_keyframe+empty_moov+default_base_moof",
                "frag_duration": "\(Self.flushMilliseconds * 1_000)",
            ]
        default:
            throw ComposeError(path: path, reason: "a live composite is .mkv or .mp4, not .\(ext)")
        }
        let encoder = try options.makeEncoder(path: path, format: format, audio: true, muxerOptions: muxerOptions)
        var gridOptions = options
        gridOptions.layout = .grid
        let renderer = try TileRenderer(options: gridOptions, encoder: encoder, names: [])
        self.path = path
        let inbox = Inbox()
        let counters = Counters()
        let result = Result()
        self.inbox = inbox
        self.counters = counters
        self.result = result
        let worker = Handover(
            LiveWorker(options: gridOptions, encoder: encoder, renderer: renderer, counters: counters)
        )
        // The thread ends with the composite (``finish()``); nothing needs to hold it.
        let thread = Thread {
            let report = worker.value.run(inbox)
            result.deliver(report)
        }
        thread.name = "conclave.live-composite"
        thread.start()
    }

    /// A participant's feed appeared; their tile is added at the next frame.
    public func participantJoined(feedID: UInt64, display: String?) {
        inbox.add(.joined(feedID, display), counters: counters)
    }

    /// A participant's feed is gone; their tile is removed at the next frame.
    public func participantLeft(feedID: UInt64) {
        inbox.add(.left(feedID), counters: counters)
    }

    /// A decrypted frame of a feed (VP8/H264 video or Opus audio). Never blocks.
    public func received(feedID: UInt64, frame: EncodedFrame) {
        inbox.add(.frame(feedID, frame), counters: counters)
    }

    /// The counts so far.
    public var figures: Figures {
        Figures(
            frames: counters.frames.load(ordering: .relaxed),
            videoFramesDropped: counters.videoDropped.load(ordering: .relaxed),
            audioFramesDropped: counters.audioDropped.load(ordering: .relaxed)
        )
    }

    /// Ends the composite: the frames up to now are written and the file is finished.
    public func finish() async -> Report {
        inbox.finish()
        return await result.value()
    }

    // MARK: - Shared state

    enum Event: Sendable {
        case joined(UInt64, String?)
        case left(UInt64)
        case frame(UInt64, EncodedFrame)
    }

    final class Counters: Sendable {
        let frames = Atomic<Int>(0)
        let videoDropped = Atomic<Int>(0)
        let audioDropped = Atomic<Int>(0)
    }

    /// The queue between the receive path and the composite's thread.
    final class Inbox: @unchecked Sendable {
        private struct State {
            var events: [Event] = []
            /// Video admission: dropped when full, resumed per feed at its next keyframe.
            var video = KeyframeGate(limit: LiveComposite.videoQueueLimit)
            var audioQueued = 0
            var finished = false
        }

        // `condition` guards `state`; nothing touches `state` without holding it.
        private let condition = NSCondition()
        private var state = State()

        func add(_ event: Event, counters: Counters) {
            condition.lock()
            defer { condition.unlock() }
            guard !state.finished else { return }
            if case .frame(let feedID, let frame) = event {
                if frame.codec.kind == .audio {
                    guard state.audioQueued < LiveComposite.audioQueueLimit else {
                        counters.audioDropped.add(1, ordering: .relaxed)
                        return
                    }
                    state.audioQueued += 1
                } else {
                    guard state.video.admit(feedID: feedID, isKeyframe: frame.isKeyframe) else {
                        counters.videoDropped.add(1, ordering: .relaxed)
                        return
                    }
                }
            }
            state.events.append(event)
        }

        func finish() {
            condition.lock()
            state.finished = true
            condition.signal()
            condition.unlock()
        }

        /// Sleeps until `deadline` (or the finish), then moves the queued events into `batch`;
        /// tells whether the composite is finished.
        func take(into batch: inout [Event], until deadline: Date) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            while !state.finished, condition.wait(until: deadline) {}
            swap(&batch, &state.events)
            state.video.drained()
            state.audioQueued = 0
            return state.finished
        }
    }

    /// Where the thread leaves the report for ``finish()``.
    final class Result: Sendable {
        private enum State {
            case running
            case waiting(CheckedContinuation<Report, Never>)
            case done(Report)
        }
        private let state = Mutex(State.running)

        func deliver(_ report: Report) {
            let waiter: CheckedContinuation<Report, Never>? = state.withLock { state in
                defer { state = .done(report) }
                if case .waiting(let continuation) = state { return continuation }
                return nil
            }
            waiter?.resume(returning: report)
        }

        func value() async -> Report {
            await withCheckedContinuation { continuation in
                let done: Report? = state.withLock { state in
                    if case .done(let report) = state { return report }
                    state = .waiting(continuation)
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        }
    }

    /// Hands the worker, made on the caller's thread, to the composite's thread, which is its
    /// only user from then on.
    private final class Handover: @unchecked Sendable {
        let value: LiveWorker
        init(_ value: LiveWorker) { self.value = value }
    }
}

/// The composite's thread: decodes, keeps each participant's latest picture and a little of
/// their audio, and renders and encodes a frame every 1/fps.
final class LiveWorker {
    private struct Participant {
        var index: Int
        let video = ReceivedVideoDecoder()
        var audio: MediaStreamDecoder?
        var picture: VideoFrame?
        var pictureFrame = 0
        /// Interleaved stereo samples not yet mixed.
        var samples: [Float] = []
    }

    /// Audio a participant may run ahead of the mix before the oldest is dropped (jitter in
    /// arrival, in samples per channel); it is then cut back to `audioKeep`.
    private static let audioAhead = 14_400
    private static let audioKeep = 4_800

    private let options: CompositeOptions
    private let encoder: MediaFileEncoder
    private let renderer: TileRenderer
    private let counters: LiveComposite.Counters
    /// Participants in the call, by feed, in join order for the grid.
    private var participants: [UInt64: Participant] = [:]
    private var order: [UInt64] = []
    private var nextIndex = 0
    private var framesWritten = 0
    private var samplesWritten = 0
    private var problems: [String] = []
    private var failed = false

    init(
        options: CompositeOptions,
        encoder: MediaFileEncoder,
        renderer: TileRenderer,
        counters: LiveComposite.Counters
    ) {
        self.options = options
        self.encoder = encoder
        self.renderer = renderer
        self.counters = counters
    }

    func run(_ inbox: LiveComposite.Inbox) -> LiveComposite.Report {
        let start = ContinuousClock.now
        let frameDuration = Duration.seconds(1) / options.frameRate
        var batch: [LiveComposite.Event] = []
        var finished = false
        while !finished {
            // The next frame is due at its own time from the start, whatever the last took.
            let due = start + frameDuration * (framesWritten + 1)
            let wait = ContinuousClock.now.duration(to: due)
            let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
            batch.removeAll(keepingCapacity: true)
            finished = inbox.take(into: &batch, until: Date(timeIntervalSinceNow: max(0, seconds)))
            for event in batch { handle(event) }
            let elapsed = start.duration(to: .now)
            let frames = Int(elapsed / frameDuration)
            while !failed, framesWritten < frames { render() }
            if !failed { write { () throws(MediaFileError) in try encoder.flush() } }
        }
        do {
            try renderer.finish()
        } catch {
            problems.append(error.description)
        }
        write { () throws(MediaFileError) in try encoder.finish() }
        // Now rather than when the thread lets the worker (and its renderer) go.
        renderer.removeNameFiles()
        return LiveComposite.Report(
            path: encoder.path,
            frames: encoder.framesWritten,
            duration: Double(encoder.framesWritten) / Double(options.frameRate),
            videoFramesDropped: counters.videoDropped.load(ordering: .relaxed),
            audioFramesDropped: counters.audioDropped.load(ordering: .relaxed),
            problems: problems
        )
    }

    private func handle(_ event: LiveComposite.Event) {
        switch event {
        case .joined(let feedID, let display):
            join(feedID, display)
        case .left(let feedID):
            participants[feedID] = nil
            order.removeAll { $0 == feedID }
        case .frame(let feedID, let frame):
            if participants[feedID] == nil { join(feedID, nil) }
            guard var participant = participants[feedID] else { return }
            if frame.codec.kind == .audio {
                decodeAudio(frame, &participant)
            } else {
                decodeVideo(frame, &participant)
            }
            participants[feedID] = participant
        }
    }

    private func join(_ feedID: UInt64, _ display: String?) {
        guard participants[feedID] == nil else { return }
        let index = nextIndex
        nextIndex += 1
        do {
            try renderer.setName(display ?? "feed \(feedID)", of: index)
        } catch {
            problems.append(error.description)
        }
        participants[feedID] = Participant(index: index)
        order.append(feedID)
    }

    private func decodeVideo(_ frame: EncodedFrame, _ participant: inout Participant) {
        do {
            if let picture = try participant.video.decode(frame) {
                participant.picture = picture
                participant.pictureFrame = framesWritten
            }
        } catch {
            note("video of participant \(participant.index + 1): \(error.reason); resumed at the next keyframe")
        }
    }

    private func decodeAudio(_ frame: EncodedFrame, _ participant: inout Participant) {
        if participant.audio == nil {
            participant.audio = try? MediaStreamDecoder(codec: .opus, name: "live opus")
        }
        guard let decoder = participant.audio else { return }
        do {
            for case .audio(let samples, let channels, _) in try decoder.decode(frame) where channels > 0 {
                let count = samples.count / channels
                participant.samples.reserveCapacity(participant.samples.count + count * 2)
                for index in 0..<count {
                    let left = Float(samples[index * channels]) / 32_768
                    let right = channels > 1 ? Float(samples[index * channels + 1]) / 32_768 : left
                    participant.samples.append(left)
                    participant.samples.append(right)
                }
            }
        } catch {
            note("audio of participant \(participant.index + 1): \(error.reason); composed as silence")
        }
        if participant.samples.count > Self.audioAhead * 2 {
            participant.samples.removeFirst(participant.samples.count - Self.audioKeep * 2)
        }
    }

    /// Renders, mixes and encodes the next output frame.
    private func render() {
        var tiles: [TileRenderer.Tile] = []
        var pictures: [Int: VideoFrame] = [:]
        let stale = Int(VideoComposition.staleAfter * Double(options.frameRate))
        for feedID in order {
            guard let participant = participants[feedID] else { continue }
            var tile = TileRenderer.Tile(participant: participant.index, pictureSize: nil)
            if let picture = participant.picture, framesWritten - participant.pictureFrame <= stale {
                tile.pictureSize = .init(width: picture.width, height: picture.height)
                pictures[participant.index] = picture
            }
            tiles.append(tile)
        }
        do {
            try renderer.render(tiles, pictures: pictures)
        } catch {
            problems.append(error.description)
            failed = true
            return
        }
        framesWritten += 1
        counters.frames.store(framesWritten, ordering: .relaxed)
        let due = framesWritten * MediaFileEncoder.audioSampleRate / options.frameRate
        let count = due - samplesWritten
        guard count > 0 else { return }
        var mix = [Float](repeating: 0, count: count * 2)
        for feedID in order {
            guard var participant = participants[feedID], !participant.samples.isEmpty else { continue }
            let available = min(participant.samples.count, mix.count)
            for index in 0..<available { mix[index] += participant.samples[index] }
            participant.samples.removeFirst(available)
            participants[feedID] = participant
        }
        for index in mix.indices { mix[index] = max(-1, min(1, mix[index])) }
        samplesWritten = due
        write { () throws(MediaFileError) in try encoder.writeAudio(mix) }
    }

    private func write(_ body: () throws(MediaFileError) -> Void) {
        do {
            try body()
        } catch {
            note("\(error.path): \(error.reason)")
            failed = true
        }
    }

    /// A problem, once per kind of line.
    private func note(_ line: String) {
        if !problems.contains(line) { problems.append(line) }
    }
}
