import ConclaveAV
public import ConclaveCore
import ConclaveFiles
import ConclaveRTP
import Foundation
public import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Records a call: one container per participant per continuous segment, each track journaled
/// beside it, and `manifest.json` describing it all.
///
/// Fed in arrival order from one task (``RecordingSession`` in Conclave does that from a call).
/// Only decrypted frames reach it; undecryptable ones are counted, never written. File errors
/// (disk full, I/O) stop only the tracks of the affected file and are reported in the manifest;
/// the recorder never throws into the call. Not thread-safe: one task owns it.
public final class CallRecorder {
    /// What the recording is of.
    public struct Configuration: Sendable {
        public var directory: String
        public var callID: String
        public var room: UInt64?
        public var janusURL: String?
        public var recorderVersion: String
        public var cryptoFormat: String
        public var keyEpochs: [UInt64]
        public var timing: RecorderTiming
        /// How often the manifest is rewritten while recording (each rewrite is synced). `repair`
        /// finds journals by listing the folder and recounts from them, so a manifest a few
        /// seconds old loses nothing.
        public var manifestInterval: Duration

        public init(
            directory: String,
            callID: String,
            room: UInt64? = nil,
            janusURL: String? = nil,
            recorderVersion: String,
            cryptoFormat: String,
            keyEpochs: [UInt64] = [],
            timing: RecorderTiming = RecorderTiming(),
            manifestInterval: Duration = .seconds(5)
        ) {
            self.directory = directory
            self.callID = callID
            self.room = room
            self.janusURL = janusURL
            self.recorderVersion = recorderVersion
            self.cryptoFormat = cryptoFormat
            self.keyEpochs = keyEpochs
            self.timing = timing
            self.manifestInterval = manifestInterval
        }
    }

    private final class Track {
        let kind: MediaKind
        let codec: MediaCodec
        var journal: JournalWriter?
        let journalName: String
        var undecryptable = 0
        /// The epochs of the keys this track's frames were decrypted with.
        var keyEpochs: Set<UInt64> = []
        var error: String?

        init(kind: MediaKind, codec: MediaCodec, journal: JournalWriter?, journalName: String, error: String?) {
            self.kind = kind
            self.codec = codec
            self.journal = journal
            self.journalName = journalName
            self.error = error
        }
    }

    private final class Segment {
        let index: Int
        let feedID: UInt64
        let baseName: String
        let startReason: String
        let muxer: SegmentMuxer
        var tracks: [MediaKind: Track] = [:]
        var lastArrival: Int64
        var dimensions: VideoDimensions?
        var closed = false
        var closeError: String?
        var journalsRemoved = false
        /// The seekable file rebuilt from the journals at a clean finish.
        var finalMuxer: SegmentMuxer?
        var lastKeyframeRequest: Int64?
        /// Whether a manifest naming the live file was asked for.
        var fileAnnounced = false

        init(index: Int, feedID: UInt64, baseName: String, startReason: String, muxer: SegmentMuxer, now: Int64) {
            self.index = index
            self.feedID = feedID
            self.baseName = baseName
            self.startReason = startReason
            self.muxer = muxer
            lastArrival = now
        }
    }

    private final class Participant {
        let identity: ParticipantIdentity
        var display: String?
        var feedIDs: [UInt64] = []
        var segments: [Segment] = []
        var undecryptable = 0
        var failureReason: String?
        var pendingStartReason = "joined"

        init(identity: ParticipantIdentity, display: String?) {
            self.identity = identity
            self.display = display
        }
    }

