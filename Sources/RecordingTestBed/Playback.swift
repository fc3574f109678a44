public import ConclaveCore
import ConclaveRTP
public import ConclaveRecorder

/// What a recorder is handed while a call runs, in the order a `RecordingSession` hands it.
public enum RecorderInput: Sendable {
    /// A frame or sender report of a publisher.
    case media(SimulatedPublisher.Event)
    /// A publisher appeared in the room (Unix microseconds).
    case joined(feedID: UInt64, display: String?, time: Int64)
    /// A publisher left the room (Unix microseconds).
    case left(feedID: UInt64, time: Int64)

    public var time: Int64 {
        switch self {
        case .media(let event): event.time
        case .joined(_, _, let time), .left(_, let time): time
        }
    }
}

/// Feeds `events` to `recorder` in arrival order; `lostBefore` says how many frames the receiver
/// lost before a frame.
public func play(
    _ events: [SimulatedPublisher.Event],
    into recorder: CallRecorder,
    from start: Int64,
    lostBefore: (MediaKind, EncodedFrame) -> Int = { _, _ in 0 }
) {
    play(inputs: events.map(RecorderInput.media), into: recorder, from: start, lostBefore: lostBefore)
}

/// Feeds media and room events to `recorder` in arrival order (ties keep their given order).
public func play(
    inputs: [RecorderInput],
    into recorder: CallRecorder,
    from start: Int64,
    lostBefore: (MediaKind, EncodedFrame) -> Int = { _, _ in 0 }
) {
    let ordered = inputs.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(
        \.element
    )
    // As RecordingSession feeds it: batches of 60 ms, each followed by a commit, and a tick every
    // 500 ms.
    var nextTick = start + 500_000
    var nextCommit = start + 60_000
    for input in ordered {
        while input.time >= nextCommit {
            recorder.commit()
            nextCommit += 60_000
        }
        while input.time >= nextTick {
            recorder.tick(now: nextTick)
            nextTick += 500_000
        }
        switch input {
        case .media(.frame(let feed, let kind, let frame, let time)):
            recorder.frame(
                feedID: feed,
                kind: kind,
                frame: frame,
                arrival: time,
                framesLostBefore: lostBefore(kind, frame)
            )
        case .media(.senderReport(let feed, let kind, let ntp, let rtp, let time)):
            recorder.senderReport(
                SenderReportTime(ntp: NTPTimestamp(rawValue: ntp), rtpTimestamp: rtp),
                feedID: feed,
                kind: kind,
                arrival: time
            )
        case .joined(let feed, let display, let time):
            recorder.participantJoined(feedID: feed, display: display, at: time)
        case .left(let feed, let time):
            recorder.participantLeft(feedID: feed, at: time)
        }
    }
    recorder.commit()
}
