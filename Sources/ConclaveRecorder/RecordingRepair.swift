import ConclaveAV
import ConclaveCore
import ConclaveFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `recordings repair`: rebuilds every container of a recording folder from its journals.
///
/// After a crash (`kill -9`, power loss) the live containers lack their index and may end up to
/// a cluster early; the journals hold every frame that reached the recorder up to the last sync.
/// Each segment is rebuilt into a temporary file by the same ``SegmentMuxer`` the live recorder
/// uses, verified (it opens, and holds every frame written), then renamed over the live file, and
/// the manifest is updated.
///
/// It never costs the user data:
/// - it writes only inside the folder, and only files named after journals whose header names a
///   plain file in it (see ``JournalHeader/fileNameProblem``);
/// - a rebuild that holds fewer frames or less time than the file already there (a journal with
///   damaged records, a journal of a file that was later rebuilt from more) does not replace it:
///   it is written beside it as `<base>.repaired.<ext>`;
/// - journals are kept unless `removeJournals` is set, and even then a journal is kept when it
///   holds records the rebuild could not read, or when its rebuild did not replace the file;
/// - a manifest it cannot parse is renamed aside (`manifest.json.unreadable-<UTC time>`) before a
///   new one is built from the journals; one it may not read (permissions) stops the repair
///   before anything is written;
/// - everything it writes is owner-only (0600 files in a 0700 folder), whatever the umask.
public enum RecordingRepair {
    /// What a repair did.
    public struct Outcome: Sendable {
        /// Container files rebuilt and verified (including rebuilds kept beside a fuller file).
        public var rebuilt: [String] = []
        /// Journals or segments that could not be used, with the reason.
        public var problems: [String] = []
        /// What else the user should know: a rebuild kept beside the file, journals kept, a
        /// manifest set aside or rebuilt.
        public var notices: [String] = []
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
        let manifestPath = directory + "/" + RecordingManifest.fileName
        // First the manifest: one this user may not read (or a FIFO, a folder) means a folder that
        // is not ours to rewrite, so nothing is written at all.
        let loaded: RecordingManifest.Loaded
        do {
            loaded = try RecordingManifest.load(from: directory)
        } catch {
            throw RecordingError(
                path: manifestPath,
                reason: "cannot read the manifest: \(error.reasonWithoutPath); nothing was changed"
            )
        }
        let names: [String]
        do {
            names = try listFolder(directory).sorted()
        } catch {
            throw RecordingError(path: directory, reason: "cannot list the folder: \(error.reasonWithoutPath)")
        }
        var groups: [String: [JournalReader]] = [:]
        var journalNames: [String: [String]] = [:]
        for name in names where name.hasSuffix("." + JournalFormat.fileExtension) {
            let reader: JournalReader
            do {
                reader = try JournalReader(path: directory + "/" + name)
            } catch {
                outcome.problems.append(error.description)
                continue
            }
            if let problem = reader.header.fileNameProblem {
                outcome.problems.append(
                    "\(name): journal not used: its header names the file \(quoted(reader.header.file)), and \(problem); repair writes only plain names inside \(directory)"
                )
                continue
            }
            groups[reader.header.file, default: []].append(reader)
            journalNames[reader.header.file, default: []].append(name)
        }

        var manifest: RecordingManifest
        var unreadableManifest: String?
        switch loaded {
        case .loaded(let found):
            manifest = found
        case .missing, .unparseable:
            let starts = groups.values.flatMap { $0.map(\.header.recordingStartMicroseconds) }
            guard let start = starts.min() else {
                if case .unparseable(let reason) = loaded {
                    throw RecordingError(
                        path: manifestPath,
                        reason:
                            "cannot read the manifest: \(reason), and no journal to rebuild it from; nothing was changed"
                    )
                }
                throw RecordingError(
                    path: directory,
                    reason: "no manifest.json and no journal: not a recording folder; nothing was changed"
                )
            }
            if case .unparseable(let reason) = loaded { unreadableManifest = reason }
            manifest = RecordingManifest(
                callID: "unknown",
                recorderVersion: recorderVersion,
                cryptoFormat: "unknown",
                keyEpochs: [],
                startTime: iso8601(unixMicroseconds: start),
                status: "recording",
                participants: [],
                notRecorded: []
            )
        }

