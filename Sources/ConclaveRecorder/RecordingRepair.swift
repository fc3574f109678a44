import ConclaveCore
import Foundation

/// `recordings repair`: rebuilds every container of a recording folder from its journals.
///
/// After a crash (`kill -9`, power loss) the live containers lack their index and may end up to
/// a cluster early; the journals hold every frame that reached the recorder up to the last sync.
/// Each segment is rebuilt into a temporary file by the same ``SegmentMuxer`` the live recorder
/// uses, verified (it opens, and holds every frame written), then renamed over the live file, and
/// the manifest is updated. Journals are kept unless `removeJournals` is set, and are never
/// removed for a segment whose rebuilt file did not verify.
public enum RecordingRepair {
    /// What a repair did.
    public struct Outcome: Sendable {
        /// Container files rebuilt and verified.
        public var rebuilt: [String] = []
        /// Journals or segments that could not be used, with the reason.
        public var problems: [String] = []
        /// The updated manifest.
        public var manifest: RecordingManifest?
    }

    public static func repair(
        directory: String,
        recorderVersion: String,
        removeJournals: Bool = false,
        timing: RecorderTiming = RecorderTiming()
    ) throws(RecordingError) -> Outcome {
        var outcome = Outcome()
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        } catch {
            throw RecordingError(path: directory, reason: "cannot list the folder: \(error.localizedDescription)")
        }
        var groups: [String: [JournalReader]] = [:]
        var journalNames: [String: [String]] = [:]
        for name in names where name.hasSuffix("." + JournalFormat.fileExtension) {
            do {
                let reader = try JournalReader(path: directory + "/" + name)
                groups[reader.header.file, default: []].append(reader)
                journalNames[reader.header.file, default: []].append(name)
            } catch {
                outcome.problems.append(error.description)
            }
        }
        var manifest =
            (try? RecordingManifest.read(from: directory))
            ?? RecordingManifest(
                callID: "unknown",
                recorderVersion: recorderVersion,
                cryptoFormat: "unknown",
                keyEpochs: [],
                startTime: iso8601(
                    unixMicroseconds: groups.values.first?.first?.header.recordingStartMicroseconds ?? 0
                ),
                status: "recording",
                participants: [],
                notRecorded: []
            )
        var lastArrival: Int64 = 0
        for base in groups.keys.sorted() {
            guard let journals = groups[base], let header = journals.first?.header else { continue }
            let rebuilt = rebuild(base: base, journals: journals, directory: directory, timing: timing)
            outcome.problems += rebuilt.damagedJournals
            lastArrival = max(lastArrival, rebuilt.lastArrival)
            let muxer = rebuilt.muxer
            let fileName = rebuilt.file
            let error = rebuilt.error
            if let fileName { outcome.rebuilt.append(fileName) }
            if let error { outcome.problems.append("\(base): \(error)") }
            var kept = journalNames[base] ?? []
            if removeJournals, error == nil {
                for name in kept { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
                kept = []
            }
            update(&manifest, header: header, muxer: muxer, file: fileName, error: error, journals: kept.sorted())
        }
        for index in manifest.participants.indices {
            let recorded = manifest.participants[index].segments.contains {
                $0.tracks.contains { $0.framesWritten > 0 }
            }
            manifest.participants[index].recorded = recorded
            if recorded { manifest.participants[index].reason = nil }
        }
        let recordedKeys = Set(manifest.participants.filter(\.recorded).map(\.key))
        manifest.notRecorded.removeAll { recordedKeys.contains($0.key) }
        if manifest.endTime == nil, lastArrival > 0 { manifest.endTime = iso8601(unixMicroseconds: lastArrival) }
        manifest.status = "repaired"
        try manifest.write(to: directory)
        outcome.manifest = manifest
        return outcome
    }

    /// The result of rebuilding one segment.
    struct Rebuilt {
        var muxer: SegmentMuxer
        var file: String?
        var error: String?
        var lastArrival: Int64
        /// Journals whose tail was unreadable (cut or corrupt), with where and why.
        var damagedJournals: [String] = []
    }

