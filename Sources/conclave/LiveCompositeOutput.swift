import ArgumentParser
import ConclaveCall
import ConclaveCompose
import ConclaveCore
import ConclaveFiles
import Foundation

/// `--composite FILE` of `record` and `join --record`: the call's live composite, fed with what
/// the call received and decrypted.
///
/// The adapter lives here rather than in ConclaveCall: the call does not depend on the
/// composition (and its libavfilter); the executable joins the two.
final class LiveCompositeOutput: CallMediaObserver {
    let composite: LiveComposite
    /// The file of the composite's figures, written when it ends.
    let sidecar: String

    /// Where `--composite` writes: a bare file name goes into the recording folder, beside the
    /// participants' files; a path is taken as given.
    static func path(_ argument: String, recording directory: String) -> String {
        argument.contains("/") ? argument : (directory as NSString).appendingPathComponent(argument)
    }

    /// Refuses, before anything touches the network or the disk, a `--composite` path where a file
    /// already is (checked again when the file is created). With no recording folder given yet,
    /// a bare name lands in a new folder and cannot clash.
    static func refuseExisting(_ argument: String, recording directory: String?) throws {
        guard argument.contains("/") || directory != nil else { return }
        let path = Self.path(argument, recording: directory ?? ".")
        var status = stat()
        if lstat(path, &status) == 0 {
            throw ValidationError("--composite \(path) already exists; a composite is never written over a file")
        }
    }

    /// Creates the file (refused if it exists) owner-only in an owner-only folder and starts the
    /// composite.
    init(path: String, frameRate: Int?) throws {
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try PrivateFiles.ensurePrivateDirectory(folder.isEmpty ? "." : folder, createParents: true, policy: .narrow)
            // Never over an existing file: a composite of an earlier call is not replaced.
            close(try PrivateFiles.openPrivateFile(path, exclusive: true))
        } catch {
            throw RecordCommandError(message: "cannot write the composite: \(error)")
        }
        var options = CompositeOptions()
        if let frameRate { options.frameRate = frameRate }
        do {
            composite = try LiveComposite(path: path, options: options)
        } catch {
            unlink(path)
            throw RecordCommandError(message: "cannot write the composite: \(error)")
        }
        sidecar = path + ".json"
    }

    func participantJoined(feedID: UInt64, display: String?) {
        composite.participantJoined(feedID: feedID, display: display)
    }

    func participantLeft(feedID: UInt64) { composite.participantLeft(feedID: feedID) }

    func received(_ media: ReceivedMedia) {
        // Only decrypted frames: a frame that did not decrypt never reaches the composite.
        guard case .frame(let frame) = media else { return }
        composite.received(feedID: frame.feedID, frame: frame.frame)
    }

    func senderReport(_ report: SubscribedSenderReport) {}

    /// Finishes the file and writes its figures beside it (`FILE.json`); returns them.
    func finish() async -> LiveComposite.Report {
        let report = await composite.finish()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        if let data = try? encoder.encode(report) {
            try? PrivateFiles.writeAtomically(data, to: sidecar)
        }
        return report
    }

    /// The end's summary line.
    static func summary(_ report: LiveComposite.Report) -> String {
        "\(report.path): composite of \(String(format: "%.1f", report.duration)) s, \(report.frames) frames, "
            + "\(report.videoFramesDropped) input video frames dropped"
    }
}

/// The live composite's counts in the status lines.
struct CompositeFigures: Encodable, Sendable {
    var compositeFrames: Int
    var compositeVideoFramesDropped: Int
    var compositeAudioFramesDropped: Int

    init(_ figures: LiveComposite.Figures) {
        compositeFrames = figures.frames
        compositeVideoFramesDropped = figures.videoFramesDropped
        compositeAudioFramesDropped = figures.audioFramesDropped
    }

    init(report: LiveComposite.Report) {
        compositeFrames = report.frames
        compositeVideoFramesDropped = report.videoFramesDropped
        compositeAudioFramesDropped = report.audioFramesDropped
    }
}

/// A status report with the live composite's counts added (none without a composite).
struct CompositeStatus<Report: StatusReport>: StatusReport {
    var report: Report
    var composite: CompositeFigures?

    func encode(to encoder: any Encoder) throws {
        try report.encode(to: encoder)
        try composite?.encode(to: encoder)
    }

    func terminalText() -> String {
        guard let composite else { return report.terminalText() }
        return report.terminalText()
            + "\ncomposite: \(composite.compositeFrames) frames, "
            + "\(composite.compositeVideoFramesDropped) input video frames dropped"
    }
}
