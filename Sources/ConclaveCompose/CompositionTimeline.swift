import ConclaveCore
public import ConclaveRecorder
import Foundation

/// A recording folder placed on the call's timeline: the input of every composition (video,
/// mixed audio, stems).
///
/// The recorder already put every file on one timeline (a segment's `startOffset` is where its
/// first frame sits, from RTCP sender reports when they agree with the arrivals), so composing is
/// placing each file at its offset; nothing here re-derives clock sync. Segments whose file is
/// missing or cannot be opened stay in the timeline as gaps and are listed in `problems`, so a
/// damaged recording still composes and says what it could not use.
public struct CompositionTimeline: Sendable, Hashable {
    /// The recording folder.
    public var directory: String
    public var manifest: RecordingManifest
    /// Seconds from the call timeline's zero to the end of the last media in the folder: the
    /// composite's duration. For a recording still running, the end of what is written so far.
    public var duration: Double
    /// Participants with at least one segment file, in the manifest's order.
    public var participants: [Participant]
    /// Segments that could not be used, one line each (composed as gaps).
    public var problems: [String]

    /// One person in the call, with their segments in order.
    public struct Participant: Sendable, Hashable {
        /// The manifest's participant key (user id or `feed-<id>`).
        public var key: String
        /// What a tile shows: the display name without ECall's `<userId>:` prefix, else the key.
        public var name: String
        public var segments: [Segment]
    }

    /// One container file of a participant and where it sits on the call timeline.
    public struct Segment: Sendable, Hashable {
        /// The absolute path of the container.
        public var path: String
        /// Seconds on the call timeline of the file's time zero (its first frame).
        public var startOffset: Double
        /// Seconds on the call timeline of the file's last frame, when the manifest knows it (nil
        /// for a segment still being written: read to the end of the file).
        public var endOffset: Double?
        public var hasVideo: Bool
        public var hasAudio: Bool
        /// The video's size from the manifest (the decoder has the last word).
        public var width: Int?
        public var height: Int?
    }

    /// The manifest format versions this composer understands.
    public static let supportedFormatVersions: ClosedRange<Int> = 1...1

    /// Reads `directory`'s manifest and places its segments.
    ///
    /// - Throws: `ComposeError` when there is no readable manifest or it is of another format
    ///   version; a missing segment file is a problem, not an error.
    public static func load(directory: String) throws(ComposeError) -> CompositionTimeline {
        let manifest: RecordingManifest
        do {
            manifest = try RecordingManifest.read(from: directory)
        } catch {
            throw ComposeError(path: error.path, reason: error.reason)
        }
        guard supportedFormatVersions.contains(manifest.formatVersion) else {
            throw ComposeError(
                path: directory + "/" + RecordingManifest.fileName,
                reason:
                    "a recording of format version \(manifest.formatVersion); this conclave composes version \(supportedFormatVersions.upperBound)"
            )
        }
        var problems: [String] = []
        var participants: [Participant] = []
        var end = 0.0
        for participant in manifest.participants {
            var segments: [Segment] = []
            for segment in participant.segments {
                guard let file = segment.file else { continue }
                let path = directory + "/" + file
                guard let start = segment.startOffset, start.isFinite else {
                    problems.append("\(file): no start offset in the manifest; composed as a gap")
                    continue
                }
                guard FileManager.default.isReadableFile(atPath: path) else {
                    problems.append("\(file): missing or unreadable; composed as a gap")
                    continue
                }
                let video = segment.tracks.first { $0.kind == .video }
                let audio = segment.tracks.first { $0.kind == .audio }
                let last = segment.tracks.compactMap(\.lastTimestamp).filter(\.isFinite).max()
                let finish = segment.endOffset ?? last
                if let finish { end = max(end, finish) }
                segments.append(
                    Segment(
                        path: path,
                        startOffset: start,
                        endOffset: finish,
                        hasVideo: video != nil,
                        hasAudio: audio != nil,
                        width: video?.width,
                        height: video?.height
                    )
                )
            }
            guard !segments.isEmpty else { continue }
            let identity = ParticipantIdentity(feedID: participant.feedIDs.first ?? 0, display: participant.display)
            participants.append(
                Participant(key: participant.key, name: identity.name ?? participant.key, segments: segments)
            )
        }
        if let endTime = manifest.endTime, let duration = Self.seconds(from: manifest.startTime, to: endTime) {
            end = max(end, duration)
        }
        return CompositionTimeline(
            directory: directory,
            manifest: manifest,
            duration: end,
            participants: participants,
            problems: problems
        )
    }

    /// Seconds between two ISO 8601 times, nil when either does not parse.
    static func seconds(from start: String, to end: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        guard let from = formatter.date(from: start) ?? plain.date(from: start),
            let to = formatter.date(from: end) ?? plain.date(from: end)
        else { return nil }
        let seconds = to.timeIntervalSince(from)
        return seconds.isFinite && seconds >= 0 ? seconds : nil
    }
}

/// Composing failed as a whole (a missing manifest, another format version, an output that cannot
/// be written); problems with single segments are reported in `CompositionTimeline.problems`.
public struct ComposeError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}
