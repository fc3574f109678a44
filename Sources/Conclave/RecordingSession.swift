import ConclaveCore
import ConclaveRTP
import ConclaveRecorder
import Foundation
import Logging
import Synchronization

/// Feeds a ``CallRecorder`` from a call: the call's observer callbacks are queued and a task of
/// the session's own writes them, so the call's receive loop never waits for the disk.
///
/// Arrival times on the media clock are turned into wall-clock times once, at creation, so the
/// journals and the manifest carry times a person (and `repair`) can use.
public final class RecordingSession: CallMediaObserver {
    private enum Event: Sendable {
        case joined(UInt64, String?, Int64)
        case left(UInt64, Int64)
        case frame(UInt64, MediaKind, EncodedFrame, Int64)
        case undecryptable(UInt64, MediaKind, String, Int64)
        case senderReport(UInt64, MediaKind, UInt64, UInt32, Int64)
        case tick(Int64)
    }

    private struct Routing {
        var kindByStream: [String: MediaKind] = [:]
        var heldReports: [String: SubscribedSenderReport] = [:]
    }

    private let continuation: AsyncStream<Event>.Continuation
    private let worker: Task<RecordingManifest, Never>
    private let ticker: Task<Void, Never>
    private let routing = Mutex(Routing())
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
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        self.continuation = continuation
        worker = Task { [recorder] in
            var last: Int64 = wall
            for await event in events {
                switch event {
                case .joined(let feed, let display, let time):
                    recorder.participantJoined(feedID: feed, display: display, at: time)
                case .left(let feed, let time):
                    recorder.participantLeft(feedID: feed, at: time)
                case .frame(let feed, let kind, let frame, let time):
                    recorder.frame(feedID: feed, kind: kind, frame: frame, arrival: time)
                    last = max(last, time)
                case .undecryptable(let feed, let kind, let reason, let time):
                    recorder.undecryptable(feedID: feed, kind: kind, reason: reason, at: time)
                case .senderReport(let feed, let kind, let ntp, let rtp, let time):
                    recorder.senderReport(feedID: feed, kind: kind, ntp: ntp, rtpTimestamp: rtp, arrival: time)
                case .tick(let time):
                    recorder.tick(now: time)
                    last = max(last, time)
                }
            }
            return recorder.finish(at: max(last, Int64(Date().timeIntervalSince1970 * 1_000_000)))
        }
        ticker = Task { [continuation] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                continuation.yield(.tick(Int64(Date().timeIntervalSince1970 * 1_000_000)))
            }
        }
    }

    /// Wall-clock microseconds of a media-clock instant.
    private func wallClock(_ time: MonotonicTime) -> Int64 {
        wallAtOrigin + (time.microseconds - mediaAtOrigin.microseconds)
    }

    private var now: Int64 { wallClock(MediaClock.now()) }

    public func participantJoined(feedID: UInt64, display: String?) {
        continuation.yield(.joined(feedID, display, now))
    }

    public func participantLeft(feedID: UInt64) {
        continuation.yield(.left(feedID, now))
    }

    public func received(_ media: ReceivedMedia) {
        switch media {
        case .frame(let received):
            let kind = received.frame.codec.kind
            let held = routing.withLock { routing -> SubscribedSenderReport? in
                let key = "\(received.feedID)/\(received.mid)"
                guard routing.kindByStream[key] == nil else { return nil }
                routing.kindByStream[key] = kind
                return routing.heldReports.removeValue(forKey: key)
            }
            if let held { forward(held, kind: kind) }
            continuation.yield(.frame(received.feedID, kind, received.frame, wallClock(received.arrival)))
        case .undecryptable(let feedID, _, let codec, let reason):
            continuation.yield(.undecryptable(feedID, codec.kind, "\(reason)", now))
        }
    }

    public func senderReport(_ report: SubscribedSenderReport) {
        let kind = routing.withLock { routing -> MediaKind? in
            let key = "\(report.feedID)/\(report.mid)"
            if let kind = routing.kindByStream[key] { return kind }
            routing.heldReports[key] = report
            return nil
        }
        if let kind { forward(report, kind: kind) }
    }

    private func forward(_ report: SubscribedSenderReport, kind: MediaKind) {
        continuation.yield(
            .senderReport(
                report.feedID,
                kind,
                report.report.ntpTimestamp.rawValue,
                report.report.rtpTimestamp,
                wallClock(report.arrival)
            )
        )
    }

    /// Ends the recording: closes every file, verifies it, removes verified journals and writes
    /// the final manifest, which it returns.
    public func finish() async -> RecordingManifest {
        ticker.cancel()
        continuation.finish()
        return await worker.value
    }
}