        // Writing starts here: the folder and everything in it become owner-only (a recording
        // made before the recorder enforced that, or copied with wider modes).
        do {
            try PrivateFiles.ensurePrivateDirectory(directory, createParents: false, policy: .narrow)
        } catch {
            throw RecordingError(path: directory, reason: error.reasonWithoutPath + "; nothing was changed")
        }
        outcome.notices += narrowFiles(names, in: directory)

        var lastArrival: Int64 = 0
        for base in groups.keys.sorted() {
            guard let journals = groups[base], let header = journals.first?.header else { continue }
            let rebuilt = rebuild(base: base, journals: journals, directory: directory, timing: timing)
            outcome.problems += rebuilt.damagedJournals
            lastArrival = max(lastArrival, rebuilt.lastArrival)
            if let error = rebuilt.error { outcome.problems.append("\(base): \(error)") }
            switch rebuilt.placement {
            case .replaced(let name):
                outcome.rebuilt.append(name)
            case .beside(let name, let reason):
                outcome.rebuilt.append(name)
                outcome.notices.append("\(base): \(reason)")
            case .discarded(let reason):
                outcome.notices.append("\(base): \(reason)")
            case nil:
                break
            }
            var kept = journalNames[base] ?? []
            if removeJournals {
                let unread = rebuilt.journalsWithUnreadRecords
                if rebuilt.error != nil {
                    outcome.notices.append(
                        "\(base): journals kept (the rebuild failed): \(kept.joined(separator: ", "))"
                    )
                } else if !unread.isEmpty {
                    outcome.notices.append(
                        "\(base): journals kept: \(unread.joined(separator: ", ")) hold records the rebuild could not read"
                    )
                } else if case .replaced = rebuilt.placement {
                    var removed: [String] = []
                    for name in kept {
                        do {
                            try PrivateFiles.removeFile(directory + "/" + name)
                            removed.append(name)
                        } catch {
                            outcome.problems.append(error.description)
                        }
                    }
                    kept.removeAll { removed.contains($0) }
                } else {
                    outcome.notices.append(
                        "\(base): journals kept (the rebuild did not replace the file): \(kept.joined(separator: ", "))"
                    )
                }
            }
            update(&manifest, header: header, rebuilt: rebuilt, journals: kept.sorted())
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
        if let reason = unreadableManifest {
            let aside = try setAside(manifestPath)
            outcome.notices.append(
                "\(RecordingManifest.fileName) was not readable (\(reason)): kept as \(aside); a new one was built from the journals (call id, room and key epochs unknown)"
            )
        } else if case .missing = loaded {
            outcome.notices.append(
                "no \(RecordingManifest.fileName): a new one was built from the journals (call id, room and key epochs unknown)"
            )
        }
        try manifest.write(to: directory)
        outcome.manifest = manifest
        return outcome
    }

    /// Where a rebuilt file went.
    enum Placement: Sendable {
        /// It became `<base>.<ext>` (there was no file, or it held no more than the rebuild).
        case replaced(String)
        /// The file there holds more; the rebuild was written beside it under this name.
        case beside(String, reason: String)
        /// The file there and the rebuild already beside it both hold more; the rebuild was dropped.
        case discarded(String)

        /// The rebuilt file's name, when it was kept.
        var file: String? {
            switch self {
            case .replaced(let name), .beside(let name, _): name
            case .discarded: nil
            }
        }
    }

    /// The result of rebuilding one segment.
    struct Rebuilt {
        var muxer: SegmentMuxer
        /// Where the verified rebuild went (nil when it failed).
        var placement: Placement?
        var error: String?
        var lastArrival: Int64
        /// Journals with records that could not be read (cut or corrupt), with where and why.
        var damagedJournals: [String] = []
        /// The names of the journals that hold records the rebuild could not read (see
        /// ``JournalReader/holdsUnreadRecords``): they must not be deleted.
        var journalsWithUnreadRecords: [String] = []

