public import ConclaveCore
import Foundation

/// Reads 16-bit PCM WAV files at 48 kHz, mono or stereo, in 20 ms blocks: the raw audio input format.
///
/// Accepts plain PCM (format 1) and WAVE_FORMAT_EXTENSIBLE with the PCM sub-format. Unknown chunks
/// are skipped. A `data` chunk whose size runs past the end of the file (as written by streaming
/// tools) is read to the end. The last block is padded with silence to a whole 20 ms.
public final class WAVReader: AudioFrameSource {
    public let channels: Int
    public let timeline: FrameTimeline
    /// The number of the next 20 ms block.
    public private(set) var frameIndex = 0
    private let input: ByteInput
    private var remainingData: Int

    /// Opens a file.
    public convenience init(path: String, initialTimestamp: UInt32 = 0) throws(MediaFileError) {
        try self.init(input: ByteInput(path: path), initialTimestamp: initialTimestamp)
    }

    /// Reads from memory (`name` is used in errors).
    public convenience init(bytes: [UInt8], name: String = "<memory>", initialTimestamp: UInt32 = 0)
        throws(MediaFileError)
    {
        try self.init(input: ByteInput(bytes: bytes, name: name), initialTimestamp: initialTimestamp)
    }

    private init(input: ByteInput, initialTimestamp: UInt32) throws(MediaFileError) {
        self.input = input
        let path = input.path
        guard let riff = try input.read(12, what: "RIFF header") else {
            throw MediaFileError(path: path, kind: .truncated, reason: "empty file, expected a RIFF/WAVE header")
        }
        guard riff.starts(with: Array("RIFF".utf8)), Array(riff[8..<12]) == Array("WAVE".utf8) else {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "not a WAV file (no RIFF/WAVE signature)",
                byteOffset: 0
            )
        }
        var format: (channels: Int, rate: Int, bits: Int)?
        while true {
            let chunkOffset = input.offset
            let header = try input.require(8, what: "a data chunk")
            let identifier = String(decoding: header[0..<4], as: UTF8.self)
            let size = Int(header.littleEndian32(at: 4) ?? 0)
            if identifier == "fmt " {
                guard size >= 16, size <= 1_024 else {
                    throw MediaFileError(
                        path: path,
                        kind: .malformed,
                        reason: "fmt chunk of \(size) bytes",
                        byteOffset: chunkOffset
                    )
                }
                let body = try input.require(size + size % 2, what: "fmt chunk")
                var tag = body.littleEndian16(at: 0) ?? 0
                if tag == 0xFFFE, size >= 26 { tag = body.littleEndian16(at: 24) ?? 0 }
                guard tag == 1 else {
                    throw MediaFileError(
                        path: path,
                        kind: .unsupported,
                        reason: "audio format \(tag); only 16-bit PCM is supported",
                        byteOffset: chunkOffset
                    )
                }
                format = (
                    Int(body.littleEndian16(at: 2) ?? 0), Int(body.littleEndian32(at: 4) ?? 0),
                    Int(body.littleEndian16(at: 14) ?? 0)
                )
            } else if identifier == "data" {
                guard let format else {
                    throw MediaFileError(
                        path: path,
                        kind: .malformed,
                        reason: "data chunk before fmt chunk",
                        byteOffset: chunkOffset
                    )
                }
                guard format.bits == 16 else {
                    throw MediaFileError(
                        path: path,
                        kind: .unsupported,
                        reason: "\(format.bits)-bit samples; only 16-bit"
                    )
                }
                guard format.channels == 1 || format.channels == 2 else {
                    throw MediaFileError(
                        path: path,
                        kind: .unsupported,
                        reason: "\(format.channels) channels; only 1 or 2"
                    )
                }
                guard format.rate == AudioFrame.sampleRate else {
                    throw MediaFileError(
                        path: path,
                        kind: .unsupported,
                        reason: "sample rate \(format.rate) Hz; only 48000 Hz is supported"
                    )
                }
                channels = format.channels
                remainingData = size
                timeline = .audio(initialTimestamp: initialTimestamp)
                return
            } else {
                guard input.skipAvailable(size + size % 2) == size + size % 2 else {
                    throw MediaFileError(
                        path: path,
                        kind: .truncated,
                        reason: "\(identifier) chunk runs past the end",
                        byteOffset: chunkOffset
                    )
                }
            }
        }
    }

    public func nextFrame() throws(MediaFileError) -> AudioFrame? {
        let blockBytes = 960 * channels * 2
        guard remainingData > 0, try !input.isAtEnd() else { return nil }
        let wanted = min(blockBytes, remainingData)
        // A short final block (or a data size that overstates the file) is padded with silence.
        var bytes = try input.read(upTo: wanted)
        remainingData -= wanted
        guard !bytes.isEmpty else { return nil }
        bytes.removeLast(bytes.count % (2 * channels))
        var samples = [Int16](repeating: 0, count: 960 * channels)
        for index in 0..<(bytes.count / 2) {
            samples[index] = Int16(bitPattern: bytes.littleEndian16(at: index * 2) ?? 0)
        }
        do throws(RawMediaError) {
            let frame = try AudioFrame(
                channels: channels,
                samples: samples,
                rtpTimestamp: timeline.rtpTimestamp(forFrame: frameIndex)
            )
            frameIndex += 1
            return frame
        } catch {
            throw MediaFileError(
                path: input.path,
                kind: .malformed,
                reason: error.description,
                byteOffset: input.offset
            )
        }
    }
}

extension ByteInput {
    /// Skips without throwing on a short file; returns how many bytes were skipped.
    func skipAvailable(_ count: Int) -> Int { (try? skip(count)) ?? 0 }
}

/// Writes 16-bit PCM WAV files at 48 kHz (tests and the codec benchmark feed them to ffmpeg).
public final class WAVWriter {
    private let handle: FileHandle
    private let path: String
    private let channels: Int
    private var dataBytes = 0

    /// Creates (or truncates) `path` and writes a header, completed by `close()`.
    public init(path: String, channels: Int) throws(MediaFileError) {
        self.path = path
        self.channels = channels
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot create the file") }
        self.handle = handle
        try write(header())
    }

    deinit { try? handle.close() }

    private func header() -> [UInt8] {
        func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        func le16(_ value: Int) -> [UInt8] { (0..<2).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        var bytes = Array("RIFF".utf8) + le32(36 + dataBytes) + Array("WAVEfmt ".utf8) + le32(16)
        bytes += le16(1) + le16(channels) + le32(48_000) + le32(48_000 * channels * 2) + le16(channels * 2) + le16(16)
        bytes += Array("data".utf8) + le32(dataBytes)
        return bytes
    }

    /// Appends one block of samples.
    public func write(_ frame: AudioFrame) throws(MediaFileError) {
        var bytes = [UInt8](repeating: 0, count: frame.samples.count * 2)
        for (index, sample) in frame.samples.enumerated() {
            bytes[index * 2] = UInt8(truncatingIfNeeded: sample)
            bytes[index * 2 + 1] = UInt8(truncatingIfNeeded: sample >> 8)
        }
        try write(bytes)
        dataBytes += bytes.count
    }

    /// Rewrites the header with the final sizes and closes the file.
    public func close() throws(MediaFileError) {
        do {
            try handle.seek(toOffset: 0)
            try handle.write(contentsOf: header())
            try handle.close()
        } catch {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "\(error)")
        }
    }

    private func write(_ bytes: [UInt8]) throws(MediaFileError) {
        do { try handle.write(contentsOf: bytes) } catch {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "\(error)")
        }
    }
}
