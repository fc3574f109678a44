public import ConclaveCore
import Foundation

/// Admission of received video into a bounded queue: when the queue is full a frame is dropped,
/// and so is every later frame of the same feed up to its next keyframe, because a decoder cannot
/// use what follows a gap. Other feeds are not held back by one feed's gap.
///
/// The queue's owner counts what it takes out with ``drained()``; the gate only decides.
public struct KeyframeGate: Sendable {
    /// The most frames queued at once.
    public let limit: Int
    /// Frames admitted since the last ``drained()``.
    public private(set) var queued = 0
    /// Feeds whose video was dropped: their frames are dropped up to the next keyframe.
    private var waitingForKeyframe: Set<UInt64> = []

    public init(limit: Int) { self.limit = limit }

    /// Whether a frame of `feedID` may be queued; counts it when it may.
    public mutating func admit(feedID: UInt64, isKeyframe: Bool) -> Bool {
        if waitingForKeyframe.contains(feedID) {
            guard isKeyframe, queued < limit else { return false }
            waitingForKeyframe.remove(feedID)
        } else if queued >= limit {
            waitingForKeyframe.insert(feedID)
            return false
        }
        queued += 1
        return true
    }

    /// The queue was emptied.
    public mutating func drained() { queued = 0 }

    /// A feed is gone: nothing is kept about it.
    public mutating func forget(feedID: UInt64) { waitingForKeyframe.remove(feedID) }
}

/// One participant's received video (VP8 or H264) decoded to I420 pictures with libavcodec.
///
/// It starts, and after a decoding failure or a change of codec restarts, at a keyframe: frames
/// before that are skipped rather than decoded into garbage. Not thread-safe: one thread owns it.
public final class ReceivedVideoDecoder {
    private var decoder: MediaStreamDecoder?
    /// The decoder failed: it is recreated at the next keyframe.
    private var broken = false

    public init() {}

    /// Decodes a frame; returns the newest picture it completed (nil while waiting for a keyframe
    /// or when the decoder holds the picture back). A failure is thrown once; decoding then
    /// resumes at the next keyframe.
    public func decode(_ frame: EncodedFrame) throws(MediaFileError) -> VideoFrame? {
        try decode(frame, fitting: nil)?.picture
    }

    /// Decodes a frame like ``decode(_:)``; a picture larger than what fills `box` comes out
    /// scaled down to it (``PictureFit``), with the size it was decoded at.
    public func decode(_ frame: EncodedFrame, fitting box: PictureSize?) throws(MediaFileError) -> DecodedPicture? {
        if broken || decoder?.stream.codec != frame.codec {
            guard frame.isKeyframe else { return nil }
            decoder = try? MediaStreamDecoder(codec: frame.codec, name: "received \(frame.codec)")
            broken = decoder == nil
        }
        guard let decoder else { return nil }
        decoder.downscaleBox = box
        do {
            var newest: DecodedPicture?
            for case .video(let picture, _) in try decoder.decode(frame) {
                newest = DecodedPicture(
                    picture,
                    decodedSize: decoder.lastDecodedSize ?? PictureSize(width: picture.width, height: picture.height)
                )
            }
            return newest
        } catch {
            broken = true
            throw error
        }
    }
}

/// Received video of every participant decoded on a thread of its own, for a consumer that shows
/// pictures as they come (the call window).
///
/// The receive path only appends to a bounded queue under a lock and signals the thread; it never
/// waits for decoding. When decoding falls behind, frames are dropped (counted) through a
/// ``KeyframeGate`` and the feed resumes at its next keyframe; of a backlog only each feed's newest
/// picture is handed on. The same gate and decoder serve ConclaveCompose's live composite, whose
/// own thread drains its queue once per output frame instead.
public final class VideoDecodeQueue: Sendable {
    /// Receives each feed's newest picture, on the queue's thread.
    public typealias Sink = @Sendable (_ feedID: UInt64, _ picture: DecodedPicture) -> Void
    /// The box a feed's pictures are drawn in, asked for each picture; nil: decoded size.
    public typealias Fitting = @Sendable (_ feedID: UInt64) -> PictureSize?
    /// Receives decoding failures (one line each), on the queue's thread.
    public typealias ProblemSink = @Sendable (_ feedID: UInt64, _ problem: String) -> Void

    /// The most frames queued by default: about a second of four participants at 30 fps.
    public static let defaultLimit = 120

    private let inbox: Inbox
    private let done: Done