        /// The rebuilt file's name, when it was kept.
        var file: String? { placement?.file }
    }

    /// Rebuilds the container of segment `base` from its journals into a temporary file,
    /// verifies it and renames it over `<base>.webm|.mkv`, unless the file there holds more (see
    /// ``place(_:as:in:)``).
    static func rebuild(base: String, journals: [JournalReader], directory: String, timing: RecorderTiming) -> Rebuilt {
        var readers = journals
        let recordingStart = readers.first?.header.recordingStartMicroseconds ?? 0
        let temporaryBase = directory + "/.rebuild-" + base
        let muxer = SegmentMuxer(basePath: temporaryBase, recordingStart: recordingStart, timing: timing)
        if let problem = JournalHeader.fileNameProblem(base) {
            return Rebuilt(muxer: muxer, error: "not rebuilt: the file name \(problem)", lastArrival: 0)
        }
        // A temporary file left by an earlier run is removed rather than truncated: should it be
        // a hard link, truncating it would write into whatever file it shares.
        for pathExtension in ["webm", "mkv"] { unlink(temporaryBase + "." + pathExtension) }
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
                case .senderReport(let report, _):
                    muxer.senderReport(report, kind: header.kind, codec: header.codec)
                }
            }
            try muxer.finish()
        } catch let failure {
            error = failure.description
        }
        let damaged = readers.compactMap { reader -> String? in
            guard !reader.damage.isEmpty else { return nil }
            let name = (reader.path as NSString).lastPathComponent
            let parts = reader.damage.map { damage in
                let what =
                    damage.isCutTail
                    ? "a record cut short at the end"
                    : "\(damage.records) damaged record\(damage.records == 1 ? "" : "s")"
                return "\(what) skipped (\(damage.length) bytes from byte \(damage.byteOffset): \(damage.reason))"
            }
            let version = reader.version < 2 ? "; a version 1 journal cannot be read past damage" : ""
            return "\(name): \(parts.joined(separator: ", ")); the other records used\(version)"
        }
        var placement: Placement?
        if let path = muxer.path {
            let pathExtension = (path as NSString).pathExtension
            if error == nil,
                case .failure(let message) = ContainerVerification.verify(path: path, expected: muxer.tracks)
            {
                error = "rebuilt file not verified: \(message)"
            }
            if error == nil {
                do {
                    placement = try place(path, as: base, extension: pathExtension, in: directory)
                } catch let failure {
                    error = failure.message
                }
            }
            if error != nil || placement?.file == nil { _ = try? PrivateFiles.removeFile(path) }
        } else if error == nil {
            error = "no frame could be written (no video keyframe in the journal)"
        }
        return Rebuilt(
            muxer: muxer,
            placement: placement,
            error: error,
            lastArrival: lastArrival,
            damagedJournals: damaged,
            journalsWithUnreadRecords: readers.filter(\.holdsUnreadRecords).map {
                ($0.path as NSString).lastPathComponent
            }
        )
    }

    /// Renames the verified rebuild at `path` to `<base>.<ext>` when that does not lose anything,
    /// else beside it as `<base>.repaired.<ext>`.
    ///
    /// A rebuild replaces the file when there is none, when it is empty (created, nothing
    /// written yet), or when the rebuild holds at least as many packets of every track over at
    /// least as long. Anything else (fewer frames, less time, a file that does not open) keeps
    /// the file: when in doubt, both are kept.
    static func place(_ path: String, as base: String, extension pathExtension: String, in directory: String)
        throws(PlacementError) -> Placement
    {
        let suffix = pathExtension.isEmpty ? "" : "." + pathExtension
        let finalName = base + suffix
        let destination = directory + "/" + finalName
        func move(to name: String) throws(PlacementError) {
            let target = directory + "/" + name
            guard rename(path, target) == 0 else {
                throw PlacementError(
                    message: "cannot rename \(path) to \(target): \(String(cString: strerror(errno)))"
                )
            }
            do {
                try PrivateFiles.syncDirectory(directory)
            } catch {
                throw PlacementError(message: error.description)
            }
        }
        let rebuilt = ContainerContents(path: path)
        guard let existing = ContainerContents.existing(at: destination), !existing.isEmptyFile else {
            try move(to: finalName)
            return .replaced(finalName)
        }
        if let rebuilt, let old = existing.contents, rebuilt.covers(old) {
            try move(to: finalName)
            return .replaced(finalName)
        }
        let held = existing.contents.map { "holds \($0.summary)" } ?? "does not open as a media file"
        let summary = rebuilt?.summary ?? "?"
        let besideName = base + ".repaired" + suffix
        if let previous = ContainerContents.existing(at: directory + "/" + besideName), !previous.isEmptyFile {
            if let rebuilt, let old = previous.contents, rebuilt.covers(old) {
                try move(to: besideName)
                return .beside(
                    besideName,
                    reason:
                        "kept \(finalName): it \(held), the rebuild from the journals \(summary); the rebuild replaced \(besideName)"
                )
            }
            return .discarded(
                "kept \(finalName) (it \(held)) and \(besideName): the rebuild from the journals (\(summary)) holds no more than either and was not kept"
            )
        }
        try move(to: besideName)
        return .beside(
            besideName,
            reason:
                "kept \(finalName): it \(held), the rebuild from the journals \(summary); the rebuild was written beside it as \(besideName)"
        )
    }

    private static func update(
        _ manifest: inout RecordingManifest,
        header: JournalHeader,
        rebuilt: Rebuilt,
        journals: [String]
    ) {
        let muxer = rebuilt.muxer
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
        let position = segments.firstIndex { $0.index == header.segment && $0.feedID == header.feedID }
        let previous = position.map { segments[$0] }
        // A rebuild that did not replace the file (kept beside it, or failed): the manifest goes
        // on describing the file that was kept, when it described it.
        var replaced = false
        if case .replaced = rebuilt.placement { replaced = true }
        if !replaced, let position, var kept = previous {
            kept.journals = journals
            if let error = rebuilt.error { kept.error = error }
            segments[position] = kept
            manifest.participants[participantIndex].segments = segments
            return
        }
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
            file: rebuilt.file,
            startOffset: muxer.fileStart?.seconds,
            endOffset: tracks.compactMap(\.lastTimestamp).max(),
            error: rebuilt.error,
            journals: journals,
            tracks: tracks
        )
        if let position {
            segments[position] = segment
        } else {
            segments.append(segment)
            segments.sort { $0.index < $1.index }
        }
        manifest.participants[participantIndex].segments = segments
    }

    /// Renames an unparseable manifest to `manifest.json.unreadable-<UTC time>` (owner-only), so
    /// that whatever it still holds can be looked at; returns the new name.
    private static func setAside(_ path: String) throws(RecordingError) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stamp = formatter.string(from: Date())
        var name = "\(RecordingManifest.fileName).unreadable-\(stamp)"
        let directory = (path as NSString).deletingLastPathComponent
        var counter = 1
        var info = stat()
        while lstat(directory + "/" + name, &info) == 0 {
            counter += 1
            name = "\(RecordingManifest.fileName).unreadable-\(stamp)-\(counter)"
        }
        let target = directory + "/" + name
        guard rename(path, target) == 0 else {
            throw RecordingError(
                path: path,
                reason: "cannot set the unreadable manifest aside as \(name): \(String(cString: strerror(errno)))"
            )
        }
        guard chmod(target, PrivateFiles.fileMode) == 0 else {
            throw RecordingError(path: target, reason: "cannot make it owner-only: \(String(cString: strerror(errno)))")
        }
        return name
    }

    /// Narrows this user's regular files among `names` to 0600 (a recording from before the
    /// recorder enforced it); says how many.
    private static func narrowFiles(_ names: [String], in directory: String) -> [String] {
        var narrowed: [String] = []
        var failed: [String] = []
        for name in names {
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(),
                info.st_mode & 0o077 != 0
            else { continue }
            if chmod(path, PrivateFiles.fileMode) == 0 { narrowed.append(name) } else { failed.append(name) }
        }
        var notices: [String] = []
        if !narrowed.isEmpty { notices.append("made \(narrowed.count) file(s) owner-only (mode 600)") }
        if !failed.isEmpty { notices.append("could not make owner-only: \(failed.joined(separator: ", "))") }
        return notices
    }

    private static func quoted(_ text: String) -> String {
        "\""
            + text.unicodeScalars.map {
                $0.isASCII && $0.value >= 0x20 ? String($0) : "\\u{\(String($0.value, radix: 16))}"
            }
            .joined() + "\""
    }
}

