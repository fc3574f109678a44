import ArgumentParser
import ConclaveCompose
import ConclaveFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `conclave recordings compose`: one file of the whole call from a recording folder.
struct ComposeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compose",
        abstract:
            "Compose a recording into one video file: every participant tiled with their name, and the mixed audio.",
        discussion: """
            The output's extension chooses the format: .mp4 (H264 + AAC), .webm (VP8 + Opus) or .mkv \
            (H264 + Opus). It is written under a temporary name and renamed when complete, owner-only \
            (0600) in an owner-only folder. A segment that is missing or cannot be decoded is composed \
            as a gap and listed at the end; a recording still being written is composed up to now.
            """
    )

    @Argument(help: "The recording folder (holding manifest.json).")
    var directory: String

    @Option(help: "The output file: .mp4, .webm or .mkv; with --audio-only .opus, .ogg, .flac or .wav.")
    var out: String?

    @Option(help: "The picture size, WxH (even numbers).")
    var size = "1280x720"

    @Option(help: "Frames per second.")
    var fps = 30

    @Option(help: "grid: everyone in equal tiles; speaker: the active speaker large, the others in a strip.")
    var layout: LayoutChoice = .grid

    @Option(
        help: """
            libx264's speed preset: ultrafast, superfast, veryfast, faster, fast, medium, slow, \
            slower or veryslow. ultrafast (the default) composes a call of four at 1280x720/30 at \
            about 5x real time on one core (veryfast: about 2x); slower presets make smaller files \
            (ultrafast's are about twice veryfast's at the same quality) for more CPU time. \
            Ignored for .webm (VP8) and when only OpenH264 is there.
            """
    )
    var preset = CompositeOptions().x264Preset

    @Flag(help: "Write only the mixed audio of the call to --out.")
    var audioOnly = false

    @Option(help: "Also write one WAV per participant into this folder, each the call's full length.")
    var stems: String?

    @Option(help: "Loudness of the mix: none (as recorded, peak-limited) or r128 (EBU R128, -16 LUFS).")
    var loudness: LoudnessChoice = .none

    enum LayoutChoice: String, ExpressibleByArgument, CaseIterable {
        case grid
        case speaker
    }

    enum LoudnessChoice: String, ExpressibleByArgument, CaseIterable {
        case none
        case r128
    }

    func validate() throws {
        guard Self.size(size) != nil else {
            throw ValidationError("--size must be WxH with even numbers from 160x90 to 3840x2160, not \(size)")
        }
        guard (1...60).contains(fps) else { throw ValidationError("--fps must be 1 to 60") }
        guard CompositeOptions.x264Presets.contains(preset) else {
            throw ValidationError(
                "--preset must be one of \(CompositeOptions.x264Presets.joined(separator: ", ")), not \(preset)"
            )
        }
        guard out != nil || stems != nil else { throw ValidationError("give --out FILE, --stems DIR or both") }
        if let out {
            let ext = (out as NSString).pathExtension.lowercased()
            let allowed = audioOnly ? ["opus", "ogg", "flac", "wav"] : ["mp4", "webm", "mkv"]
            guard allowed.contains(ext) else {
                throw ValidationError(
                    "--out must end in \(allowed.map { "." + $0 }.joined(separator: ", ")), not \(out)"
                )
            }
        } else if audioOnly {
            throw ValidationError("--audio-only needs --out FILE")
        }
    }

    func run() throws {
        guard let (width, height) = Self.size(size) else { throw ValidationError("bad --size \(size)") }
        var options = CompositeOptions()
        options.width = width
        options.height = height
        options.frameRate = fps
        options.layout = layout == .grid ? .grid : .speaker
        options.x264Preset = preset
        let mix = AudioMixOptions(loudness: loudness == .r128 ? .ebuR128 : .none)
        var reporter = ProgressReporter(terminal: isatty(STDERR_FILENO) == 1)
        var problems: [String] = []
        var summary: [String: Any] = ["done": true]
        do {
            let timeline = try CompositionTimeline.load(directory: directory)
            if let stems {
                let written = try AudioExport.writeStems(
                    timeline,
                    to: stems,
                    progress: { reporter.update(done: $0, total: $1, stage: "stems") },
                    onProblem: { problems.append($0) }
                )
                reporter.clear()
                summary["stems"] = written
                if reporter.terminal { print("wrote \(written.count) stems in \(stems)") }
            }
            if let out, audioOnly {
                problems += try AudioExport.writeMix(timeline, to: out, options: mix) {
                    reporter.update(done: $0, total: $1, stage: "mix")
                }
                reporter.clear()
                summary["out"] = out
                if reporter.terminal {
                    print("wrote the mix of \(String(format: "%.1f", timeline.duration)) s to \(out)")
                }
            } else if let out {
                let report = try composite(timeline, to: out, options: options, mix: mix, reporter: &reporter)
                problems += report.problems
                summary["out"] = out
                summary["seconds"] = report.duration
                summary["frames"] = report.frames
                if report.videoEncoder != "libx264" && !audioOnly {
                    FileHandle.standardError.write(
                        Data(
                            "conclave: note: --preset \(preset) is for libx264; \(report.videoEncoder) ignores it\n"
                                .utf8
                        )
                    )
                }
                if reporter.terminal {
                    print(
                        "composed \(out): \(String(format: "%.1f", report.duration)) s, \(report.frames) frames, "
                            + "\(report.videoEncoder)\(report.audioEncoder.map { " + \($0)" } ?? "")"
                    )
                }
            }
        } catch {
            reporter.clear()
            throw RecordCommandError(message: String(describing: error))
        }
        var seen = Set<String>()
        problems = problems.filter { seen.insert($0).inserted }
        if !reporter.terminal {
            summary["problems"] = problems
            reporter.json(summary)
        }
        for problem in problems { FileHandle.standardError.write(Data("conclave: problem: \(problem)\n".utf8)) }
    }

    /// The composite video with the mixed audio, written privately and renamed into place.
    private func composite(
        _ timeline: CompositionTimeline,
        to out: String,
        options: CompositeOptions,
        mix: AudioMixOptions,
        reporter: inout ProgressReporter
    ) throws -> CompositionReport {
        let audio = try AudioMixdown(timeline: timeline, options: mix)
        let speakers = options.layout == .speaker ? try ActiveSpeakerTimeline(timeline: timeline) : nil
        let output = PrivateOutput(out)
        try output.prepare()
        do {
            let report = try VideoComposition.compose(
                timeline,
                to: output.temporary,
                options: options,
                audio: audio,
                speakers: speakers
            ) { reporter.update(done: $0, total: $1, stage: "composite") }
            reporter.clear()
            try output.commit()
            return report
        } catch {
            output.discard()
            throw error
        }
    }

    /// `WxH` with even sizes in a sensible range, or nil.
    static func size(_ text: String) -> (Int, Int)? {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]),
            (160...3_840).contains(width), (90...2_160).contains(height), width % 2 == 0, height % 2 == 0
        else { return nil }
        return (width, height)
    }
}