    /// Rebuilds the container of segment `base` from its journals into a temporary file,
    /// verifies it and renames it over `<base>.webm|.mkv`.
    static func rebuild(base: String, journals: [JournalReader], directory: String, timing: RecorderTiming) -> Rebuilt {
        var readers = journals
        let recordingStart = readers.first?.header.recordingStartMicroseconds ?? 0
        let temporaryBase = directory + "/.rebuild-" + base
        let muxer = SegmentMuxer(basePath: temporaryBase, recordingStart: recordingStart, timing: timing)
        var error: String?
        var lastArrival: Int64 = 0
        // Merge the journals by arrival time, one record at a time (ties: the earlier journal).
        var heads: [JournalRecord?] = readers.indices.map { readers[$0].next() }
        do throws(MediaFileError) {
            while true {
                var pick: Int?
                for index in heads.indices {
                    guard let head = heads[index] else { continue }
                    if let current = pick, let best = heads[current],
                        best.arrivalMicroseconds <= head.arrivalMicroseconds
                    {
                        continue
                    }
                    pick = index
                }
                guard let index = pick, let record = heads[index] else { break }
                heads[index] = readers[index].next()
                let header = readers[index].header
                lastArrival = max(lastArrival, record.arrivalMicroseconds)
                switch record {
                case .frame(let frame, let arrival, let lost):
                    try muxer.append(kind: header.kind, frame: frame, arrival: arrival, framesLostBefore: lost)
                case .senderReport(let ntp, let rtp, _):
                    muxer.senderReport(kind: header.kind, ntp: ntp, rtpTimestamp: rtp, codec: header.codec)
                }
            }
            try muxer.finish()
        } catch let failure {
            error = failure.description
        }
        let damaged = readers.compactMap { reader -> String? in
            guard let offset = reader.damagedTailOffset else { return nil }
            return
                "\((reader.path as NSString).lastPathComponent): records after byte \(offset) unreadable (\(reader.damagedTailReason ?? "?")); earlier records used"
        }
        var fileName: String?
        if let path = muxer.path {
            let pathExtension = (path as NSString).pathExtension
            let finalName = base + (pathExtension.isEmpty ? "" : "." + pathExtension)
            if error == nil,
                case .failure(let message) = ContainerVerification.verify(path: path, expected: muxer.tracks)
            {
                error = "rebuilt file not verified: \(message)"
            }
            if error == nil {
                let destination = directory + "/" + finalName
                if rename(path, destination) == 0 {
                    fileName = finalName
                } else {
                    error = "cannot rename \(path) to \(destination): \(String(cString: strerror(errno)))"
                }
            }
            if error != nil { try? FileManager.default.removeItem(atPath: path) }
        } else if error == nil {
            error = "no frame could be written (no video keyframe in the journal)"
        }
        return Rebuilt(muxer: muxer, file: fileName, error: error, lastArrival: lastArrival, damagedJournals: damaged)
    }

    private static func update(
        _ manifest: inout RecordingManifest,
        header: JournalHeader,
        muxer: SegmentMuxer,
        file: String?,
        error: String?,
        journals: [String]
    ) {
        let participantIndex: Int
        if let found = manifest.participants.firstIndex(where: { $0.key == header.participant }) {
            participantIndex = found
        } else {
            let identity = ParticipantIdentity(feedID: header.feedID, display: header.display)
            manifest.participants.append(
                .init(
                    key: header.participant,
                    feedIDs: [header.feedID],
                    display: header.display,
                    userID: identity.userID,
                    recorded: false,
                    reason: nil,
                    framesUndecryptable: 0,
                    segments: []
                )
            )
            participantIndex = manifest.participants.count - 1
        }
        if !manifest.participants[participantIndex].feedIDs.contains(header.feedID) {
            manifest.participants[participantIndex].feedIDs.append(header.feedID)
        }
        var segments = manifest.participants[participantIndex].segments
        let previous = segments.first { $0.index == header.segment && $0.feedID == header.feedID }
        var tracks: [RecordingManifest.Track] = []
        for kind in [MediaKind.audio, .video] {
            guard let progress = muxer.tracks[kind] else { continue }
            let old = previous?.tracks.first { $0.kind == kind }
            tracks.append(
                .init(
                    progress,
                    kind: kind,
                    undecryptable: old?.framesUndecryptable ?? 0,
                    keyEpochs: old?.keyEpochs,
                    error: nil
                )
            )
        }
        let segment = RecordingManifest.Segment(
            index: header.segment,
            feedID: header.feedID,
            startReason: previous?.startReason ?? "unknown (rebuilt from journals)",
            file: file,
            startOffset: muxer.fileStart?.seconds,
            endOffset: tracks.compactMap(\.lastTimestamp).max(),
            error: error,
            journals: journals,
            tracks: tracks
        )
        if let position = segments.firstIndex(where: { $0.index == header.segment && $0.feedID == header.feedID }) {
            segments[position] = segment
        } else {
            segments.append(segment)
            segments.sort { $0.index < $1.index }
        }
        manifest.participants[participantIndex].segments = segments
    }
}

