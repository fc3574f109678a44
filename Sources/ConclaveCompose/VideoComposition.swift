import ConclaveAV
import ConclaveCore
import Foundation

/// What a composite is made as.
public struct CompositeOptions: Sendable, Hashable {
    public var width = 1280
    public var height = 720
    public var frameRate = 30
    public var layout = CompositeLayout.grid
    /// The font of the names (Debian's fonts-dejavu-core).
    public var fontFile = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    /// libx264's speed preset (ignored by VP8 and OpenH264). ultrafast by default: it composes
    /// a call of four at 1280x720/30 at about 5x real time on one core, where veryfast manages
    /// about 2x; the price is a file about twice as large at the same quality.
    public var x264Preset = MediaFileEncoder.VideoSettings.defaultX264Preset
    /// libx264's speed presets, fastest first.
    public static let x264Presets = MediaFileEncoder.VideoSettings.x264Presets

    public init() {}
}

/// The mixed audio of a composite, 48 kHz stereo Float32 interleaved on the call timeline: the
/// audio side's `AudioMixdown`.
public protocol CompositeAudioSource: AnyObject {
    /// The next `frames` samples per channel (fewer at the end), nil after the timeline's duration.
    func next(frames: Int) throws(ComposeError) -> [Float]?
    /// Segments that could not be decoded (composed as silence), one line each.
    var problems: [String] { get }
}

/// Who the speaker layout shows large: the audio side's `ActiveSpeakerTimeline`.
public protocol SpeakerSource: Sendable {
    /// The participant key of the active speaker at `time` (seconds on the call timeline), nil
    /// when nobody speaks.
    func speaker(at time: Double) -> String?
}

extension AudioMixdown: CompositeAudioSource {}

extension ActiveSpeakerTimeline: SpeakerSource {}

/// What a finished composition made and what it could not use.
public struct CompositionReport: Sendable, Hashable {
    public var path: String
    /// Pictures in the file: the call's duration at the frame rate.
    public var frames: Int
    public var duration: Double
    public var videoEncoder: String
    public var audioEncoder: String?
    /// Segments composed as gaps or silence, one line each.
    public var problems: [String]
    /// The libavfilter graphs used, in order of first use (bench/compose runs the same with the
    /// `ffmpeg` program).
    public var graphs: [String]
}

/// The composite of a recording: every participant's video placed on the call timeline, tiled
/// by libavfilter, with their names, and encoded with the mixed audio into one file.
///
/// At each output frame time every tile shows its participant's latest picture at or before that
/// time; a participant without a picture for more than a second (a gap, video off) gets a plain
/// tile with the name instead of a frozen picture. A tile is there from the start of the
/// participant's segment (their join) to its end (their leave). The arrangement only changes when
/// the set of tiles (or a tile's kind or input size, or the speaker) changes, so one filter graph
/// serves each such period. Everything runs on the calling thread, which owns every libav* object
/// of the composition.
public enum VideoComposition {
    /// How long a participant may go without a picture before the tile shows the name instead.
    public static let staleAfter = 1.0

    /// Composes `timeline` into `path` (`.mp4`, `.webm` or `.mkv`).
    ///
    /// - Parameters:
    ///   - audio: the mix to encode alongside; nil for a file without audio.
    ///   - speakers: who speaks when, for the speaker layout (required by it).
    ///   - progress: seconds composed and total seconds, after each picture.
    public static func compose(
        _ timeline: CompositionTimeline,
        to path: String,
        options: CompositeOptions = .init(),
        audio: (any CompositeAudioSource)? = nil,
        speakers: (any SpeakerSource)? = nil,
        progress: (Double, Double) -> Void = { _, _ in }
    ) throws(ComposeError) -> CompositionReport {
        let ext = (path as NSString).pathExtension
        guard let format = MediaFileEncoder.Format(pathExtension: ext) else {
            throw ComposeError(path: path, reason: "unknown output format .\(ext); use .mp4, .webm or .mkv")
        }
        if options.layout == .speaker && speakers == nil {
            throw ComposeError(path: timeline.directory, reason: "the speaker layout needs the speaker timeline")
        }
        let encoder = try options.makeEncoder(path: path, format: format, audio: audio != nil)
        let compositor = try Compositor(timeline: timeline, options: options, speakers: speakers, encoder: encoder)
        let total = Int((timeline.duration * Double(options.frameRate)).rounded())
        var samplesWritten = 0
        for index in 0..<total {
            try compositor.compose(frame: index)
            if let audio {
                // Audio up to the end of this picture, in whole samples.
                let due = (index + 1) * MediaFileEncoder.audioSampleRate / options.frameRate
                if due > samplesWritten, let block = try audio.next(frames: due - samplesWritten) {
                    samplesWritten += block.count / MediaFileEncoder.audioChannels
                    try write { () throws(MediaFileError) in try encoder.writeAudio(block) }
                }
            }
            progress(Double(index + 1) / Double(options.frameRate), timeline.duration)
        }
        try compositor.finish()
        try write { () throws(MediaFileError) in try encoder.finish() }
        progress(timeline.duration, timeline.duration)
        return CompositionReport(
            path: path,
            frames: encoder.framesWritten,
            duration: Double(encoder.framesWritten) / Double(options.frameRate),
            videoEncoder: encoder.videoEncoderName,
            audioEncoder: encoder.audioEncoderName,
            problems: unique(timeline.problems + compositor.problems + (audio?.problems ?? [])),
            graphs: compositor.graphs
        )
    }

    /// The lines in order, each once (the mix repeats the timeline's problems).
    static func unique(_ lines: [String]) -> [String] {
        var seen = Set<String>()
        return lines.filter { seen.insert($0).inserted }
    }

    static func write(_ body: () throws(MediaFileError) -> Void) throws(ComposeError) {
        do { try body() } catch { throw ComposeError(path: error.path, reason: error.reason) }
    }
}

extension CompositeOptions {
    /// The encoder of a composite (a recording's or the live one) with these options' picture
    /// and preset, after checking that the font for the names is there.
    func makeEncoder(
        path: String,
        format: MediaFileEncoder.Format,
        audio: Bool,
        muxerOptions: [String: String] = [:]
    ) throws(ComposeError) -> MediaFileEncoder {
        guard FileManager.default.isReadableFile(atPath: fontFile) else {
            throw ComposeError(
                path: fontFile,
                reason: "the font for the names is missing (Debian: apt install fonts-dejavu-core)"
            )
        }
        var settings = MediaFileEncoder.VideoSettings(width: width, height: height, frameRate: frameRate)
        settings.x264Preset = x264Preset
        do {
            return try MediaFileEncoder(
                path: path,
                format: format,
                video: settings,
                audio: audio,
                muxerOptions: muxerOptions
            )
        } catch {
            throw ComposeError(path: path, reason: error.reason)
        }
    }
}