/// The output file: written owner-only under a temporary name beside the target, in an owner-only
/// folder, and renamed over the target only once complete, so a failed or killed composition
/// never leaves a truncated file under the name asked for.
private struct PrivateOutput {
    let path: String
    let folder: String
    let temporary: String

    init(_ path: String) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        self.folder = folder.isEmpty ? "." : folder
        let name = (path as NSString).lastPathComponent
        let ext = (path as NSString).pathExtension
        // The extension stays last: it names the format.
        self.temporary = "\(self.folder)/.\(name).\(getpid()).partial.\(ext)"
    }

    func prepare() throws(FileError) {
        try PrivateFiles.ensurePrivateDirectory(folder, createParents: true, policy: .narrow)
        try PrivateFiles.createPrivateFile(temporary)
    }

    func commit() throws {
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            discard()
            throw RecordCommandError(message: "\(path): cannot put the composite in place: \(reason)")
        }
        try PrivateFiles.syncDirectory(folder)
    }

    func discard() { unlink(temporary) }
}

/// Progress on stderr: a bar with the ETA on a terminal, else one JSON line a second on stdout.
private struct ProgressReporter {
    let terminal: Bool
    private var started = Date()
    private var stage = ""
    private var lastPrint: Date?
    private var drawn = false

    init(terminal: Bool) { self.terminal = terminal }

    mutating func update(done: Double, total: Double, stage: String) {
        let now = Date()
        if stage != self.stage {
            self.stage = stage
            started = now
            lastPrint = nil
        }
        let interval = terminal ? 0.2 : 1.0
        if let lastPrint, now.timeIntervalSince(lastPrint) < interval, done < total { return }
        lastPrint = now
        let elapsed = now.timeIntervalSince(started)
        let fraction = total > 0 ? min(1, done / total) : 1
        let eta = fraction > 0 ? elapsed / fraction - elapsed : nil
        if terminal {
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            let remaining = eta.map { Self.clock($0) } ?? "--:--"
            let line = String(
                format: "\r%@ [%@] %3d%%  %@ / %@  ETA %@ ",
                stage,
                bar,
                Int(fraction * 100),
                Self.clock(done),
                Self.clock(total),
                remaining
            )
            FileHandle.standardError.write(Data(line.utf8))
            drawn = true
        } else {
            var fields: [String: Any] = [
                "stage": stage, "composed": (done * 10).rounded() / 10, "total": (total * 10).rounded() / 10,
                "elapsed": (elapsed * 10).rounded() / 10,
            ]
            if let eta { fields["eta"] = (eta * 10).rounded() / 10 }
            json(fields)
        }
    }

    mutating func clear() {
        guard terminal, drawn else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        drawn = false
    }

    func json(_ fields: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func clock(_ seconds: Double) -> String {
        let whole = Int(max(0, seconds.isFinite ? seconds : 0))
        return String(format: "%d:%02d", whole / 60, whole % 60)
    }
}
