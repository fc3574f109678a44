import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import ConclaveTestSupport
import Foundation
import Testing

/// Bad input gives a clear, typed error naming the file and the reason, never a crash.
@Suite("Bad input")
struct BadInputTests {
    func expectFileError(
        _ path: String,
        kind: MediaFileError.Kind,
        mentions words: [String],
        _ body: () throws -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            try body()
            Issue.record("no error for \(path)", sourceLocation: sourceLocation)
        } catch let error as MediaFileError {
            #expect(error.path == path, sourceLocation: sourceLocation)
            #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
            #expect(error.description.contains(path), sourceLocation: sourceLocation)
            for word in words {
                #expect(
                    error.description.contains(word),
                    "\(error) should mention \(word)",
                    sourceLocation: sourceLocation
                )
            }
        } catch {
            Issue.record("untyped error \(error)", sourceLocation: sourceLocation)
        }
    }

    func y4m(width: Int = 64, height: Int = 48, chroma: String = "C420jpeg", frames: Int = 2) -> [UInt8] {
        var bytes = Array("YUV4MPEG2 W\(width) H\(height) F30:1 Ip A1:1 \(chroma)\n".utf8)
        for frame in 0..<frames {
            bytes += Array("FRAME\n".utf8)
            bytes += [UInt8](repeating: UInt8(frame), count: width * height * 3 / 2)
        }
        return bytes
    }

    @Test("Missing, directory and unreadable paths")
    func unreadable() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("missing.y4m").path
        expectFileError(missing, kind: .unreadable, mentions: ["no such file"]) { _ = try Y4MReader(path: missing) }
        expectFileError(directory.path, kind: .unreadable, mentions: ["directory"]) {
            _ = try WAVReader(path: directory.path)
        }
        let webm = directory.appendingPathComponent("missing.webm").path
        expectFileError(webm, kind: .unreadable, mentions: ["cannot open"]) { _ = try MediaDemuxer(path: webm) }
        expectFileError(webm, kind: .unreadable, mentions: ["No such file"]) {
            _ = try FileMediaSource(path: webm, codec: .vp8)
        }
        let noWrite = directory.appendingPathComponent("no/such/dir/out.webm").path
        expectFileError(noWrite, kind: .writeFailed, mentions: ["cannot create"]) {
            _ = try MediaFileWriter(path: noWrite, tracks: [.opus(channels: 1)])
        }
    }

    @Test("Truncated files")
    func truncated() throws {
        let full = y4m()
        let cut = Array(full.prefix(full.count - 100))
        expectFileError("cut.y4m", kind: .truncated, mentions: ["frame 1"]) {
            let reader = try Y4MReader(bytes: cut, name: "cut.y4m")
            while try reader.nextFrame() != nil {}
        }
        expectFileError("header.wav", kind: .truncated, mentions: []) {
            _ = try WAVReader(bytes: Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8), name: "header.wav")
        }

        // A container cut after its first bytes: libavformat cannot find the streams.
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cut.webm").path
        let writer = try MediaFileWriter(path: path, tracks: [.opus(channels: 1)])
        try writer.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try bytes.prefix(20).write(to: URL(fileURLWithPath: path))
        do {
            _ = try FileMediaSource(path: path, codec: .opus)
            Issue.record("truncated WebM accepted")
        } catch let error as MediaFileError {
            #expect(error.path == path)
            #expect(error.kind == .malformed || error.kind == .unreadable || error.kind == .unsupported, "\(error)")
        }
    }

    @Test("Unsupported codec, chroma, sample rate and container")
    func unsupported() throws {
        expectFileError("c444.y4m", kind: .unsupported, mentions: ["C444", "4:2:0"]) {
            _ = try Y4MReader(bytes: y4m(chroma: "C444"), name: "c444.y4m")
        }
        var wav = WAVHeader.bytes(channels: 1, rate: 44_100, bits: 16, dataBytes: 0)
        expectFileError("441.wav", kind: .unsupported, mentions: ["44100"]) {
            _ = try WAVReader(bytes: wav, name: "441.wav")
        }
        wav = WAVHeader.bytes(channels: 1, rate: 48_000, bits: 8, dataBytes: 0)
        expectFileError("8bit.wav", kind: .unsupported, mentions: ["8-bit"]) {
            _ = try WAVReader(bytes: wav, name: "8bit.wav")
        }
        expectFileError("video.ogg", kind: .unsupported, mentions: ["ogg cannot hold vp8"]) {
            _ = try MediaFileWriter(path: "video.ogg", tracks: [.video(.vp8, width: 64, height: 48)])
        }
        expectFileError("h264.webm", kind: .unsupported, mentions: ["webm cannot hold h264"]) {
            _ = try MediaFileWriter(path: "h264.webm", tracks: [.video(.h264, width: 64, height: 48)])
        }
        expectFileError("out.avi", kind: .unsupported, mentions: [".avi"]) {
            _ = try MediaFileWriter(path: "out.avi", tracks: [.opus(channels: 1)])
        }

        // A file whose video codec we cannot pass through and whose pixels are not 4:2:0.
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("rgb.mkv").path
        let made = try runProcess(
            try which("ffmpeg"),
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=0.5", "-c:v", "ffv1",
                "-pix_fmt", "bgr0", "-y", path,
            ]
        )
        #expect(made.succeeded, "\(made.errorOutput)")
        expectFileError(path, kind: .unsupported, mentions: ["pixel format", "bgr0"]) {
            let source = try FileMediaSource(path: path, codec: .vp8)
            while try source.nextFrame() != nil {}
        }
        // And one with no audio at all.
        expectFileError(path, kind: .unsupported, mentions: ["no audio stream", "ffv1"]) {
            _ = try FileMediaSource(path: path, codec: .opus)
        }
    }

    @Test("Odd resolutions")
    func oddResolution() throws {
        expectFileError("odd.y4m", kind: .unsupported, mentions: ["65x48", "even"]) {
            _ = try Y4MReader(bytes: y4m(width: 65), name: "odd.y4m")
        }
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("odd.mkv").path
        let made = try runProcess(
            try which("ffmpeg"),
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc=size=65x49:rate=10:duration=0.5", "-c:v", "ffv1",
                "-pix_fmt", "yuv444p", "-y", path,
            ]
        )
        #expect(made.succeeded, "\(made.errorOutput)")
        expectFileError(path, kind: .unsupported, mentions: ["65x49"]) {
            _ = try FileMediaSource(path: path, codec: .h264)
        }
    }

    @Test("A full disk fails the write with the file and the reason")
    func diskFull() throws {
        let writer = try MediaFileWriter(path: "/dev/full", container: .webm, tracks: [.opus(channels: 1)])
        let packet = EncodedFrame(
            codec: .opus,
            data: [0x78] + [UInt8](repeating: 0x55, count: 200),
            rtpTimestamp: 0,
            isKeyframe: true
        )
        do {
            // The muxer buffers; a few hundred kilobytes force it to the device.
            for index in 0..<5_000 {
                try writer.write(packet, track: 0, pts: Int64(index * 960))
            }
            try writer.close()
            Issue.record("writing to /dev/full succeeded")
        } catch {
            #expect(error.path == "/dev/full")
            #expect(error.kind == .writeFailed)
            #expect(error.reason.contains("No space left"), "\(error)")
        }
        // A failed writer stays failed and closes without crashing.
        _ = try? writer.close()
    }

    @Test("A writer dropped without close() still leaves a playable file")
    func droppedWriter() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("dropped.webm").path
        do {
            let writer = try MediaFileWriter(path: path, tracks: [.opus(channels: 1)])
            let opus = try ConclaveOpus.OpusAudioEncoder()
            let tone = try ToneSource(frameLimit: 25)
            var timeline = EncoderTimeline()
            while let block = try tone.nextFrame() {
                try writer.write(try #require(try opus.encode(block)), track: 0, on: &timeline)
            }
        }
        #expect(try FFmpeg.decodeErrors(path) == "")
        #expect(try FFmpeg.packetCount(path, stream: "a:0") == 25)
    }

    @Test("Out-of-order timestamps are refused, not written")
    func outOfOrder() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("order.ogg").path
        let writer = try MediaFileWriter(path: path, tracks: [.opus(channels: 1)])
        let packet = EncodedFrame(codec: .opus, data: [0x78, 1, 2, 3], rtpTimestamp: 9_600, isKeyframe: true)
        try writer.write(packet, track: 0, pts: 9_600)
        // Earlier, equal, and a pts before its dts: all refused as libavformat would.
        let refused: [(pts: Int64, dts: Int64)] = [(8_640, 8_640), (9_600, 9_600), (10_000, 10_560)]
        for (pts, dts) in refused {
            do throws(MediaFileError) {
                try writer.write(packet, track: 0, pts: pts, dts: dts)
                Issue.record("pts \(pts) dts \(dts) was written")
            } catch {
                let kind: MediaFileError.Kind = error.kind
                #expect(kind == MediaFileError.Kind.malformed)
            }
        }
        try writer.write(packet, track: 0, pts: 10_560)
        try writer.close()
        #expect(throws: MediaFileError.self) { try writer.write(packet, track: 0, pts: 11_520) }
    }
}

/// Builds WAV headers for tests.
enum WAVHeader {
    static func bytes(channels: Int, rate: Int, bits: Int, dataBytes: Int) -> [UInt8] {
        func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        func le16(_ value: Int) -> [UInt8] { (0..<2).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        let block = channels * bits / 8
        return Array("RIFF".utf8) + le32(36 + dataBytes) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(channels)
            + le32(rate) + le32(rate * block) + le16(block) + le16(bits) + Array("data".utf8) + le32(dataBytes)
    }
}