/// The names in a folder (without `.` and `..`), or why it cannot be listed.
func listFolder(_ path: String) throws(FileError) -> [String] {
    guard let handle = opendir(path) else { throw FileError(path: path, .system("list", errno)) }
    defer { closedir(handle) }
    var names: [String] = []
    while let entry = readdir(handle) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != ".", name != ".." { names.append(name) }
    }
    return names
}

/// What a container holds, per track: packets and the time from the first to the last.
struct ContainerContents {
    var packets: [MediaKind: Int] = [:]
    var first: [MediaKind: Duration] = [:]
    var last: [MediaKind: Duration] = [:]

    /// Reads every packet of the file at `path`; nil when it does not open. A file that ends
    /// early (a live file cut by a crash) counts what could be read.
    init?(path: String) {
        guard let demuxer = try? MediaDemuxer(path: path) else { return nil }
        while let packet = try? demuxer.readPacket() {
            guard packet.streamIndex >= 0, packet.streamIndex < demuxer.streams.count,
                let kind = demuxer.streams[packet.streamIndex].kind
            else { continue }
            packets[kind, default: 0] += 1
            first[kind] = min(first[kind] ?? packet.presentationTime, packet.presentationTime)
            last[kind] = max(last[kind] ?? packet.presentationTime, packet.presentationTime)
        }
    }