    /// Starts the thread (named `name`).
    public init(
        name: String,
        limit: Int = VideoDecodeQueue.defaultLimit,
        fitting: @escaping Fitting = { _ in nil },
        pictures: @escaping Sink,
        problems: @escaping ProblemSink = { _, _ in }
    ) {
        let inbox = Inbox(limit: limit)
        let done = Done()
        self.inbox = inbox
        self.done = done
        let thread = Thread {
            Self.run(inbox, fitting: fitting, pictures: pictures, problems: problems)
            done.signal()
        }
        thread.name = name
        thread.start()
    }

    /// A received video frame of `feedID`. Never blocks; dropped when the queue is full.
    public func add(feedID: UInt64, frame: EncodedFrame) {
        inbox.add(.frame(feedID, frame))
    }

    /// A feed is gone: its decoder is released.
    public func forget(feedID: UInt64) {
        inbox.add(.forget(feedID))
    }

    /// Frames dropped because decoding fell behind (and the frames after them up to a keyframe).
    public var framesDropped: Int { inbox.dropped }

    /// Stops the thread once it has decoded what is queued.
    public func finish() async {
        inbox.finish()
        await done.wait()
    }

    private static func run(_ inbox: Inbox, fitting: Fitting, pictures: Sink, problems: ProblemSink) {
        var decoders: [UInt64: ReceivedVideoDecoder] = [:]
        var batch: [Inbox.Event] = []
        var newest: [UInt64: DecodedPicture] = [:]
        var finished = false
        while !finished {
            batch.removeAll(keepingCapacity: true)
            finished = inbox.take(into: &batch)
            for event in batch {
                switch event {
                case .forget(let feedID):
                    decoders[feedID] = nil
                    newest[feedID] = nil
                case .frame(let feedID, let frame):
                    let decoder = decoders[feedID] ?? ReceivedVideoDecoder()
                    decoders[feedID] = decoder
                    do {
                        if let picture = try decoder.decode(frame, fitting: fitting(feedID)) {
                            newest[feedID] = picture
                        }
                    } catch {
                        problems(feedID, "\(error.reason); resumed at the next keyframe")
                    }
                }
            }
            for (feedID, picture) in newest { pictures(feedID, picture) }
            newest.removeAll(keepingCapacity: true)
        }
    }

    /// The queue between the receive path and the decoding thread.
    private final class Inbox: @unchecked Sendable {
        enum Event {
            case frame(UInt64, EncodedFrame)
            case forget(UInt64)
        }

        private struct State {
            var events: [Event] = []
            var gate: KeyframeGate
            var dropped = 0
            var finished = false
        }

        // `condition` guards `state`; nothing touches `state` without holding it.
        private let condition = NSCondition()
        private var state: State

        init(limit: Int) { state = State(gate: KeyframeGate(limit: limit)) }

        var dropped: Int {
            condition.lock()
            defer { condition.unlock() }
            return state.dropped
        }

        func add(_ event: Event) {
            condition.lock()
            defer { condition.unlock() }
            guard !state.finished else { return }
            switch event {
            case .frame(let feedID, let frame):
                guard state.gate.admit(feedID: feedID, isKeyframe: frame.isKeyframe) else {
                    state.dropped += 1
                    return
                }
            case .forget(let feedID):
                state.gate.forget(feedID: feedID)
            }
            state.events.append(event)
            if state.events.count == 1 { condition.signal() }
        }

        func finish() {
            condition.lock()
            state.finished = true
            condition.signal()
            condition.unlock()
        }

        /// Sleeps until something is queued (or the finish), then moves it into `batch`; tells
        /// whether the queue is finished.
        func take(into batch: inout [Event]) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            while !state.finished, state.events.isEmpty { condition.wait() }
            swap(&batch, &state.events)
            state.gate.drained()
            return state.finished
        }
    }

    /// The thread's end, awaited by ``finish()``.
    private final class Done: @unchecked Sendable {
        // `lock` guards both properties.
        private let lock = NSLock()
        private var ended = false
        private var waiters: [CheckedContinuation<Void, Never>] = []

        func signal() {
            lock.lock()
            ended = true
            let waiting = waiters
            waiters = []
            lock.unlock()
            for waiter in waiting { waiter.resume() }
        }

        func wait() async {
            await withCheckedContinuation { continuation in
                lock.lock()
                if ended {
                    lock.unlock()
                    continuation.resume()
                } else {
                    waiters.append(continuation)
                    lock.unlock()
                }
            }
        }
    }
}
