import ConclaveAudio
import ConclaveAudioProcessing
import ConclaveCall
import ConclaveCore
import ConclaveMedia
import ConclavePulse
import Foundation
import JanusProtocol
import Synchronization

/// `join --speaker`: the call's audio played through PulseAudio.
///
/// A `CallMediaObserver` like the recorder: the receive path hands each decrypted Opus frame to
/// ConclaveAudio's `CallAudioPlayout` (an append under a lock), and the speaker's stream pulls the
/// mix on the `conclave-pulse` thread. What it plays is also the echo canceller's reference, and
/// the loudest participant becomes the window's active speaker. No server, or a server that goes
/// away, is one line: the call goes on without sound (the stream comes back with the server).
final class SpeakerOutput: CallMediaObserver {
    let playout: CallAudioPlayout
    private let playback: PulsePlayback
    private let renderer: SpeakerRenderer

    /// Whether `join` plays the call: `--speaker default|SINK` yes, `--speaker none` no; unset,
    /// when a terminal is attached (a script or a headless bot hears nothing by default).
    static func wanted(_ choice: String?) -> Bool {
        switch choice {
        case "none": false
        case nil: isatty(STDOUT_FILENO) == 1
        default: true
        }
    }

    /// Starts the speaker when wanted; the one line and nil when PulseAudio cannot be reached.
    static func start(
        _ choice: String?,
        echo: EchoCanceller?,
        volumes: [String: Float],
        speakerChanged: @escaping @Sendable (UInt64?) -> Void
    ) async -> SpeakerOutput? {
        guard wanted(choice) else { return nil }
        let connection: PulseConnection
        do {
            connection = try await LiveAudio.connection()
        } catch {
            LiveAudio.note("\(error.message): the call goes on without sound")
            return nil
        }
        let sink = choice == nil || choice == "default" ? nil : choice
        return SpeakerOutput(
            connection: connection,
            sink: sink,
            echo: echo,
            volumes: volumes,
            speakerChanged: speakerChanged
        )
    }

    private let volumes: [String: Float]
    /// Who is behind each feed, and the figures of those who left: for the closing lines. Touched
    /// on joins and leaves only, never per frame.
    private let roster = Mutex(SpeakerRoster())

    private init(
        connection: PulseConnection,
        sink: String?,
        echo: EchoCanceller?,
        volumes: [String: Float],
        speakerChanged: @escaping @Sendable (UInt64?) -> Void
    ) {
        playout = CallAudioPlayout()
        self.volumes = volumes
        renderer = SpeakerRenderer(playout: playout, echo: echo, speakerChanged: speakerChanged)
        playback = PulsePlayback(connection: connection, sink: sink, channels: 1, renderer: renderer)
        let events = playback.events
        let startingBuffer = playback.targetLatency
        Task {
            var buffer = startingBuffer
            for await event in events {
                switch event {
                case .running: continue
                case .interrupted(let reason): LiveAudio.note("speaker interrupted (\(reason)); reopening it")
                case .fellBackToDefault(let missing):
                    LiveAudio.note("speaker \(missing) is gone: using the default sink")
                case .bufferResized(let size):
                    let (from, to) = (buffer.wholeMilliseconds, size.wholeMilliseconds)
                    let grew = size > buffer
                    buffer = size
                    LiveAudio.note(
                        grew
                            ? "speaker underran (the machine stalled for over \(from) ms): buffer now \(to) ms"
                            : "speaker calm for 2 minutes: buffer back to \(to) ms"
                    )
                }
            }
        }
    }

    /// The speaker's counters, for the closing line.
    var statistics: PulsePlaybackStatistics { playback.statistics }

    func participantJoined(feedID: UInt64, display: String?) {
        guard let display else { return }
        roster.withLock { $0.displays[feedID] = display }
        let parsed = ParticipantDisplay(parsing: display)
        if let volume = parsed.userID.flatMap({ volumes[$0] }) ?? volumes[parsed.name] {
            playout.setVolume(volume, feedID: feedID)
        }
    }

    func participantLeft(feedID: UInt64) {
        // Kept before the playout forgets them: one who left is still someone heard.
        let last = playout.participants[feedID]
        playout.participantLeft(feedID: feedID)
        roster.withLock { roster in
            if let last {
                roster.departed[feedID] = HeardParticipant(
                    feed: feedID,
                    display: roster.displays[feedID],
                    statistics: last.statistics
                )
            }
        }
    }

