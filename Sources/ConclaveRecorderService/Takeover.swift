import ConclaveRecorder
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where one attempt at a job records, and which attempt it continues.
///
/// A job the broker redelivers (its service died, lost the broker, or handed it over) whose
/// output already holds a recording is continued in a new folder inside it, `attempt-2`,
/// `attempt-3`, ...: each attempt is then a complete recording folder of its own, with its own
/// manifest, journals and repair, written by one recorder only. Continuing in the same folder as a
/// new segment set would make the new recorder number its segments after a manifest a dead process
/// may have left stale, and write beside journals that still need repair; separate folders need no
/// change to the recorder and keep `recordings repair` and `verify` working per attempt. The new
/// manifest's ``RecordingManifest/continuation`` names the previous folder and the outage.
struct AttemptPlan: Sendable, Hashable {
    /// The folder this attempt writes.
    var directory: String
    /// 1 for the first recording of the job.
    var attempt: Int
    /// The folder of the attempt this one continues (absolute), nil for attempt 1.
    var previous: String?

    static let prefix = "attempt-"

    /// Plans the attempt for a job whose output folder is `output` (absolute, already checked to
    /// be inside the storage root). Only reads.
    static func plan(output: String, redelivered: Bool) throws(RecorderServiceError) -> AttemptPlan {
        guard holdsRecording(output) else {
            do {
                try CallRecorder.checkNewRecordingFolder(output)
            } catch {
                throw RecorderServiceError("output: \(error)")
            }
            return AttemptPlan(directory: output, attempt: 1, previous: nil)
        }
        guard redelivered else {
            throw RecorderServiceError(
                "output: \(output) already holds a recording and the job is not a redelivery; refusing to overwrite it"
            )
        }
        // The latest attempt that wrote a manifest is the one continued; a folder an attempt made
        // but never wrote into is skipped over (its number is not reused).
        var latest = 1
        var previous = output
        for number in attemptNumbers(in: output) {
            latest = max(latest, number)
            let folder = output + "/" + prefix + "\(number)"
            if holdsRecording(folder) { previous = folder }
        }
        return AttemptPlan(directory: output + "/" + prefix + "\(latest + 1)", attempt: latest + 1, previous: previous)
    }

    /// A `manifest.json` is there.
    static func holdsRecording(_ folder: String) -> Bool {
        var info = stat()
        return lstat(folder + "/" + RecordingManifest.fileName, &info) == 0
    }

    /// The `attempt-N` folders in `output`, by number.
    static func attemptNumbers(in output: String) -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []
        return names.compactMap { name in
            guard name.hasPrefix(prefix) else { return nil }
            return Int(name.dropFirst(prefix.count)).flatMap { $0 >= 2 ? $0 : nil }
        }.sorted()
    }

    /// `previous` relative to `directory` (both inside the job's output folder).
    var relativePrevious: String? {
        guard let previous else { return nil }
        let parent = (directory as NSString).deletingLastPathComponent
        if previous == parent { return ".." }
        return "../" + (previous as NSString).lastPathComponent
    }
}

/// The outage between two attempts, from their manifests.
enum Outage {
    /// The continuation a finished attempt states: from the previous attempt's last written frame
    /// to this attempt's first.
    static func continuation(
        plan: AttemptPlan,
        previous: RecordingManifest?,
        current: RecordingManifest
    ) -> RecordingManifest.Continuation? {
        guard let relative = plan.relativePrevious else { return nil }
        let start = previous.flatMap { lastFrame(of: $0) }
        let end = firstFrame(of: current)
        return RecordingManifest.Continuation(
            attempt: plan.attempt,
            previous: relative,
            outageStart: start.map(format),
            outageEnd: end.map(format),
            outageSeconds: start.flatMap { start in end.map { max(0, $0.timeIntervalSince(start)) } }
        )
    }

    /// Wall-clock time of the last frame written (the latest track end on the call timeline).
    static func lastFrame(of manifest: RecordingManifest) -> Date? {
        let ends = tracks(of: manifest).compactMap { $0.framesWritten > 0 ? $0.lastTimestamp : nil }
        guard let latest = ends.max(), let start = parse(manifest.startTime) else { return nil }
        return start.addingTimeInterval(latest)
    }

    /// Wall-clock time of the first frame written.
    static func firstFrame(of manifest: RecordingManifest) -> Date? {
        let starts = tracks(of: manifest).compactMap { $0.framesWritten > 0 ? $0.firstTimestamp : nil }
        guard let earliest = starts.min(), let start = parse(manifest.startTime) else { return nil }
        return start.addingTimeInterval(earliest)
    }

    private static func tracks(of manifest: RecordingManifest) -> [RecordingManifest.Track] {
        manifest.participants.flatMap { $0.segments.flatMap(\.tracks) }
    }

    static func parse(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