    public let configuration: Configuration
    /// The call timeline's origin (Unix microseconds).
    public let startTime: Int64
    private let logger: Logger
    private let requestKeyframe: (UInt64) -> Void
    private var participants: [String: Participant] = [:]
    private var participantOrder: [String] = []
    private var participantByFeed: [UInt64: String] = [:]
    private var activeSegment: [UInt64: Segment] = [:]
    /// Feeds that left and have not been announced again: their frames still in flight (the
    /// last packets before the leave, overtaken by the event) belong to the closed segment and
    /// must not open a new one.
    private var departedFeeds: Set<UInt64> = []
    private var lastManifestWrite: Int64?
    /// The manifest last written, so a quiet room does not rewrite (and sync) the same file.
    private var writtenManifest: RecordingManifest?
    /// A participant, segment, track or failure appeared since the last manifest write: the next
    /// tick writes it, without waiting for `manifestInterval`, so `inspect` and a person looking
    /// at a live recording see every file as soon as it exists.
    private var manifestOutdated = false
    private var endTime: Int64?
    private var finished = false
    /// The key epochs given to ``keyEpoch(_:from:)``, in order.
    private var keyEpochTimes: [RecordingManifest.KeyEpochTime]?

    /// Creates the folder (owner-only, with any missing parents) and the first manifest.
    ///
    /// Refuses a folder that already holds a recording (see ``checkNewRecordingFolder(_:)``), and
    /// one that another user owns; an existing folder of this user that others could enter is
    /// narrowed to 0700 before anything is written into it.
    ///
    /// - Parameters:
    ///   - startTime: the call timeline's origin, Unix microseconds (normally now).
    ///   - requestKeyframe: asks the sender of a feed's video for a keyframe; called at most once a
    ///     second per feed while a segment waits for one.
    public init(
        configuration: Configuration,
        startTime: Int64,
        logger: Logger,
        requestKeyframe: @escaping (UInt64) -> Void = { _ in }
    ) throws(RecordingError) {
        self.configuration = configuration
        self.startTime = startTime
        self.logger = logger
        self.requestKeyframe = requestKeyframe
        try Self.checkNewRecordingFolder(configuration.directory)
        do {
            try PrivateFiles.ensurePrivateDirectory(configuration.directory, createParents: true, policy: .narrow)
        } catch {
            throw RecordingError(path: configuration.directory, reason: error.reasonWithoutPath)
        }
        try manifest().write(to: configuration.directory)
        lastManifestWrite = startTime
    }