    /// Every participant heard so far and the device's counters (any thread; reads what the
    /// playout published).
    var figures: SpeakerFigures {
        let current = playout.participants
        let heard = roster.withLock { roster in
            var heard = roster.departed
            for (feedID, playout) in current {
                heard[feedID] = HeardParticipant(
                    feed: feedID,
                    display: roster.displays[feedID],
                    statistics: playout.statistics
                )
            }
            return Array(heard.values)
        }
        return SpeakerFigures(participants: heard, device: playback.statistics)
    }

    func received(_ media: ReceivedMedia) {
        guard case .frame(let subscribed) = media, subscribed.frame.codec == .opus else { return }
        playout.received(feedID: subscribed.feedID, frame: subscribed.frame)
    }

    func senderReport(_ report: SubscribedSenderReport) {}

    /// Stops the stream (at the end of the call).
    func stop() { playback.stop() }

    /// Parses `--volume USERID=LEVEL` (0 ... 2; 1 is as sent).
    static func volumes(_ arguments: [String]) throws -> [String: Float] {
        var volumes: [String: Float] = [:]
        for argument in arguments {
            let parts = argument.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let level = Float(parts[1]), level.isFinite, (0...2).contains(level) else {
                throw CallCommandError("--volume \(argument): expected USERID=LEVEL with LEVEL from 0 to 2")
            }
            volumes[String(parts[0])] = level
        }
        return volumes
    }
}

/// The displays of the feeds the speaker has seen, and the last figures of those who left.
struct SpeakerRoster {
    var displays: [UInt64: String] = [:]
    var departed: [UInt64: HeardParticipant] = [:]
}

/// Fills the speaker from the playout on the `conclave-pulse` thread, hands what it played to
/// the echo canceller, and follows the loudest participant.
///
/// The active speaker is decided on the audio clock (every 100 ms of played audio), so it costs
/// nothing while nothing plays and needs no timer of its own; `speakerChanged` is called only
/// when the speaker changes.
final class SpeakerRenderer: PlaybackRenderer {
    private let playout: CallAudioPlayout
    private let echo: EchoCanceller?
    private let speakerChanged: @Sendable (UInt64?) -> Void
    // Touched on the pulse thread only (the one thread that renders); a Mutex keeps Sendable honest.
    private let detector = Mutex(ActiveSpeakerDetector())

    init(playout: CallAudioPlayout, echo: EchoCanceller?, speakerChanged: @escaping @Sendable (UInt64?) -> Void) {
        self.playout = playout
        self.echo = echo
        self.speakerChanged = speakerChanged
    }

    func render(into buffer: UnsafeMutableBufferPointer<Int16>) {
        playout.render(into: buffer)
        if let echo { try? echo.analyzePlayback(UnsafeBufferPointer(buffer)) }
        let due = detector.withLock { $0.advance(samples: buffer.count) }
        guard due else { return }
        let levels = playout.participants.mapValues(\.level.rms)
        if let change = detector.withLock({ $0.decide(levels) }) { speakerChanged(change.speaker) }
    }
}

/// The microphone through the echo canceller: each captured block is cleaned of what the
/// speakers played (and of noise, with gain applied) before it is encoded.
final class EchoCancelledMicrophone: AudioFrameSource {
    private let microphone: any AudioFrameSource
    private let echo: EchoCanceller
    private var failed = false

    init(_ microphone: any AudioFrameSource, echo: EchoCanceller) {
        self.microphone = microphone
        self.echo = echo
    }

    var timeline: FrameTimeline { microphone.timeline }
    var channels: Int { microphone.channels }
    var pacedByDevice: Bool { microphone.pacedByDevice }

    func waitUntilReady() async throws { try await microphone.waitUntilReady() }

    func nextFrame() throws -> AudioFrame? {
        guard let frame = try microphone.nextFrame() else { return nil }
        guard !failed else { return frame }
        do {
            // The speaker's 40 ms target plus about 20 ms of capture: a hint, the canceller finds
            // the delay itself.
            return try echo.processCapture(frame, delay: .milliseconds(60))
        } catch {
            failed = true
            LiveAudio.note("echo cancellation stopped (\(error)); the microphone is sent as captured")
            return frame
        }
    }
}
