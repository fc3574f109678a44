public import ConclaveCore
import Foundation

/// Reads YUV4MPEG2 (`.y4m`) files with 4:2:0 chroma: the raw video input format.
///
/// Header parameters `W`, `H` and `F` are required; `C` must be a 4:2:0 variant (or absent, which
/// means 4:2:0); interlacing and aspect parameters are ignored. Every problem is a `MediaFileError`
/// naming the file, the byte offset and the reason.
public final class Y4MReader: VideoFrameSource {
    public let width: Int
    public let height: Int
    public let timeline: FrameTimeline
    /// The number of the next frame.
    public private(set) var frameIndex = 0
    private let input: ByteInput
    private let frameBytes: Int

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
        guard let line = try input.readLine(maxLength: 1_024, what: "Y4M header") else {
            throw MediaFileError(path: path, kind: .truncated, reason: "empty file, expected a YUV4MPEG2 header")
        }
        let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        guard fields.first == "YUV4MPEG2" else {
            throw MediaFileError(
                path: path,
                kind: .malformed,
                reason: "not a Y4M file (no YUV4MPEG2 signature)",
                byteOffset: 0
            )
        }
        var width: Int?
        var height: Int?
        var rate: (Int, Int)?
        for field in fields.dropFirst() {
            guard let tag = field.first else { continue }
            let value = String(field.dropFirst())
            switch tag {
            case "W": width = Int(value)
            case "H": height = Int(value)
            case "F":
                let parts = value.split(separator: ":")
                if parts.count == 2, let numerator = Int(parts[0]), let denominator = Int(parts[1]), numerator > 0,
                    denominator > 0, numerator <= 1_000_000, denominator <= 1_000_000
                {
                    rate = (numerator, denominator)
                } else {
                    throw MediaFileError(
                        path: path,
                        kind: .malformed,
                        reason: "bad frame rate F\(value)",
                        byteOffset: 0
                    )
                }
            case "C":
                guard value.hasPrefix("420") else {
                    throw MediaFileError(
                        path: path,
                        kind: .unsupported,
                        reason: "chroma C\(value); only 4:2:0 (C420*) is supported"
                    )
                }
            default: continue
            }
        }
        guard let width, let height, width > 0, height > 0 else {
            throw MediaFileError(path: path, kind: .malformed, reason: "header lacks a positive W and H", byteOffset: 0)
        }
        do throws(RawMediaError) {
            try VideoFrame.validate(width: width, height: height)
        } catch {
            throw MediaFileError(path: path, kind: .unsupported, reason: error.description)
        }
        guard let rate else {
            throw MediaFileError(path: path, kind: .malformed, reason: "header lacks a frame rate (F)", byteOffset: 0)
        }
        self.width = width
        self.height = height
        self.frameBytes = VideoFrame.byteCount(width: width, height: height)
        self.timeline = FrameTimeline(
            clockRate: 90_000,
            rateNumerator: rate.0,
            rateDenominator: rate.1,
            initialTimestamp: initialTimestamp
        )
    }

    public func nextFrame() throws(MediaFileError) -> VideoFrame? {
        let frameOffset = input.offset
        guard let line = try input.readLine(maxLength: 1_024, what: "FRAME marker") else { return nil }
        guard line.starts(with: Array("FRAME".utf8)) else {
            throw MediaFileError(
                path: input.path,
                kind: .malformed,
                reason: "expected FRAME marker for frame \(frameIndex)",
                byteOffset: frameOffset
            )
        }
        let pixels = try input.require(frameBytes, what: "frame \(frameIndex) pixels")
        let frame: VideoFrame
        do throws(RawMediaError) {
            frame = try VideoFrame(
                width: width,
                height: height,
                data: pixels,
                rtpTimestamp: timeline.rtpTimestamp(forFrame: frameIndex)
            )
        } catch {
            throw MediaFileError(path: input.path, kind: .malformed, reason: error.description, byteOffset: frameOffset)
        }
        frameIndex += 1
        return frame
    }
}

/// Writes YUV4MPEG2 files (tests and the codec benchmark feed them to ffmpeg).
public final class Y4MWriter {
    private let handle: FileHandle
    private let path: String

    /// Creates (or truncates) `path` and writes the header.
    public init(path: String, width: Int, height: Int, frameRate: Int) throws(MediaFileError) {
        self.path = path
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw MediaFileError(path: path, kind: .writeFailed, reason: "cannot create the file") }
        self.handle = handle
        try write(Array("YUV4MPEG2 W\(width) H\(height) F\(frameRate):1 Ip A1:1 C420jpeg\n".utf8))
    }

    deinit { try? handle.close() }

    /// Appends one frame.
    public func write(_ frame: VideoFrame) throws(MediaFileError) {
        try write(Array("FRAME\n".utf8))
        try write(frame.data)
    }

    /// Flushes and closes the file.
    public func close() throws(MediaFileError) {
        do { try handle.close() } catch {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "\(error)")
        }
    }

    private func write(_ bytes: [UInt8]) throws(MediaFileError) {
        do { try handle.write(contentsOf: bytes) } catch {
            throw MediaFileError(path: path, kind: .writeFailed, reason: "\(error)")
        }
    }
}