    /// The time a track spans.
    func span(_ kind: MediaKind) -> Duration {
        guard let first = first[kind], let last = last[kind] else { return .zero }
        return last - first
    }

    /// Whether this holds at least as many packets of every track of `other`, over at least as
    /// long (to within a millisecond, the Matroska time base both are written with).
    func covers(_ other: ContainerContents) -> Bool {
        other.packets.allSatisfy { kind, count in
            packets[kind, default: 0] >= count && span(kind) + .milliseconds(1) >= other.span(kind)
        }
    }

    /// "100 audio packets over 1.98 s, ..." for messages.
    var summary: String {
        let parts = [MediaKind.audio, .video].compactMap { kind -> String? in
            guard let count = packets[kind] else { return nil }
            let seconds = Double(span(kind).components.seconds) + Double(span(kind).components.attoseconds) / 1e18
            return "\(count) \(kind) packets over \(String(format: "%.2f", seconds)) s"
        }
        return parts.isEmpty ? "no packets" : parts.joined(separator: " and ")
    }

    /// The file at `path`, if there is one: whether it is empty, and what it holds if it opens.
    static func existing(at path: String) -> (isEmptyFile: Bool, contents: ContainerContents?)? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let isEmpty = info.st_mode & S_IFMT == S_IFREG && info.st_size == 0
        return (isEmpty, isEmpty ? nil : ContainerContents(path: path))
    }
}

/// Why a verified rebuild could not be put in place.
struct PlacementError: Error {
    var message: String
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
        for change in manifest.keyEpochTimes ?? [] {
            lines.append("key epoch \(change.epoch) from \(change.time) (\(String(format: "%.3f s", change.offset)))")
        }
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
                            + ((track.framesRejected ?? 0) > 0 ? ", rejected \(track.framesRejected ?? 0)" : "")
                            + ((track.timestampJumps ?? 0) > 0 ? ", timestamp jumps \(track.timestampJumps ?? 0)" : "")
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
        if let names = try? listFolder(directory),
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
