import ConclaveCore
import ConclaveE2EE
import Foundation
import JanusProtocol
import Synchronization

/// A snapshot of a call for people and scripts: one per second on `--status json`.
///
/// Times are milliseconds since the call object was created (the command's start, near enough),
/// so scripts can read join and recovery times straight from the lines.
public struct CallStatus: StatusReport, Sendable, Codable, Hashable {
    /// One remote participant, followed across feeds by the `"<userId>:"` prefix of its display.
    public struct Participant: Sendable, Codable, Hashable {
        /// The user id (the display's prefix), or `feed:<id>` when the display has none.
        public var id: String
        public var display: String?
        /// The participant's current feed id (it changes when they rejoin).
        public var feed: UInt64?
        /// Every feed seen for this participant, oldest first.
        public var feeds: [UInt64]
        public var present: Bool
        public var audioCodec: String?
        public var videoCodec: String?
        /// Frames that decrypted (or arrived in clear in a call without end-to-end encryption).
        public var framesDecrypted: Int
        public var audioFrames: Int
        public var videoFrames: Int
        /// Frames that did not decrypt.
        public var undecryptable: Int
        /// Why the last frame that did not decrypt failed.
        public var lastDecryptFailure: String?
        /// ok (decrypting), failing (recent frames fail), waiting (nothing yet).
        public var decryptState: DecryptState
        public var videoFrameRate: Double
        public var kilobitsPerSecond: Double
        /// Lost packets over expected packets so far, 0...1.
        public var loss: Double
        /// When the first decrypted frame arrived.
        public var firstFrameMs: Int?
        /// How long ago the last decrypted frame arrived.
        public var lastFrameAgeMs: Int?
        /// The simulcast layer received of the participant's video (`low`, `medium`, `high`), nil
        /// when the participant does not send simulcast.
        public var layer: String? = nil
    }

    /// One recovery from a fault.
    public struct Recovery: Sendable, Codable, Hashable {
        /// How the call recovered (or, while it has not yet, how it began to).
        public var kind: RecoveryKind
        public var startedMs: Int
        /// When signalling worked again (claimed, or republished and subscribed).
        public var recoveredMs: Int?
        /// When the first frame from a participant arrived after `recoveredMs`.
        public var mediaResumedMs: Int?
    }

    public var elapsedMs: Int
    /// The wall-clock time (Unix milliseconds) the millisecond figures count from.
    public var startedAtUnixMs: Int64
    public var callId: String
    public var room: String
    public var display: String
    /// connecting, live, recovering, leaving, left.
    public var state: CallSession.Phase
    /// The Janus connection: connected, reconnecting, closed.
    public var janus: JanusConnectionStatus
    public var feed: UInt64?
    public var framesSent: Int
    public var encryptionFailures: Int
    /// With simulcast (`join --simulcast`), the video's layers and how many are sent now (the
    /// others paused: the bitrate Janus allows does not fit them); nil without.
    public var videoLayers: Int? = nil
    public var videoLayersSent: Int? = nil
    /// The feed of our screen share while the screen is shared beside the camera; nil otherwise.
    public var screenFeed: UInt64? = nil
    /// Recording state (`off` until a recorder reports).
    public var recording: String
    public var participants: [Participant]
    public var recoveries: [Recovery]

