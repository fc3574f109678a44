import ConclaveAudio
import ConclaveCall
import ConclavePulse
import Foundation
import JanusProtocol

/// What the speaker did with one participant's audio: the playout buffer's counters, so that a
/// user (or a benchmark) can tell concealed losses, FEC recoveries and underruns apart after a
/// call without a debugger.
///
/// Built from the statistics `CallAudioPlayout` already publishes after each 20 ms block: reading
/// them costs the render thread nothing.
struct HeardParticipant: Encodable, Sendable, Hashable {
    /// The participant's feed in the room.
    var feed: UInt64
    /// The user id of the display, when it follows the `USERID:NAME` convention.
    var id: String?
    /// The display's name (the feed number when the publisher gave no display).
    var name: String
    var played: Int
    var concealed: Int
    var fecRecovered: Int
    var fecCaughtUp: Int
    var overshoots: Int
    var lossRuns: Int
    var late: Int
    var underruns: Int
    var dropped: Int
    var resyncs: Int
    var delayMs: Int
    var targetDelayMs: Int
    var jitterMs: Int

    init(feed: UInt64, display: String?, statistics: PlayoutStatistics) {
        self.feed = feed
        let parsed = display.map { ParticipantDisplay(parsing: $0) }
        id = parsed?.userID
        name = parsed?.name ?? "feed \(feed)"
        played = statistics.played
        concealed = statistics.concealed
        fecRecovered = statistics.fecRecovered
        fecCaughtUp = statistics.fecCaughtUp
        overshoots = statistics.overshoots
        lossRuns = statistics.lossRuns
        late = statistics.late
        underruns = statistics.underruns
        dropped = statistics.dropped
        resyncs = statistics.resyncs
        delayMs = Self.milliseconds(statistics.currentDelay)
        targetDelayMs = Self.milliseconds(statistics.targetDelay)
        jitterMs = Self.milliseconds(statistics.jitter)
    }

    /// The closing line: `audio from Bob (id bob, feed 2): 15000 frames played, 740 concealed, ...`.
    var line: String {
        let who = id.map { "id \($0), feed \(feed)" } ?? "feed \(feed)"
        return "audio from \(name) (\(who)): \(played) frames played, \(concealed) concealed, "
            + "\(fecRecovered) recovered by FEC, \(fecCaughtUp) caught up by FEC, \(overshoots) overshoots, "
            + "\(lossRuns) loss runs, \(late) late, \(dropped) dropped, \(resyncs) resyncs, "
            + "\(underruns) underruns, delay \(delayMs) ms (target \(targetDelayMs) ms, jitter \(jitterMs) ms)"
    }

    private static func milliseconds(_ duration: Duration) -> Int { duration.wholeMilliseconds }
}

extension Duration {
    /// The duration in whole milliseconds, saturating (for lines and JSON).
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? Int.min : Int.max }
        return Int(clamping: whole) &+ Int(attoseconds / 1_000_000_000_000_000)
    }
}

/// The speaker's figures: every participant heard, and the device's own counters.
struct SpeakerFigures: Encodable, Sendable, Hashable {
    /// Participants heard during the call, in feed order (those who left included).
    var participants: [HeardParticipant]
    /// Times PulseAudio ran out of samples to play (the render thread was late).
    var deviceUnderruns: Int
    /// Times the stream was recreated (server restarted, sink removed).
    var deviceRestarts: Int
    /// Milliseconds of audio written to the device.
    var playedMs: Int
    /// The device's buffer now, in milliseconds (grown after underruns).
    var bufferMs: Int
    /// Times the device's buffer grew after an underrun.
    var bufferGrowths: Int
    /// The longest the device's request took to render, in milliseconds.
    var longestRenderMs: Int
    /// The longest time between two of the device's requests, in milliseconds (about 10 when
    /// all is well; an underrun after a long one is the machine, not the renderer).
    var longestWaitMs: Int

    init(participants: [HeardParticipant], device: PulsePlaybackStatistics) {
        self.participants = participants.sorted { $0.feed < $1.feed }
        deviceUnderruns = device.underruns
        deviceRestarts = device.restarts
        playedMs = device.rendered / (CallAudioPlayout.sampleRate / 1000)
        bufferMs = device.buffer.wholeMilliseconds
        bufferGrowths = device.bufferGrowths
        longestRenderMs = device.longestRender.wholeMilliseconds
        longestWaitMs = device.longestWait.wholeMilliseconds
    }

    /// The device's closing line.
    var deviceLine: String {
        "speaker: \(playedMs) ms played, \(deviceUnderruns) device underruns, \(deviceRestarts) restarts, "
            + "buffer \(bufferMs) ms (grew \(bufferGrowths) times), longest render \(longestRenderMs) ms, "
            + "longest wait between requests \(longestWaitMs) ms"
    }

    /// What `join` prints when it leaves: one line per participant heard, then the device's.
    var closingLines: [String] { participants.map(\.line) + [deviceLine] }
}

/// A status report with the speaker's figures added under `speaker` (nothing without a speaker,
/// so the lines of a call without one stay as they were).
struct SpeakerStatus<Report: StatusReport>: StatusReport {
    var report: Report
    var speaker: SpeakerFigures?

    private enum Keys: String, CodingKey { case speaker }

    func encode(to encoder: any Encoder) throws {
        try report.encode(to: encoder)
        guard let speaker else { return }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(speaker, forKey: .speaker)
    }

    func terminalText() -> String {
        guard let speaker else { return report.terminalText() }
        let heard = speaker.participants.map {
            "\n  \($0.name): \($0.concealed) concealed, \($0.fecRecovered) FEC, \($0.underruns) underruns, "
                + "delay \($0.delayMs) ms"
        }
        return report.terminalText() + "\nspeaker: \(speaker.deviceUnderruns) device underruns" + heard.joined()
    }
}

extension CallOptions.StatusMode {
    /// Shows `report` with the speaker's figures, when there is a speaker.
    func show(_ report: some StatusReport, speaker: SpeakerOutput?) {
        show(SpeakerStatus(report: report, speaker: speaker?.figures))
    }
}

extension SpeakerOutput {
    /// Prints the closing lines (after the call: the playout is no longer fed).
    func printSummary() {
        for line in figures.closingLines { print(line) }
        fflush(nil)
    }
}