    /// Refuses a folder that already holds a recording: a manifest, journals or containers.
    ///
    /// Recording into it would overwrite that recording's manifest, and its journals and files
    /// wherever the names meet (the same participant and segment), so `record --out` must name a
    /// new or empty folder. A missing folder is fine; so is a folder of other files.
    public static func checkNewRecordingFolder(_ path: String) throws(RecordingError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw RecordingError(path: path, reason: "cannot check the folder: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw RecordingError(
                path: path,
                reason: "it is a \(PrivateFiles.fileTypeName(info.st_mode)), not a folder; choose another --out"
            )
        }
        let names: [String]
        do {
            names = try listFolder(path)
        } catch {
            throw RecordingError(path: path, reason: "cannot check the folder: \(error.reasonWithoutPath)")
        }
        let recordingFiles = names.filter { name in
            name == RecordingManifest.fileName || name.hasPrefix(RecordingManifest.fileName + ".")
                || [JournalFormat.fileExtension, "webm", "mkv"].contains((name as NSString).pathExtension)
        }.sorted()
        guard recordingFiles.isEmpty else {
            let shown = recordingFiles.prefix(3).joined(separator: ", ") + (recordingFiles.count > 3 ? ", ..." : "")
            throw RecordingError(
                path: path,
                reason: "the folder already holds a recording (\(shown)); choose another --out"
            )
        }
    }

    // MARK: - Events

    /// A publisher appeared (or reappeared: a rejoin continues in a new segment, opened by its
    /// first frame).
    public func participantJoined(feedID: UInt64, display: String?, at now: Int64) {
        manifestOutdated = true
        departedFeeds.remove(feedID)
        let participant = participant(for: feedID, display: display)
        // A join for a feed that is already sending is the late announcement of that feed (media
        // can overtake the room event), not a rejoin.
        if activeSegment[feedID] == nil, !participant.segments.isEmpty { participant.pendingStartReason = "rejoined" }
    }

    /// A publisher left: its segment ends, and frames of the feed that arrive after it are
    /// dropped until the feed is announced again.
    public func participantLeft(feedID: UInt64, at now: Int64) {
        manifestOutdated = true
        departedFeeds.insert(feedID)
        if let segment = activeSegment[feedID] { close(segment, now: now) }
        if let key = participantByFeed[feedID] { participants[key]?.pendingStartReason = "rejoined" }
    }

    /// A decrypted frame of `feedID`'s `kind` stream, opened with the key of `keyEpoch` (nil: the
    /// frame was not encrypted).
    ///
    /// - Parameter framesLostBefore: frames of the stream the receiver gave up on just before this
    ///   one (the jitter buffer's count); the manifest's `framesLost` is their sum, so silence
    ///   (DTX, a muted sender) is a gap but not a loss.
    public func frame(
        feedID: UInt64,
        kind: MediaKind,
        frame: EncodedFrame,
        arrival: Int64,
        keyEpoch: UInt64? = nil,
        framesLostBefore: Int = 0
    ) {
        // A frame of a feed that left is the tail still in flight: its segment is closed.
        guard !finished, !departedFeeds.contains(feedID) else { return }
        let participant = participant(for: feedID, display: nil)
        var segment = activeSegment[feedID]
        if let current = segment {
            if let reason = splitReason(current, kind: kind, frame: frame, arrival: arrival) {
                close(current, now: arrival)
                participant.pendingStartReason = reason
                segment = nil
            }
        }
        let active = segment ?? openSegment(for: participant, feedID: feedID, now: arrival)
        active.lastArrival = arrival
        if kind == .video, let dimensions = VideoDimensions.of(frame), active.dimensions == nil {
            active.dimensions = dimensions
        }
        let track = track(kind, codec: frame.codec, in: active, participant: participant)
        // A track whose journal or file failed is stopped: nothing more is written for it.
        if track.error != nil { return }
        if let keyEpoch { track.keyEpochs.insert(keyEpoch) }
        if let journal = track.journal {
            do {
                try journal.append(frame, arrivalMicroseconds: arrival, framesLostBefore: framesLostBefore)
            } catch {
                fail(track, segment: active, error.description)
            }
        }
        if track.error != nil { return }
        do {
            try active.muxer.append(kind: kind, frame: frame, arrival: arrival, framesLostBefore: framesLostBefore)
        } catch {
            failContainer(active, error)
        }
        if kind == .video,
            active.muxer.isWaitingForKeyframe
                || (active.muxer.state == .writing && !active.muxer.writtenKinds.contains(.video))
        {
            askForKeyframe(active, now: arrival)
        }
    }

    /// The call key of `epoch` became (or becomes) current at `from` (Unix microseconds): a
    /// rotation. Listed in the manifest, which is rewritten at the next tick.
    public func keyEpoch(_ epoch: UInt64, from time: Int64) {
        let entry = RecordingManifest.KeyEpochTime(
            epoch: epoch,
            time: iso8601(unixMicroseconds: time),
            offset: Double(time - startTime) / 1_000_000
        )
        keyEpochTimes = (keyEpochTimes ?? []) + [entry]
        manifestOutdated = true
    }

    /// A frame of `feedID` that did not decrypt: counted, never written.
    public func undecryptable(feedID: UInt64, kind: MediaKind, reason: String, at now: Int64) {
        let participant = participant(for: feedID, display: nil)
        participant.undecryptable += 1
        if participant.failureReason != reason { manifestOutdated = true }
        participant.failureReason = reason
        activeSegment[feedID]?.tracks[kind]?.undecryptable += 1
    }

    /// A sender report of `feedID`'s `kind` stream, arrived at `arrival`.
    public func senderReport(_ report: SenderReportTime, feedID: UInt64, kind: MediaKind, arrival: Int64) {
        let arrived = ArrivedReport(time: report, arrival: arrival)
        guard let segment = activeSegment[feedID], let track = segment.tracks[kind] else {
            pendingReports[feedID, default: [:]][kind] = arrived
            return
        }
        record(arrived, track: track, segment: segment)
    }

    /// A sender report and when it arrived.
    private struct ArrivedReport {
        var time: SenderReportTime
        var arrival: Int64
    }

    /// Reports of streams whose track has no segment yet, taken when it gets one.
    private var pendingReports: [UInt64: [MediaKind: ArrivedReport]] = [:]

    private func record(_ report: ArrivedReport, track: Track, segment: Segment) {
        if let journal = track.journal {
            do {
                try journal.appendSenderReport(report.time, arrivalMicroseconds: report.arrival)
            } catch {
                fail(track, segment: segment, error.description)
            }
        }
        segment.muxer.senderReport(report.time, kind: track.kind, codec: track.codec)
    }

    /// Hands what the events taken in since the last call produced to the kernel: each journal's
    /// records with one `write`, and each live container's finished clusters (libavformat holds
    /// up to 32 KiB otherwise). The feeder calls it after each batch of events, so a killed
    /// process loses at most the batch it was taking in from the journals, and at most the open
    /// cluster (``SegmentMuxer/liveClusterMilliseconds``) from the live files.
    public func commit() {
        for segment in activeSegment.values {
            for track in segment.tracks.values {
                guard let journal = track.journal else { continue }
                do { try journal.commit() } catch { fail(track, segment: segment, error.description) }
            }
            do { try segment.muxer.flush() } catch { failContainer(segment, error) }
        }
    }

    /// Called about once a second: opens files whose waits ran out, flushes containers, syncs
    /// journals, rewrites the manifest now and then, and ends segments after a long silence.
    public func tick(now: Int64) {
        guard !finished else { return }
        for segment in activeSegment.values {
            if now.clampedSubtracting(segment.lastArrival) > configuration.timing.longGap.microsecondsValue {
                close(segment, now: now)
                continue
            }
            do {
                try segment.muxer.tick(now: now)
                try segment.muxer.flush()
            } catch {
                failContainer(segment, error)
            }
            for track in segment.tracks.values {
                guard let journal = track.journal else { continue }
                do { try journal.syncIfDue(now: now) } catch { fail(track, segment: segment, error.description) }
            }
            if !segment.fileAnnounced, segment.muxer.state == .writing {
                segment.fileAnnounced = true
                manifestOutdated = true
            }
        }
        if !manifestOutdated, let last = lastManifestWrite,
            now.clampedSubtracting(last) < configuration.manifestInterval.microsecondsValue
        {
            return
        }
        lastManifestWrite = now
        manifestOutdated = false
        writeManifest()
    }

    /// Ends every segment, verifies each container, removes the journals of verified ones and
    /// writes the final manifest.
    @discardableResult
    public func finish(at now: Int64) -> RecordingManifest {
        if !finished {
            finished = true
            endTime = now
            for segment in activeSegment.values { close(segment, now: now) }
        }
        writeManifest()
        return manifest()
    }

    // MARK: - Segments

    private func participant(for feedID: UInt64, display: String?) -> Participant {
        if let key = participantByFeed[feedID], let participant = participants[key] {
            if let display, participant.display == nil {
                participant.display = display
                // Media can arrive before the join event that names the participant: take the
                // identity the display gives, merging into an earlier entry of the same user.
                let identity = ParticipantIdentity(feedID: feedID, display: display)
                if identity.key != participant.identity.key {
                    return rekey(participant, from: key, to: identity)
                }
            }
            return participant
        }
        let identity = ParticipantIdentity(feedID: feedID, display: display)
        let participant: Participant
        if let existing = participants[identity.key] {
            participant = existing
        } else {
            participant = Participant(identity: identity, display: display)
            participants[identity.key] = participant
            participantOrder.append(identity.key)
        }
        if !participant.feedIDs.contains(feedID) { participant.feedIDs.append(feedID) }
        participantByFeed[feedID] = identity.key
        return participant
    }

    private func rekey(_ participant: Participant, from oldKey: String, to identity: ParticipantIdentity) -> Participant
    {
        participants[oldKey] = nil
        let target: Participant
        if let existing = participants[identity.key] {
            target = existing
            for feed in participant.feedIDs where !target.feedIDs.contains(feed) { target.feedIDs.append(feed) }
            target.segments += participant.segments
            target.undecryptable += participant.undecryptable
            target.failureReason = target.failureReason ?? participant.failureReason
            participantOrder.removeAll { $0 == oldKey }
        } else {
            target = Participant(identity: identity, display: participant.display)
            target.feedIDs = participant.feedIDs
            target.segments = participant.segments
            target.undecryptable = participant.undecryptable
            target.failureReason = participant.failureReason
            target.pendingStartReason = participant.pendingStartReason
            participants[identity.key] = target
            if let index = participantOrder.firstIndex(of: oldKey) { participantOrder[index] = identity.key }
        }
        for feed in target.feedIDs { participantByFeed[feed] = identity.key }
        return target
    }

    private func splitReason(_ segment: Segment, kind: MediaKind, frame: EncodedFrame, arrival: Int64) -> String? {
        let gap = arrival.clampedSubtracting(segment.lastArrival)
        if gap > configuration.timing.longGap.microsecondsValue {
            return "gap of \(String(format: "%.1f", gap.seconds)) s"
        }
        if let track = segment.tracks[kind], track.codec != frame.codec {
            return "codec \(track.codec) -> \(frame.codec)"
        }
        if kind == .video, let old = segment.dimensions, let new = VideoDimensions.of(frame), old != new {
            return "resolution \(old) -> \(new)"
        }
        // The file was created without this kind (it came too late, or the participant turned
        // the camera on): a keyframe starts a segment that has it.
        if segment.muxer.state == .writing, !segment.muxer.writtenKinds.contains(kind), frame.isKeyframe {
            return "\(kind) started"
        }
        return nil
    }

    private func openSegment(for participant: Participant, feedID: UInt64, now: Int64) -> Segment {
        manifestOutdated = true
        let index = participant.segments.count + 1
        let baseName = "\(participant.identity.fileSafeKey)-\(feedID)-s\(index)"
        let segment = Segment(
            index: index,
            feedID: feedID,
            baseName: baseName,
            startReason: participant.pendingStartReason,
            muxer: SegmentMuxer(
                basePath: configuration.directory + "/" + baseName,
                recordingStart: startTime,
                timing: configuration.timing,
                live: true
            ),
            now: now
        )
        participant.segments.append(segment)
        activeSegment[feedID] = segment
        logger.info(
            "recording segment",
            metadata: ["participant": "\(participant.identity.key)", "feed": "\(feedID)", "segment": "\(index)"]
        )
        return segment
    }

    private func track(_ kind: MediaKind, codec: MediaCodec, in segment: Segment, participant: Participant) -> Track {
        if let track = segment.tracks[kind] { return track }
        manifestOutdated = true
        let name = "\(segment.baseName).\(kind.rawValue).\(JournalFormat.fileExtension)"
        let header = JournalHeader(
            participant: participant.identity.key,
            feedID: segment.feedID,
            display: participant.display,
            segment: segment.index,
            file: segment.baseName,
            kind: kind,
            codec: codec,
            recordingStartMicroseconds: startTime
        )
        let track: Track
        do {
            let journal = try JournalWriter(path: configuration.directory + "/" + name, header: header)
            track = Track(kind: kind, codec: codec, journal: journal, journalName: name, error: nil)
        } catch {
            logger.error("cannot journal track", metadata: ["error": "\(error)"])
            track = Track(kind: kind, codec: codec, journal: nil, journalName: name, error: error.description)
        }
        segment.tracks[kind] = track
        if let report = pendingReports[segment.feedID]?.removeValue(forKey: kind) {
            record(report, track: track, segment: segment)
        }
        return track
    }

    private func askForKeyframe(_ segment: Segment, now: Int64) {
        if let last = segment.lastKeyframeRequest, now.clampedSubtracting(last) < 1_000_000 { return }
        segment.lastKeyframeRequest = now
        requestKeyframe(segment.feedID)
    }

    /// A journal failed: the track stops (its container track too, so the file never holds frames
    /// that the journal cannot restore) and the error is reported.
    private func fail(_ track: Track, segment: Segment, _ message: String) {
        manifestOutdated = true
        logger.error("journal failed; track stopped", metadata: ["error": "\(message)"])
        track.error = message
        try? track.journal?.close()
        track.journal = nil
    }

    private func failContainer(_ segment: Segment, _ error: MediaFileError) {
        manifestOutdated = true
        logger.error("container failed; segment stopped", metadata: ["error": "\(error)"])
        segment.closeError = error.description
        for track in segment.tracks.values where track.error == nil { track.error = error.description }
    }

    private func close(_ segment: Segment, now: Int64) {
        manifestOutdated = true
        guard !segment.closed else { return }
        segment.closed = true
        if activeSegment[segment.feedID] === segment { activeSegment[segment.feedID] = nil }
        do {
            try segment.muxer.finish()
        } catch {
            failContainer(segment, error)
        }
        var journalsClean = true
        for track in segment.tracks.values {
            do { try track.journal?.close() } catch {
                journalsClean = false
                track.error = track.error ?? error.description
            }
            if track.error != nil { journalsClean = false }
        }
        guard journalsClean, segment.closeError == nil, segment.muxer.path != nil else { return }
        // The live file has no index; rebuild a seekable one from the journals (the same frames),
        // verify it, and only then drop the journals.
        var journals: [JournalReader] = []
        // In name order, as `repair` reads them, so both merge ties alike.
        for kind in [MediaKind.audio, .video] {
            guard let track = segment.tracks[kind] else { continue }
            do {
                journals.append(try JournalReader(path: configuration.directory + "/" + track.journalName))
            } catch {
                logger.warning("journal unreadable; live file and journals kept", metadata: ["error": "\(error)"])
                return
            }
        }
        let rebuilt = RecordingRepair.rebuild(
            base: segment.baseName,
            journals: journals,
            directory: configuration.directory,
            timing: configuration.timing
        )
        if let error = rebuilt.error {
            logger.warning("final file not rebuilt; live file and journals kept", metadata: ["reason": "\(error)"])
            return
        }
        guard case .replaced = rebuilt.placement else {
            // The journals hold less than the live file (they were damaged on disk): both files
            // and the journals stay for a person to look at.
            logger.warning(
                "final file not rebuilt over the live file; live file, rebuild and journals kept",
                metadata: ["file": "\(rebuilt.file ?? "-")"]
            )
            return
        }
        segment.finalMuxer = rebuilt.muxer
        // A journal with records the rebuild could not read still holds frames nothing else has.
        guard rebuilt.journalsWithUnreadRecords.isEmpty else {
            logger.warning("journal damaged; journals kept", metadata: ["segment": "\(segment.baseName)"])
            return
        }
        var removed = true
        for track in segment.tracks.values {
            do {
                try PrivateFiles.removeFile(configuration.directory + "/" + track.journalName)
            } catch {
                removed = false
                logger.warning("journal not removed", metadata: ["error": "\(error)"])
            }
        }
        segment.journalsRemoved = removed
    }

    private func writeManifest() {
        let current = manifest()
        guard current != writtenManifest else { return }
        do {
            try current.write(to: configuration.directory)
            writtenManifest = current
        } catch {
            logger.error("manifest not written", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Manifest

    /// The manifest as things stand.
    public func manifest() -> RecordingManifest {
        var entries: [RecordingManifest.Participant] = []
        var notRecorded: [RecordingManifest.NotRecorded] = []
        for key in participantOrder {
            guard let participant = participants[key] else { continue }
            let segments = participant.segments.map(manifestSegment)
            let recorded = segments.contains { segment in segment.tracks.contains { $0.framesWritten > 0 } }
            var reason: String?
            if !recorded {
                if participant.undecryptable > 0 {
                    reason =
                        "frames did not decrypt with the keys held (\(participant.failureReason ?? "unknown"), \(participant.undecryptable) frames)"
                } else if participant.segments.isEmpty {
                    reason = "no media received"
                } else if finished {
                    reason = "no frame could be written (no video keyframe, or a write error)"
                } else {
                    reason = "waiting for media"
                }
                notRecorded.append(
                    .init(key: key, feedIDs: participant.feedIDs, display: participant.display, reason: reason ?? "")
                )
            } else if participant.undecryptable > 0 {
                reason =
                    "recorded in part: \(participant.undecryptable) frames did not decrypt (\(participant.failureReason ?? "unknown"))"
            }
            entries.append(
                .init(
                    key: key,
                    feedIDs: participant.feedIDs,
                    display: participant.display,
                    userID: participant.identity.userID,
                    recorded: recorded,
                    reason: reason,
                    framesUndecryptable: participant.undecryptable,
                    segments: segments
                )
            )
        }
        return RecordingManifest(
            callID: configuration.callID,
            room: configuration.room,
            janusURL: configuration.janusURL,
            recorderVersion: configuration.recorderVersion,
            cryptoFormat: configuration.cryptoFormat,
            keyEpochs: configuration.keyEpochs,
            keyEpochTimes: keyEpochTimes,
            startTime: iso8601(unixMicroseconds: startTime),
            endTime: endTime.map { iso8601(unixMicroseconds: $0) },
            status: finished ? "finished" : "recording",
            participants: entries,
            notRecorded: notRecorded
        )
    }

    private func manifestSegment(_ segment: Segment) -> RecordingManifest.Segment {
        let muxer = segment.finalMuxer ?? segment.muxer
        var tracks: [RecordingManifest.Track] = []
        for kind in [MediaKind.audio, .video] {
            guard let track = segment.tracks[kind] else { continue }
            let progress = muxer.tracks[kind] ?? TrackProgress(codec: track.codec)
            tracks.append(
                RecordingManifest.Track(
                    progress,
                    kind: kind,
                    undecryptable: track.undecryptable,
                    keyEpochs: track.keyEpochs.sorted(),
                    error: track.error
                )
            )
        }
        let lastTimes = tracks.compactMap(\.lastTimestamp)
        return RecordingManifest.Segment(
            index: segment.index,
            feedID: segment.feedID,
            startReason: segment.startReason,
            file: muxer.path.map { segment.baseName + "." + ($0 as NSString).pathExtension },
            startOffset: muxer.fileStart?.seconds,
            endOffset: lastTimes.max(),
            error: segment.closeError,
            journals: segment.journalsRemoved
                ? []
                : segment.tracks.values.map(\.journalName).filter {
                    FileManager.default.fileExists(atPath: configuration.directory + "/" + $0)
                }.sorted(),
            tracks: tracks
        )
    }
}

extension RecordingManifest.Track {
    init(_ progress: TrackProgress, kind: MediaKind, undecryptable: Int, keyEpochs: [UInt64]?, error: String?) {
        self.init(
            kind: kind,
            codec: progress.codec,
            width: progress.dimensions?.width,
            height: progress.dimensions?.height,
            firstTimestamp: progress.firstTimestamp?.seconds,
            lastTimestamp: progress.lastTimestamp?.seconds,
            framesReceived: progress.framesReceived,
            framesWritten: progress.framesWritten,
            framesLost: progress.framesLost,
            framesUndecryptable: undecryptable,
            keyEpochs: keyEpochs,
            framesDroppedBeforeKeyframe: progress.framesDroppedBeforeKeyframe,
            gaps: progress.gaps,
            gapSeconds: progress.gapMicroseconds.seconds,
            framesRejected: progress.framesRejected,
            timestampJumps: progress.timestampJumps,
            error: error
        )
    }
}

/// Checks a closed container: it opens, and holds as many packets per track as were written.
enum ContainerVerification {
    enum Outcome {
        case success
        case failure(String)
    }

    static func verify(path: String, expected: [MediaKind: TrackProgress]) -> Outcome {
        do {
            let demuxer = try MediaDemuxer(path: path)
            var counts: [MediaKind: Int] = [:]
            while let packet = try demuxer.readPacket() {
                guard packet.streamIndex >= 0, packet.streamIndex < demuxer.streams.count,
                    let kind = demuxer.streams[packet.streamIndex].kind
                else { continue }
                counts[kind, default: 0] += 1
            }
            for (kind, progress) in expected where progress.framesWritten > 0 {
                let found = counts[kind] ?? 0
                guard found == progress.framesWritten else {
                    return .failure("\(kind) has \(found) frames, \(progress.framesWritten) were written")
                }
            }
            return .success
        } catch {
            return .failure(error.description)
        }
    }
}
