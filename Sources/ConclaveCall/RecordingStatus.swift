import ConclaveCore
import ConclaveRecorder
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A snapshot of a running recording for people and scripts: what `conclave record` shows every
/// second, as a live table on a terminal and as one JSON line otherwise.
///
/// It is built from the recorder's own manifest (the same counters `recordings inspect` reads
/// afterwards) plus what only the running process knows: how long it has run, how many bytes
/// each file holds now, and how much room the disk has left, so that a recorder left running for
/// an hour says early what it records and what goes wrong.
public struct RecordingStatus: StatusReport, Sendable, Codable, Hashable {
    /// One track of one participant's current segment.
    public struct Track: Sendable, Codable, Hashable {
        public var kind: String
        public var codec: String
        public var framesReceived: Int
        public var framesWritten: Int
        public var framesLost: Int
        public var framesUndecryptable: Int
        /// Seconds of media written (last frame's time minus the first's).
        public var seconds: Double
        public var error: String?
    }

    /// One participant seen by the recorder.
    public struct Participant: Sendable, Codable, Hashable {
        public var key: String
        public var display: String?
        public var recorded: Bool
        /// Why nothing is recorded of this participant (no key, no keyframe yet, ...).
        public var reason: String?
        public var segments: Int
        /// The current segment's file, if one was created.
        public var file: String?
        /// Bytes of every file of this participant on disk now.
        public var bytes: Int64
        public var framesUndecryptable: Int
        public var tracks: [Track]
        /// The simulcast layer received of the participant's video (`low`, `medium`, `high`), nil
        /// when the participant does not send simulcast.
        public var layer: String? = nil
    }

    public var elapsedMs: Int
    public var callId: String
    public var room: String
    public var directory: String
    /// `recording`, then `finished` in the last line.
    public var state: String
    /// Bytes free for this user on the recording's file system, nil if unknown.
    public var diskFreeBytes: Int64?
    public var participants: [Participant]
    /// Participants that are not recorded, and why (from the manifest).
    public var notRecorded: [String]
    /// Track and segment errors, and a low disk warning: what a person must act on.
    public var problems: [String]

    /// Below this much free space the status warns (a minute of eight HD participants).
    public static let lowDiskBytes: Int64 = 512 << 20

    /// Builds the status from a manifest snapshot of the recording in `directory`.
    /// `layers`: the simulcast layer received of each feed (the subscriber's `receivedLayers`).
    public init(
        manifest: RecordingManifest,
        directory: String,
        elapsed: Duration,
        state: String = "recording",
        layers: [UInt64: String] = [:]
    ) {
        elapsedMs = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        callId = manifest.callID
        room = manifest.room.map(String.init) ?? "-"
        self.directory = directory
        self.state = state
        diskFreeBytes = Self.freeBytes(directory)
        var problems: [String] = []
        participants = manifest.participants.map { participant in
            let current = participant.segments.last
            let bytes = participant.segments.compactMap(\.file).reduce(Int64(0)) { total, file in
                total + (Self.fileSize(directory + "/" + file) ?? 0)
            }
            for segment in participant.segments {
                if let error = segment.error {
                    problems.append("\(participant.key) segment \(segment.index): \(error)")
                }
                for track in segment.tracks {
                    if let error = track.error { problems.append("\(participant.key) \(track.kind): \(error)") }
                }
            }
            return Participant(
                key: participant.key,
                display: participant.display,
                recorded: participant.recorded,
                reason: participant.reason,
                segments: participant.segments.count,
                file: current?.file,
                bytes: bytes,
                framesUndecryptable: participant.framesUndecryptable,
                tracks: (current?.tracks ?? []).map { track in
                    Track(
                        kind: track.kind.rawValue,
                        codec: track.codec.rawValue,
                        framesReceived: track.framesReceived,
                        framesWritten: track.framesWritten,
                        framesLost: track.framesLost,
                        framesUndecryptable: track.framesUndecryptable,
                        seconds: max(0, (track.lastTimestamp ?? 0) - (track.firstTimestamp ?? 0)),
                        error: track.error
                    )
                },
                layer: (current.map { [$0.feedID] } ?? participant.feedIDs.reversed()).lazy.compactMap { layers[$0] }
                    .first
            )
        }
        notRecorded = manifest.notRecorded.map { "\($0.display ?? $0.key): \($0.reason)" }
        if let free = diskFreeBytes, free < Self.lowDiskBytes {
            problems.append("low disk: \(Self.megabytes(free)) free in \(directory)")
        }
        self.problems = problems
    }

    /// The snapshot as a small table for a terminal.
    public func terminalText() -> String {
        let free = diskFreeBytes.map { Self.megabytes($0) + " free" } ?? "disk free unknown"
        var lines = [
            "recording call \(callId)  room \(room)  \(state)  " + String(format: "%.0f s", Double(elapsedMs) / 1000),
            "into \(directory)  (\(free))",
            "",
            pad("PARTICIPANT", 22) + pad("TRACK", 17) + pad("WRITTEN", 16) + pad("LOST", 6) + pad("BAD", 6)
                + pad("SECONDS", 9) + "SIZE",
        ]
        for participant in participants {
            let name = participant.display ?? participant.key
            if participant.tracks.isEmpty {
                lines.append(pad(name, 22) + (participant.reason ?? "waiting for media"))
            }
            for (index, track) in participant.tracks.enumerated() {
                lines.append(
                    pad(index == 0 ? name : "", 22)
                        + pad(
                            "\(track.kind) \(track.codec)"
                                + (track.kind == "video" ? participant.layer.map { " \($0)" } ?? "" : ""),
                            17
                        )
                        + pad("\(track.framesWritten)/\(track.framesReceived)", 16) + pad("\(track.framesLost)", 6)
                        + pad("\(track.framesUndecryptable)", 6) + pad(String(format: "%.1f", track.seconds), 9)
                        + (index == 0 ? Self.megabytes(participant.bytes) : "")
                )
            }
        }
        if participants.isEmpty { lines.append("(nobody is publishing yet)") }
        for entry in notRecorded { lines.append("not recorded: \(entry)") }
        for problem in problems { lines.append("PROBLEM: \(problem)") }
        return lines.joined(separator: "\n")
    }

    private static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    private static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    private static func freeBytes(_ directory: String) -> Int64? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        let (bytes, overflow) = Int64(clamping: info.f_bavail).multipliedReportingOverflow(
            by: Int64(clamping: info.f_frsize)
        )
        return overflow ? .max : bytes
    }
}