/// `recordings inspect`: a readable summary of a recording folder.
public enum RecordingInspection {
    public static func report(directory: String) throws(RecordingError) -> String {
        let manifest = try RecordingManifest.read(from: directory)
        var lines: [String] = []
        lines.append(
            "call \(manifest.callID)  room \(manifest.room.map(String.init) ?? "-")  janus \(manifest.janusURL ?? "-")"
        )
        lines.append(
            "recorder \(manifest.recorderVersion)  crypto \(manifest.cryptoFormat)  key epochs \(manifest.keyEpochs.map(String.init).joined(separator: ",").nonEmpty ?? "-")"
        )
        lines.append("start \(manifest.startTime)  end \(manifest.endTime ?? "-")  status \(manifest.status)")
        for participant in manifest.participants {
            let name = participant.display ?? "(no display)"
            let state = participant.recorded ? "recorded" : "NOT RECORDED: \(participant.reason ?? "?")"
            lines.append(
                "participant \(participant.key) \"\(name)\" feeds \(participant.feedIDs.map(String.init).joined(separator: ",")): \(state); undecryptable frames \(participant.framesUndecryptable)"
            )
            for segment in participant.segments {
                let start = segment.startOffset.map { String(format: "%.3f s", $0) } ?? "-"
                let end = segment.endOffset.map { String(format: "%.3f s", $0) } ?? "-"
                lines.append(
                    "  segment \(segment.index) (\(segment.startReason)): \(segment.file ?? "no file") from \(start) to \(end)"
                        + (segment.error.map { "  ERROR \($0)" } ?? "")
                )
                if !segment.journals.isEmpty {
                    lines.append("    journals: \(segment.journals.joined(separator: ", "))")
                }
                for track in segment.tracks {
                    let duration =
                        zip(track.firstTimestamp.map { [$0] } ?? [], track.lastTimestamp.map { [$0] } ?? [])
                        .map { String(format: "%.2f s", $1 - $0) }.first ?? "-"
                    let size = track.width.map { " \($0)x\(track.height ?? 0)" } ?? ""
                    lines.append(
                        "    \(track.kind) \(track.codec)\(size): \(duration), frames written \(track.framesWritten)/\(track.framesReceived), lost \(track.framesLost), undecryptable \(track.framesUndecryptable), gaps \(track.gaps) (\(String(format: "%.2f", track.gapSeconds)) s)"
                            + (track.keyEpochs.flatMap { $0.isEmpty ? nil : $0 }.map {
                                ", key epochs \($0.map(String.init).joined(separator: ","))"
                            } ?? "")
                            + (track.error.map { "  ERROR \($0)" } ?? "")
                    )
                }
            }
        }
        for entry in manifest.notRecorded {
            lines.append("not recorded: \(entry.key) \"\(entry.display ?? "")\": \(entry.reason)")
        }
        if let names = try? FileManager.default.contentsOfDirectory(atPath: directory),
            names.contains(where: { $0.hasSuffix("." + JournalFormat.fileExtension) }), manifest.status == "recording"
        {
            lines.append(
                "journals present and the recording did not finish: run `conclave recordings repair \(directory)`"
            )
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
