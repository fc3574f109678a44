import ConclaveAV
import ConclaveCore
import ConclaveFiles
import Foundation

/// Audio files of a whole recording: the mix (`--audio-only`) and one stem per participant
/// (`--stems DIR`).
///
/// Every file is written beside its final name as an owner-only temporary file and renamed into
/// place once complete, so a crash or a full disk never leaves a half file under the real name;
/// the media is decrypted call audio, so it is 0600 like the recording it comes from.
public enum AudioExport {
    /// Samples per channel written per step (one second), also the progress granularity.
    static let block = AudioMixdown.sampleRate

    /// `--audio-only`: the mix to `.opus`/`.ogg`, `.flac` or `.wav` (by extension).
    ///
    /// `progress` gets the seconds written and the call's duration. Returns the segments that
    /// could not be used (the timeline's and the decoder's problems), which are silence in the file.
    @discardableResult
    public static func writeMix(
        _ timeline: CompositionTimeline,
        to path: String,
        options: AudioMixOptions,
        progress: (Double, Double) -> Void
    ) throws(ComposeError) -> [String] {
        let name = (path as NSString).pathExtension
        guard let format = AudioFileEncoder.Format(pathExtension: name) else {
            throw ComposeError(path: path, reason: "unknown audio format \".\(name)\"; use .opus, .ogg, .flac or .wav")
        }
        let mixdown = try AudioMixdown(timeline: timeline, options: options)
        let total = Double(mixdown.totalFrames) / Double(AudioMixdown.sampleRate)
        let file = try AtomicAudioFile(path: path, format: format, channels: AudioMixdown.channels)
        do throws(ComposeError) {
            progress(0, total)
            while let samples = try mixdown.next(frames: block) {
                try file.write(samples)
                progress(Double(mixdown.position) / Double(AudioMixdown.sampleRate), total)
            }
            try file.commit()
        } catch {
            file.discard()
            throw error
        }
        return timeline.problems + mixdown.problems
    }

    /// `--stems DIR`: one file per participant, each the call's full duration, silence-padded;
    /// returns the paths.
    ///
    /// Stems are what transcription tools take best: WAV, 16-bit, 48 kHz, mono (speech needs no
    /// stereo, and every tool reads WAV). Each starts at the call's start, so a word's time in a
    /// stem is its time in the call. File names come from the participant keys, reduced to
    /// letters, digits, `-`, `_` and `.`; the folder is created 0700 (or narrowed to it).
    /// `onProblem` gets each segment that could not be used (silence in its stem).
    public static func writeStems(
        _ timeline: CompositionTimeline,
        to directory: String,
        progress: (Double, Double) -> Void,
        onProblem: (String) -> Void = { _ in }
    ) throws(ComposeError) -> [String] {
        do throws(FileError) {
            try PrivateFiles.ensurePrivateDirectory(directory)
        } catch {
            throw ComposeError(path: error.path, reason: error.reasonForCompose)
        }
        let totalFrames = max(0, AudioParticipantTrack.samples(timeline.duration))
        let total = Double(totalFrames) / Double(AudioMixdown.sampleRate)
        let names = stemNames(for: timeline.participants.map(\.key))
        let tracks = timeline.participants.map(AudioParticipantTrack.init(participant:))
        var files: [AtomicAudioFile] = []
        do throws(ComposeError) {
            for name in names {
                files.append(try AtomicAudioFile(path: directory + "/" + name, format: .wav, channels: 1))
            }
            var buffer = [Float](repeating: 0, count: block)
            var position: Int64 = 0
            progress(0, total)
            while position < totalFrames {
                let count = Int(min(Int64(block), totalFrames - position))
                for (track, file) in zip(tracks, files) {
                    for index in 0..<count { buffer[index] = 0 }
                    buffer.withUnsafeMutableBufferPointer { output in
                        track.add(start: position, count: count, into: output, channels: 1)
                    }
                    try buffer.withUnsafeBufferPointer { samples throws(ComposeError) in
                        try file.write(UnsafeBufferPointer(rebasing: samples[0..<count]))
                    }
                }
                position += Int64(count)
                progress(Double(position) / Double(AudioMixdown.sampleRate), total)
            }
            for file in files { try file.commit() }
        } catch {
            for file in files { file.discard() }
            throw error
        }
        for problem in timeline.problems + tracks.flatMap(\.problems) { onProblem(problem) }
        return files.map(\.path)
    }

