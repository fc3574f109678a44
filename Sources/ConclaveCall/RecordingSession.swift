import ConclaveCore
import ConclavePeerConnection
import ConclaveRTP
import ConclaveRecorder
import Foundation
import Logging
import Synchronization

/// Feeds a ``CallRecorder`` from a call: the call's observer callbacks are queued and a thread of
/// the session's own writes them, so the call's receive loop never waits for the disk.
///
/// The recorder owns libavformat and the journals, so it lives on one thread, which sleeps on a
/// condition variable rather than polling:
/// - While frames flow it takes them in batches, not frame by frame: waking for each of the 80
///   frames a second of every participant costs more than writing them, and a batch lets each
///   journal take its frames with one `write`. A recorder killed mid-batch loses that batch's
///   frames only; the batches are as long as ``maximumLoss`` allows (see `init`).
/// - When a batch comes up empty (nobody is sending) it sleeps until the next event or the next
///   timer tick (``tickInterval``: file opening, container flushes, journal syncs), so an idle
///   recorder wakes twice a second, not ten times.
/// - The first event after such a sleep wakes it (one signal per quiet spell); the events that
///   follow never signal.
///
/// A `Task.sleep` loop did the same with far more wakeups: each sleep went through Dispatch's
/// timer thread and a worker thread, about 55 wakeups a second in an empty room.
///
/// Arrival times on the media clock are turned into wall-clock times once, at creation, so the
/// journals and the manifest carry times a person (and `repair`) can use.
public final class RecordingSession: CallMediaObserver {
    private enum Event: Sendable {
        case joined(UInt64, String?, Int64)
        case left(UInt64, Int64)
        case frame(UInt64, MediaKind, EncodedFrame, Int64, keyEpoch: UInt64?, lostBefore: Int)
        case undecryptable(UInt64, MediaKind, String, Int64)
        case senderReport(UInt64, MediaKind, SenderReportTime, Int64)
        case keyEpoch(UInt64, Int64)
    }

    /// One subscribed stream: a feed's m-line.
    private struct StreamKey: Hashable {
        var feedID: UInt64
        var mid: String
    }

    /// What the callbacks share with the recorder thread, under the inbox's condition lock.
    private struct Inbox {
        var events: [Event] = []
        var kindByStream: [StreamKey: MediaKind] = [:]
        var heldReports: [StreamKey: SubscribedSenderReport] = [:]
        var finished = false
        /// The thread sleeps until signalled (or a tick is due): the next event must signal.
        var idle = false
    }

    /// The most a `kill -9` may cost the journals: the datagrams still waiting in the socket
    /// (receive batching) and the events queued for the next batch. Each batch costs a wakeup,
    /// one `write` per journal and a container flush whatever its size, so batches are as long as
    /// this allows. (The live files lose their open cluster, 500 ms, anyway.)
    static let maximumLoss = Duration.milliseconds(100)
    /// The shortest batch, whatever the receive side's delay.
    static let minimumBatch = Duration.milliseconds(20)
    /// How often the recorder's timer work runs (file opening, container flushes, journal syncs).
    static let tickInterval: Int64 = 500_000

    private let inbox = InboxBox()
    private let result = ResultBox()
    /// The manifest as of the recorder thread's last tick, for status output (``snapshot()``).
    private let latest = LatestManifest()

    /// The last manifest snapshot, shared by reference with the recorder thread. The thread
    /// builds a new one only when ``snapshot()`` was called since the last: a recorder nobody
    /// watches (`--status none`) pays nothing for it.
    private final class LatestManifest: Sendable {
        let value = Mutex<RecordingManifest?>(nil)
        let requested = Atomic<Bool>(false)
    }

    /// The inbox and its condition variable, shared by reference with the recorder thread.
    private final class InboxBox: @unchecked Sendable {
        // `condition` guards `state`; nothing touches `state` without holding it.
        let condition = NSCondition()
        private var state = Inbox()

        /// Runs `body` under the lock; signals the recorder thread if it sleeps idle and `body`
        /// queued an event.
        func withLock<R>(_ body: (inout Inbox) -> R) -> R {
            condition.lock()
            defer { condition.unlock() }
            let wasEmpty = state.events.isEmpty
            let value = body(&state)
            if state.idle, wasEmpty, !state.events.isEmpty {
                state.idle = false
                condition.signal()
            }
            return value
        }

        /// Ends the recording: wakes the thread whatever it waits for.
        func finish() {
            condition.lock()
            state.finished = true
            condition.signal()
            condition.unlock()
        }

        /// Sleeps until an event is queued (true), or until `deadline` or the finish (false).
        func waitForEvent(until deadline: Date) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            guard state.events.isEmpty else { return true }
            state.idle = true
            while state.idle, !state.finished, condition.wait(until: deadline) {}
            state.idle = false
            return !state.events.isEmpty && !state.finished
        }