    /// The snapshot as a small table for a terminal.
    public func terminalText() -> String {
        var lines = [
            "call \(callId)  room \(room)  as \(display)  feed \(feed.map(String.init) ?? "-")"
                + (screenFeed.map { "  screen feed \($0)" } ?? ""),
            "state \(state.rawValue)  janus \(janus.rawValue)  sent \(framesSent) frames"
                + (videoLayers.map { "  layers \(videoLayersSent ?? $0)/\($0)" } ?? "") + "  recording \(recording)  "
                + String(format: "%.0f s", Double(elapsedMs) / 1000),
            "",
            pad("PARTICIPANT", 22) + pad("CODECS", 12) + pad("KBIT/S", 8) + pad("FPS", 6) + pad("LOSS", 7)
                + pad("LAYER", 7) + pad("DECRYPT", 22) + "FRAMES",
        ]
        for participant in participants {
            let codecs = [participant.audioCodec, participant.videoCodec].compactMap { $0 }.joined(separator: "+")
            let decrypt =
                participant.undecryptable > 0
                ? "\(participant.decryptState.rawValue) (\(participant.undecryptable) bad)"
                : participant.decryptState.rawValue
            lines.append(
                pad((participant.display ?? participant.id) + (participant.present ? "" : " (gone)"), 22)
                    + pad(codecs.isEmpty ? "-" : codecs, 12)
                    + pad(String(format: "%.0f", participant.kilobitsPerSecond), 8)
                    + pad(String(format: "%.1f", participant.videoFrameRate), 6)
                    + pad(String(format: "%.1f%%", participant.loss * 100), 7)
                    + pad(participant.layer ?? "-", 7) + pad(decrypt, 22) + "\(participant.framesDecrypted)"
            )
        }
        if participants.isEmpty { lines.append("(nobody else yet)") }
        for recovery in recoveries {
            var line = "recovered (\(recovery.kind.rawValue)) at \(recovery.startedMs) ms"
            if let recovered = recovery.recoveredMs {
                line += ", signalling after \(recovered - recovery.startedMs) ms"
            }
            if let media = recovery.mediaResumedMs { line += ", media after \(media - recovery.startedMs) ms" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

}

/// The Janus connection of a call, as `--status` shows it (`janus` in JSON, by raw value).
public enum JanusConnectionStatus: String, Sendable, Codable, Hashable {
    case connected
    /// The WebSocket dropped; ``JanusConnection`` is reconnecting to claim the session.
    case reconnecting
    case closed
}

/// How a call recovers from a fault (`kind` of a recovery in `--status json`, by raw value).
public enum RecoveryKind: String, Sendable, Codable, Hashable {
    /// The WebSocket dropped and the session was claimed on a new one.
    case claim
    /// The session was lost: a new session, published and subscribed again.
    case newSession = "new-session"
    /// ICE or DTLS failed for good and an ICE restart brought media back.
    case iceRestart = "ice-restart"
    /// Media failed for good and the call is joining again on a new session (while it does).
    case media
    /// Media failed for good and joining again on a new session brought it back.
    case mediaRejoin = "media-rejoin"
}

/// Whether a participant's frames decrypt (`decryptState` in `--status json`, by raw value).
public enum DecryptState: String, Sendable, Codable, Hashable {
    /// Recent frames decrypt.
    case ok
    /// Some recent frames decrypt and some do not.
    case partlyFailing = "partly failing"
    /// Recent frames do not decrypt.
    case failing
    /// No frame yet.
    case waiting
}

/// Counts what the call receives, per participant, for the status view.
///
/// Registered as a ``CallMediaObserver``. Participants are keyed by the user id in their display,
/// so a participant who rejoins with a new feed keeps one row and one set of counters.
public final class CallStatusTracker: CallMediaObserver {
    private struct Entry {
        var id: String
        var display: String?
        var feeds: [UInt64] = []
        var present = true
        var audioCodec: MediaCodec?
        var videoCodec: MediaCodec?
        var audioFrames = 0
        var videoFrames = 0
        var bytes = 0
        var undecryptable = 0
        var lastFailure: String?
        var lastFailureAt: ContinuousClock.Instant?
        var firstFrameAt: ContinuousClock.Instant?
        var lastFrameAt: ContinuousClock.Instant?
        var layer: VideoRoom.Substream?
        // Values at the previous snapshot, for rates.
        var previousVideoFrames = 0
        var previousBytes = 0

        /// Adds the counts of `other`, an entry for frames that arrived before this participant's
        /// feed was announced.
        mutating func absorb(_ other: Entry) {
            audioCodec = audioCodec ?? other.audioCodec
            layer = layer ?? other.layer
            videoCodec = videoCodec ?? other.videoCodec
            audioFrames += other.audioFrames
            videoFrames += other.videoFrames
            bytes += other.bytes
            undecryptable += other.undecryptable
            if lastFailure == nil {
                lastFailure = other.lastFailure
                lastFailureAt = other.lastFailureAt
            }
            firstFrameAt = [firstFrameAt, other.firstFrameAt].compactMap { $0 }.min()
            lastFrameAt = [lastFrameAt, other.lastFrameAt].compactMap { $0 }.max()
            previousVideoFrames += other.previousVideoFrames
            previousBytes += other.previousBytes
        }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var order: [String] = []
        var keyByFeed: [UInt64: String] = [:]
        var recoveries: [CallStatus.Recovery] = []
        var previousSnapshot: ContinuousClock.Instant?
        var recording = "off"
    }

    /// The instant times are counted from.
    public let origin: ContinuousClock.Instant
    /// The same instant on the wall clock, Unix milliseconds.
    public let originUnixMs: Int64
    private let state = Mutex(State())

    public init(origin: ContinuousClock.Instant = .now) {
        self.origin = origin
        let sinceOrigin = ContinuousClock.now - origin
        originUnixMs = Int64(Date().timeIntervalSince1970 * 1000) - Int64(Self.milliseconds(sinceOrigin))
    }

    /// The participant key of a display: its user id, else the display, else the feed.
    public static func participantKey(display: String?, feedID: UInt64) -> String {
        guard let display, !display.isEmpty else { return "feed:\(feedID)" }
        return ParticipantDisplay(parsing: display).userID ?? display
    }

    public func participantJoined(feedID: UInt64, display: String?) {
        let key = Self.participantKey(display: display, feedID: feedID)
        state.withLock { state in
            // Frames are counted on the receive thread as they arrive, so a feed's first frames
            // may come before its announcement and be counted under a placeholder: they belong
            // to this participant.
            let placeholder = "feed:\(feedID)"
            let early =
                state.keyByFeed[feedID] == nil && key != placeholder
                ? state.entries.removeValue(forKey: placeholder) : nil
            if early != nil { state.order.removeAll { $0 == placeholder } }
            state.keyByFeed[feedID] = key
            if state.entries[key] == nil {
                state.entries[key] = Entry(id: key, display: display)
                state.order.append(key)
            }
            state.entries[key]?.display = display
            state.entries[key]?.present = true
            if state.entries[key]?.feeds.last != feedID { state.entries[key]?.feeds.append(feedID) }
            if let early { state.entries[key]?.absorb(early) }
        }
    }

    public func participantLeft(feedID: UInt64) {
        state.withLock { state in
            guard let key = state.keyByFeed[feedID], state.entries[key]?.feeds.last == feedID else { return }
            state.entries[key]?.present = false
        }
    }

    public func received(_ media: ReceivedMedia) {
        switch media {
        case .frame(let frame):
            frameArrived(feedID: frame.feedID, codec: frame.frame.codec, bytes: frame.frame.data.count)
        case .undecryptable(let feedID, _, let codec, let reason):
            frameFailed(feedID: feedID, codec: codec, reason: reason)
        }
    }

    /// Counts a decrypted frame.
    func frameArrived(feedID: UInt64, codec: MediaCodec, bytes: Int) {
        let now = ContinuousClock.now
        state.withLock { state in
            let key = state.keyByFeed[feedID] ?? "feed:\(feedID)"
            var entry = state.entries[key] ?? Entry(id: key, display: nil, feeds: [feedID])
            if state.entries[key] == nil { state.order.append(key) }
            if codec.kind == .audio {
                entry.audioCodec = codec
                entry.audioFrames += 1
            } else {
                entry.videoCodec = codec
                entry.videoFrames += 1
            }
            entry.bytes += bytes
            entry.firstFrameAt = entry.firstFrameAt ?? now
            entry.lastFrameAt = now
            state.entries[key] = entry
            // The first frame after a recovery marks media as resumed.
            if let last = state.recoveries.indices.last, state.recoveries[last].recoveredMs != nil,
                state.recoveries[last].mediaResumedMs == nil
            {
                state.recoveries[last].mediaResumedMs = milliseconds(now)
            }
        }
    }

    /// Counts a frame that did not decrypt.
    func frameFailed(feedID: UInt64, codec: MediaCodec, reason: DecryptFailureReason) {
        let now = ContinuousClock.now
        state.withLock { state in
            let key = state.keyByFeed[feedID] ?? "feed:\(feedID)"
            var entry = state.entries[key] ?? Entry(id: key, display: nil, feeds: [feedID])
            if state.entries[key] == nil { state.order.append(key) }
            if codec.kind == .audio { entry.audioCodec = codec } else { entry.videoCodec = codec }
            entry.undecryptable += 1
            entry.lastFailure = reason.rawValue
            entry.lastFailureAt = now
            state.entries[key] = entry
        }
    }

    public func senderReport(_ report: SubscribedSenderReport) {}

    public func layerReceived(feedID: UInt64, substream: VideoRoom.Substream) {
        // The first switch can come before the feed's announcement, as frames can.
        state.withLock { state in
            let key = state.keyByFeed[feedID] ?? "feed:\(feedID)"
            if state.entries[key] == nil {
                state.entries[key] = Entry(id: key, display: nil, feeds: [feedID])
                state.order.append(key)
            }
            state.entries[key]?.layer = substream
        }
    }

    /// A fault was noticed and recovery of `kind` began.
    public func recoveryStarted(_ kind: RecoveryKind) {
        let now = milliseconds(.now)
        state.withLock { state in
            state.recoveries.append(CallStatus.Recovery(kind: kind, startedMs: now))
        }
    }

    /// The recovery under way reached working signalling (and, for a new session, a new publisher).
    /// `kind` replaces the kind it started as (a dropped socket may end as a new session).
    public func recoveryFinished(as kind: RecoveryKind) {
        let now = milliseconds(.now)
        state.withLock { state in
            guard let last = state.recoveries.indices.last, state.recoveries[last].recoveredMs == nil else {
                state.recoveries.append(CallStatus.Recovery(kind: kind, startedMs: now, recoveredMs: now))
                return
            }
            state.recoveries[last].kind = kind
            state.recoveries[last].recoveredMs = now
        }
    }

    /// Is a recovery open (started, not finished)?
    public var recoveryInProgress: Bool {
        state.withLock { $0.recoveries.last.map { $0.recoveredMs == nil } ?? false }
    }

    /// Sets the recording state shown (a recorder calls this).
    public func setRecording(_ text: String) { state.withLock { $0.recording = text } }

    /// The participants and recoveries now; rates cover the time since the previous call.
    func snapshot(loss: [String: Double]) -> (
        participants: [CallStatus.Participant], recoveries: [CallStatus.Recovery], recording: String
    ) {
        let now = ContinuousClock.now
        return state.withLock { state in
            let interval = state.previousSnapshot.map { now - $0 } ?? (now - origin)
            let seconds = max(
                0.001,
                Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
            )
            state.previousSnapshot = now
            var participants: [CallStatus.Participant] = []
            for key in state.order {
                guard var entry = state.entries[key] else { continue }
                let frames = entry.audioFrames + entry.videoFrames
                let failingRecently = entry.lastFailureAt.map { now - $0 < .seconds(2) } ?? false
                let decrypting = entry.lastFrameAt.map { now - $0 < .seconds(2) } ?? false
                let decryptState: DecryptState =
                    failingRecently ? (decrypting ? .partlyFailing : .failing) : frames > 0 ? .ok : .waiting
                participants.append(
                    CallStatus.Participant(
                        id: key,
                        display: entry.display,
                        feed: entry.feeds.last,
                        feeds: entry.feeds,
                        present: entry.present,
                        audioCodec: entry.audioCodec?.rawValue,
                        videoCodec: entry.videoCodec?.rawValue,
                        framesDecrypted: frames,
                        audioFrames: entry.audioFrames,
                        videoFrames: entry.videoFrames,
                        undecryptable: entry.undecryptable,
                        lastDecryptFailure: entry.lastFailure,
                        decryptState: decryptState,
                        videoFrameRate: Double(entry.videoFrames - entry.previousVideoFrames) / seconds,
                        kilobitsPerSecond: Double(entry.bytes - entry.previousBytes) * 8 / 1000 / seconds,
                        loss: loss[key] ?? 0,
                        firstFrameMs: entry.firstFrameAt.map(milliseconds),
                        lastFrameAgeMs: entry.lastFrameAt.map { Self.milliseconds(now - $0) },
                        layer: entry.layer?.description
                    )
                )
                entry.previousVideoFrames = entry.videoFrames
                entry.previousBytes = entry.bytes
                state.entries[key] = entry
            }
            return (participants, state.recoveries, state.recording)
        }
    }

    /// The participant key of a feed, if it is known.
    func key(forFeed feedID: UInt64) -> String? { state.withLock { $0.keyByFeed[feedID] } }

    func milliseconds(_ instant: ContinuousClock.Instant) -> Int { Self.milliseconds(instant - origin) }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }
}