    /// A file-safe, unique name per key: letters, digits, `-`, `_` and `.` kept, anything else
    /// `_`, no leading dot, at most 100 characters, `-2`, `-3`, ... for repeats.
    static func stemNames(for keys: [String]) -> [String] {
        var used: Set<String> = []
        return keys.map { key in
            var base = String(
                key.unicodeScalars.prefix(100).map { scalar in
                    scalar.isASCII
                        && (CharacterSet.alphanumerics.contains(scalar) || "-_.".unicodeScalars.contains(scalar))
                        ? Character(scalar) : "_"
                }
            )
            if base.hasPrefix(".") { base = "_" + base.dropFirst() }
            if base.isEmpty { base = "participant" }
            var name = base + ".wav"
            var suffix = 2
            while !used.insert(name.lowercased()).inserted {
                name = "\(base)-\(suffix).wav"
                suffix += 1
            }
            return name
        }
    }
}

/// An audio file written under a temporary name beside `path` (0600) and renamed to `path` by
/// `commit()`; `discard()` removes it.
final class AtomicAudioFile {
    let path: String
    private let temporary: String
    private var encoder: AudioFileEncoder?

    init(path: String, format: AudioFileEncoder.Format, channels: Int) throws(ComposeError) {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        temporary =
            (directory.isEmpty ? "" : directory + "/") + ".\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        do throws(FileError) {
            close(try PrivateFiles.openPrivateFile(temporary, exclusive: true))
        } catch {
            throw ComposeError(path: error.path, reason: error.reasonForCompose)
        }
        do throws(MediaFileError) {
            encoder = try AudioFileEncoder(path: temporary, format: format, channels: channels)
        } catch {
            unlink(temporary)
            throw ComposeError(path: path, reason: error.reason)
        }
    }

    func write(_ samples: [Float]) throws(ComposeError) {
        do throws(MediaFileError) { try encoder?.write(samples) } catch {
            throw ComposeError(path: path, reason: error.reason)
        }
    }

    func write(_ samples: UnsafeBufferPointer<Float>) throws(ComposeError) {
        do throws(MediaFileError) { try encoder?.write(samples) } catch {
            throw ComposeError(path: path, reason: error.reason)
        }
    }

    /// Finishes the file, makes it durable and gives it its name.
    func commit() throws(ComposeError) {
        do throws(MediaFileError) { try encoder?.close() } catch {
            throw ComposeError(path: path, reason: error.reason)
        }
        encoder = nil
        let descriptor = open(temporary, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0, fsync(descriptor) == 0 else {
            let code = errno
            if descriptor >= 0 { close(descriptor) }
            throw ComposeError(path: path, reason: "cannot sync the file: \(String(cString: strerror(code)))")
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            throw ComposeError(path: path, reason: "cannot rename into place: \(String(cString: strerror(errno)))")
        }
        let directory = (path as NSString).deletingLastPathComponent
        do throws(FileError) { try PrivateFiles.syncDirectory(directory.isEmpty ? "." : directory) } catch {
            throw ComposeError(path: error.path, reason: error.reasonForCompose)
        }
    }

    /// Removes the unfinished file.
    func discard() {
        encoder = nil
        unlink(temporary)
    }
}

extension FileError {
    /// The reason without the path, for a `ComposeError` that names the path itself.
    fileprivate var reasonForCompose: String {
        switch kind {
        case .system(let operation, let code): "cannot \(operation) it: \(String(cString: strerror(code)))"
        case .wrongType(let expected, let found): "it is a \(found), not a \(expected)"
        case .wrongOwner(let uid): "refusing it: owned by uid \(uid), not by this user"
        case .insecureMode(let mode): "refusing it: mode \(String(mode & 0o7777, radix: 8)) lets other users in"
        case .tooLarge(let limit): "refusing it: larger than \(limit) bytes"
        case .exists: "it already exists"
        }
    }
}
