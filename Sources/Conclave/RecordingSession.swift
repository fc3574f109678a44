import ConclaveCore
import ConclaveRTP
import ConclaveRecorder
import Foundation
import Logging
import Synchronization

/// Feeds a ``CallRecorder`` from a call: the call's observer callbacks are queued and a task of
/// the session's own writes them, so the call's receive loop never waits for the disk.
///
/// The queue is drained in batches, every ``batchInterval``, not frame by frame: waking a task
/// for each of the 80 frames a second of every participant costs more than writing them, and a
/// batch lets each journal take its frames with one `write`. A recorder killed mid-batch loses
/// that batch's frames only; the journals are synced every second regardless.
///
/// Arrival times on the media clock are turned into wall-clock times once, at creation, so the
/// journals and the manifest carry times a person (and `repair`) can use.
public final class RecordingSession: CallMediaObserver {
    private enum Event: Sendable {
        case joined(UInt64, String?, Int64)
        case left(UInt64, Int64)
        case frame(UInt64, MediaKind, EncodedFrame, Int64, keyEpoch: UInt64?)
        case undecryptable(UInt64, MediaKind, String, Int64)
        case senderReport(UInt64, MediaKind, UInt64, UInt32, Int64)
    }

    /// One subscribed stream: a feed's m-line.
    private struct StreamKey: Hashable {
        var feedID: UInt64
        var mid: String
    }

    /// What the callbacks share with the worker, under one lock.
    private struct Inbox {
        var events: [Event] = []
        var kindByStream: [StreamKey: MediaKind] = [:]
        var heldReports: [StreamKey: SubscribedSenderReport] = [:]
        var finished = false
    }

    /// How often the queued events are written. 100 ms: each batch costs a task wakeup, one
    /// `write` per journal and a container flush whatever its size, which at one participant was
    /// most of the recorder's own CPU with 50 ms batches; a killed recorder loses at most this much
    /// from its journals (the live files lose their open cluster, 500 ms, anyway).
    static let batchInterval = Duration.milliseconds(100)
    /// How often the recorder's timer work runs (file opening, container flushes, journal syncs).
    static let tickInterval: Int64 = 500_000

    private let worker: Task<RecordingManifest, Never>
    private let inbox = InboxBox()

    /// The inbox, shared by reference with the worker task.
    private final class InboxBox: Sendable {
        let state = Mutex(Inbox())
        func withLock<R>(_ body: (inout Inbox) -> R) -> R { state.withLock { body(&$0) } }
    }
    private let wallAtOrigin: Int64
    private let mediaAtOrigin: MonotonicTime

    /// Starts recording into `configuration.directory`.
    ///
    /// - Parameter requestKeyframe: asks a feed's sender for a video keyframe (the caller sends a
    ///   PLI through its subscriber); called at most once a second per feed.
    public init(
        configuration: CallRecorder.Configuration,
        logger: Logger,
        requestKeyframe: @escaping @Sendable (UInt64) -> Void = { _ in }
    ) throws(RecordingError) {
        let media = MediaClock.now()
        let wall = Int64(Date().timeIntervalSince1970 * 1_000_000)
        mediaAtOrigin = media
        wallAtOrigin = wall
        let recorder = try CallRecorder(
            configuration: configuration,
            startTime: wall,
            logger: logger,
            requestKeyframe: requestKeyframe
        )
        worker = Task { [inbox] in
            var last: Int64 = wall
            var lastTick: Int64 = wall
            var batch: [Event] = []
            while true {
                let finished = inbox.withLock { inbox in
                    swap(&batch, &inbox.events)
                    return inbox.finished
                }
                for event in batch {
                    switch event {
                    case .joined(let feed, let display, let time):
                        recorder.participantJoined(feedID: feed, display: display, at: time)
                    case .left(let feed, let time):
                        recorder.participantLeft(feedID: feed, at: time)
                    case .frame(let feed, let kind, let frame, let time, let keyEpoch):
                        recorder.frame(feedID: feed, kind: kind, frame: frame, arrival: time, keyEpoch: keyEpoch)
                        last = max(last, time)
                    case .undecryptable(let feed, let kind, let reason, let time):
                        recorder.undecryptable(feedID: feed, kind: kind, reason: reason, at: time)
                    case .senderReport(let feed, let kind, let ntp, let rtp, let time):
                        recorder.senderReport(feedID: feed, kind: kind, ntp: ntp, rtpTimestamp: rtp, arrival: time)
                    }
                }
                batch.removeAll(keepingCapacity: true)
                recorder.commit()
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                if finished { return recorder.finish(at: max(last, now)) }
                if now - lastTick >= Self.tickInterval {
                    recorder.tick(now: now)
                    lastTick = now
                    last = max(last, now)
                }
                // Cancelled by finish(): the loop goes round once more to take the last events.
                try? await Task.sleep(for: Self.batchInterval)
            }
        }
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
                    .frame(received.feedID, kind, received.frame, arrival, keyEpoch: received.keyEpoch)
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
        .senderReport(report.feedID, kind, report.report.ntpTimestamp.rawValue, report.report.rtpTimestamp, arrival)
    }

    /// Ends the recording: closes every file, verifies it, removes verified journals and writes
    /// the final manifest, which it returns.
    public func finish() async -> RecordingManifest {
        inbox.withLock { $0.finished = true }
        worker.cancel()
        return await worker.value
    }
}