        /// Waits until `deadline` or the finish, then moves the queued events into `batch`;
        /// tells whether the recording is finished.
        func take(into batch: inout [Event], deadline: Date) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            while !state.finished, condition.wait(until: deadline) {}
            swap(&batch, &state.events)
            return state.finished
        }
    }

    /// Where the recorder thread leaves the final manifest for ``finish()``.
    private final class ResultBox: Sendable {
        private enum State {
            case running
            case waiting(CheckedContinuation<RecordingManifest, Never>)
            case done(RecordingManifest)
        }
        private let state = Mutex(State.running)

        func deliver(_ manifest: RecordingManifest) {
            let waiter: CheckedContinuation<RecordingManifest, Never>? = state.withLock { state in
                defer { state = .done(manifest) }
                if case .waiting(let continuation) = state { return continuation }
                return nil
            }
            waiter?.resume(returning: manifest)
        }

        func value() async -> RecordingManifest {
            await withCheckedContinuation { continuation in
                let done: RecordingManifest? = state.withLock { state in
                    if case .done(let manifest) = state { return manifest }
                    state = .waiting(continuation)
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        }
    }

    /// Where the recorder's keyframe requests go, set after creation (``setKeyframeRequester(_:)``):
    /// the subscription that can send them is created after the session, as it takes the session
    /// as an observer.
    private final class KeyframeRequester: Sendable {
        private let target: Mutex<(@Sendable (UInt64) -> Void)?>

        init(_ target: (@Sendable (UInt64) -> Void)?) {
            self.target = Mutex(target)
        }

        func set(_ target: @escaping @Sendable (UInt64) -> Void) {
            self.target.withLock { $0 = target }
        }

        /// Called on the recorder thread; the target runs outside the lock.
        func request(_ feedID: UInt64) {
            target.withLock { $0 }?(feedID)
        }
    }

    private let keyframeRequester: KeyframeRequester
    private let wallAtOrigin: Int64
    private let mediaAtOrigin: MonotonicTime

    /// Starts recording into `configuration.directory`.
    ///
    /// - Parameters:
    ///   - datagramDelay: the longest a datagram waits in the socket before the call reads it
    ///     (its transport's `ReceiveBatching.maximumDelay`, zero without batching); batches are
    ///     ``maximumLoss`` minus this (60 ms for `record`, 100 ms for `join --record`).
    ///   - requestKeyframe: asks a feed's sender for a video keyframe (the caller sends a PLI
    ///     through its subscriber, e.g. ``RoomSubscription/requestKeyframe(feedID:)``); called on
    ///     the recorder thread, at most once a second per feed, so it must not block. Nil to set
    ///     it later with ``setKeyframeRequester(_:)``; until then requests are dropped.
    public init(
        configuration: CallRecorder.Configuration,
        logger: Logger,
        datagramDelay: Duration = .zero,
        requestKeyframe: (@Sendable (UInt64) -> Void)? = nil
    ) throws(RecordingError) {
        let media = MediaClock.now()
        let wall = Int64(Date().timeIntervalSince1970 * 1_000_000)
        mediaAtOrigin = media
        wallAtOrigin = wall
        let requester = KeyframeRequester(requestKeyframe)
        keyframeRequester = requester
        let recorder = try CallRecorder(
            configuration: configuration,
            startTime: wall,
            logger: logger,
            requestKeyframe: { feedID in requester.request(feedID) }
        )
        // Handed over whole: from here on the recorder thread is its only user.
        nonisolated(unsafe) let owned = recorder
        let batch = max(Self.maximumLoss - datagramDelay, Self.minimumBatch)
        let batchSeconds = Double(batch.components.seconds) + Double(batch.components.attoseconds) / 1e18
        latest.value.withLock { $0 = owned.manifest() }
        let thread = Thread { [inbox, result, latest] in
            result.deliver(
                Self.run(owned, inbox: inbox, latest: latest, start: wall, batchInterval: batchSeconds)
            )
        }
        thread.name = "conclave-recorder"
        thread.start()
    }

    /// The recorder thread's loop; returns the final manifest.
    private static func run(
        _ recorder: CallRecorder,
        inbox: InboxBox,
        latest: LatestManifest,
        start: Int64,
        batchInterval: TimeInterval
    ) -> RecordingManifest {
        var last = start
        var lastTick = start
        var batch: [Event] = []
        var flowing = false
        while true {
            let nextTick = Date(timeIntervalSince1970: Double(lastTick + tickInterval) / 1_000_000)
            let finished: Bool
            if flowing {
                finished = inbox.take(into: &batch, deadline: min(Date().addingTimeInterval(batchInterval), nextTick))
            } else if inbox.waitForEvent(until: nextTick) {
                // The first event of a quiet spell: let a batch gather before writing.
                flowing = true
                continue
            } else {
                finished = inbox.take(into: &batch, deadline: .distantPast)
            }
            flowing = !batch.isEmpty
            for event in batch {
                switch event {
                case .joined(let feed, let display, let time):
                    recorder.participantJoined(feedID: feed, display: display, at: time)
                case .left(let feed, let time):
                    recorder.participantLeft(feedID: feed, at: time)
                case .frame(let feed, let kind, let frame, let time, let keyEpoch, let lost):
                    recorder.frame(
                        feedID: feed,
                        kind: kind,
                        frame: frame,
                        arrival: time,
                        keyEpoch: keyEpoch,
                        framesLostBefore: lost
                    )
                    last = max(last, time)
                case .undecryptable(let feed, let kind, let reason, let time):
                    recorder.undecryptable(feedID: feed, kind: kind, reason: reason, at: time)
                case .senderReport(let feed, let kind, let report, let time):
                    recorder.senderReport(report, feedID: feed, kind: kind, arrival: time)
                case .keyEpoch(let epoch, let time):
                    recorder.keyEpoch(epoch, from: time)
                }
            }
            batch.removeAll(keepingCapacity: true)
            recorder.commit()
            let wallNow = Int64(Date().timeIntervalSince1970 * 1_000_000)
            if finished { return recorder.finish(at: max(last, wallNow)) }
            if wallNow - lastTick >= tickInterval {
                recorder.tick(now: wallNow)
                if latest.requested.exchange(false, ordering: .relaxed) {
                    let manifest = recorder.manifest()
                    latest.value.withLock { $0 = manifest }
                }
                lastTick = wallNow
                last = max(last, wallNow)
            }
        }
    }

    /// Sets where the recorder's keyframe requests go (replacing any earlier target): typically
    /// a task calling ``RoomSubscription/requestKeyframe(feedID:)`` on a weakly held subscription,
    /// once the subscription that receives the call exists.
    ///
    /// Without it a recording that misses a keyframe (frames that did not decrypt, a new segment)
    /// waits for the sender's next periodic keyframe, and with a sender that sends keyframes only
    /// when asked it records no video at all. `target` is called on the recorder thread, so it
    /// must not block.
    public func setKeyframeRequester(_ target: @escaping @Sendable (UInt64) -> Void) {
        keyframeRequester.set(target)
    }

    /// Wall-clock microseconds of a media-clock instant.
    private func wallClock(_ time: MonotonicTime) -> Int64 {
        wallAtOrigin + (time.microseconds - mediaAtOrigin.microseconds)
    }

    private var now: Int64 { wallClock(MediaClock.now()) }

    private func enqueue(_ event: Event) {
        inbox.withLock { inbox in
            if !inbox.finished { inbox.events.append(event) }
        }
    }

    /// The call key of `epoch` became (or becomes) current at `validFrom`: the manifest lists it
    /// (``RecordingManifest/keyEpochTimes``). Give it ``CallKeyCoordinator``'s epochs.
    public func keyEpochApplied(_ epoch: UInt64, validFrom: Date) {
        enqueue(.keyEpoch(epoch, Int64((validFrom.timeIntervalSince1970 * 1_000_000).rounded())))
    }

    public func participantJoined(feedID: UInt64, display: String?) {
        enqueue(.joined(feedID, display, now))
    }

    public func participantLeft(feedID: UInt64) {
        enqueue(.left(feedID, now))
    }

    public func received(_ media: ReceivedMedia) {
        switch media {
        case .frame(let received):
            let kind = received.frame.codec.kind
            let arrival = wallClock(received.arrival)
            inbox.withLock { inbox in
                guard !inbox.finished else { return }
                let key = StreamKey(feedID: received.feedID, mid: received.mid)
                if inbox.kindByStream[key] == nil {
                    // The first frame tells the stream's kind: a sender report held until now
                    // goes first, as it arrived first.
                    inbox.kindByStream[key] = kind
                    if let held = inbox.heldReports.removeValue(forKey: key) {
                        inbox.events.append(Self.event(held, kind: kind, arrival: wallClock(held.arrival)))
                    }
                }
                inbox.events.append(
                    .frame(
                        received.feedID,
                        kind,
                        received.frame,
                        arrival,
                        keyEpoch: received.keyEpoch,
                        lostBefore: received.framesLostBefore
                    )
                )
            }
        case .undecryptable(let feedID, _, let codec, let reason):
            enqueue(.undecryptable(feedID, codec.kind, "\(reason)", now))
        }
    }

    public func senderReport(_ report: SubscribedSenderReport) {
        let arrival = wallClock(report.arrival)
        inbox.withLock { inbox in
            guard !inbox.finished else { return }
            let key = StreamKey(feedID: report.feedID, mid: report.mid)
            if let kind = inbox.kindByStream[key] {
                inbox.events.append(Self.event(report, kind: kind, arrival: arrival))
            } else {
                inbox.heldReports[key] = report
            }
        }
    }

    private static func event(_ report: SubscribedSenderReport, kind: MediaKind, arrival: Int64) -> Event {
        .senderReport(report.feedID, kind, SenderReportTime(report.report), arrival)
    }

    /// The recording's manifest for status output: the one built at the recorder's first tick
    /// after the previous call (ticks come twice a second), so a caller asking once a second sees
    /// figures at most about a second old.
    public func snapshot() -> RecordingManifest? {
        latest.requested.store(true, ordering: .relaxed)
        return latest.value.withLock { $0 }
    }

    /// Ends the recording: closes every file, verifies it, removes verified journals and writes
    /// the final manifest, which it returns.
    public func finish() async -> RecordingManifest {
        inbox.finish()
        return await result.value()
    }
}
