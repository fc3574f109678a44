import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveOpus
import ConclaveTestSupport
import ConclaveVPX
import Foundation
import Testing

/// Each encoder's output, written to a file, decodes in ffmpeg without a single error and with the
/// frame count that was encoded.
@Suite("Encoder output decodes in ffmpeg")
struct EncoderFileTests {
    static let frames = 60

    func encodePattern(_ encoder: any VideoEncoding, keyframeAt: Set<Int> = []) throws -> [EncodedFrame] {
        let source = try PatternSource(width: 320, height: 240, frameRate: 30, frameLimit: Self.frames)
        var output: [EncodedFrame] = []
        var index = 0
        while let picture = try source.nextFrame() {
            output += try encoder.encode(picture, forceKeyframe: keyframeAt.contains(index))
            index += 1
        }
        return output
    }

    func writeFile(_ frames: [EncodedFrame], path: String, track: MediaFileWriter.Track) throws {
        let writer = try MediaFileWriter(path: path, tracks: [track])
        var timeline = EncoderTimeline()
        for frame in frames { try writer.write(frame, track: 0, on: &timeline) }
        try writer.close()
    }

    @Test("VP8 in IVF, WebM and Matroska")
    func vp8() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240, bitrate: 400_000))
        let frames = try encodePattern(encoder)
        #expect(frames.count == Self.frames)
        #expect(frames.first?.isKeyframe == true)
        for name in ["out.ivf", "out.webm", "out.mkv"] {
            let path = directory.appendingPathComponent(name).path
            try writeFile(frames, path: path, track: .video(.vp8, width: 320, height: 240))
            #expect(try FFmpeg.decodeErrors(path) == "", "\(name)")
            #expect(try FFmpeg.frameCount(path) == Self.frames, "\(name)")
            #expect(try demuxedData(path) == frames.map(\.data), "\(name): demuxed bytes differ")
        }
    }

    /// Every packet of the file's first stream, as the demuxer returns it (no transcoding).
    func demuxedData(_ path: String) throws -> [[UInt8]] {
        let demuxer = try MediaDemuxer(path: path)
        var packets: [[UInt8]] = []
        while let packet = try demuxer.readPacket() {
            if packet.streamIndex == 0 { packets.append(packet.data) }
        }
        return packets
    }

    @Test("H264 as raw Annex-B and in Matroska")
    func h264() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let encoder = try H264Encoder(
            configuration: H264EncoderConfiguration(width: 320, height: 240, bitrate: 400_000)
        )
        let frames = try encodePattern(encoder)
        #expect(frames.count == Self.frames)
        let raw = directory.appendingPathComponent("out.h264").path
        try RawFiles.annexB(frames, to: raw)
        #expect(try FFmpeg.decodeErrors(raw) == "")
        #expect(try FFmpeg.frameCount(raw) == Self.frames)
        let mkv = directory.appendingPathComponent("out.mkv").path
        try writeFile(frames, path: mkv, track: .video(.h264, width: 320, height: 240))
        #expect(try FFmpeg.decodeErrors(mkv) == "")
        #expect(try FFmpeg.frameCount(mkv) == Self.frames)
        #expect(try demuxedData(raw) == frames.map(\.data), "raw Annex-B: demuxed access units differ")
        #expect(try demuxedData(mkv) == frames.map(\.data), "Matroska: demuxed access units differ")

        // MP4 stores H264 length-prefixed with SPS/PPS out of band; the demuxer gives Annex-B back.
        let mp4 = directory.appendingPathComponent("out.mp4").path
        let remux = try runProcess(try which("ffmpeg"), ["-v", "error", "-i", mkv, "-c", "copy", "-y", mp4])
        #expect(remux.succeeded, "\(remux.errorOutput)")
        let fromMP4 = try demuxedData(mp4)
        #expect(fromMP4.count == Self.frames)
        #expect(fromMP4 == frames.map(\.data), "MP4: demuxed access units differ")
    }

    @Test("Opus in Ogg, WebM and Matroska, mono and stereo")
    func opus() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for channels in [1, 2] {
            let encoder = try OpusAudioEncoder(configuration: OpusEncoderConfiguration(channels: channels))
            let tone = try ToneSource(channels: channels, frameLimit: 100)
            var packets: [EncodedFrame] = []
            while let block = try tone.nextFrame() {
                packets.append(try #require(try encoder.encode(block)))
            }
            #expect(packets.count == 100)
            for name in ["out\(channels).ogg", "out\(channels).webm", "out\(channels).mkv"] {
                let path = directory.appendingPathComponent(name).path
                try writeFile(packets, path: path, track: .opus(channels: channels, preSkip: encoder.lookahead))
                #expect(try FFmpeg.decodeErrors(path) == "", "\(name)")
                #expect(try FFmpeg.packetCount(path, stream: "a:0") == 100, "\(name)")
                // 100 packets of 20 ms: ffprobe's decoded frame count matches the packet count.
                #expect(try FFmpeg.frameCount(path, stream: "a:0") == 100, "\(name)")
            }
        }
    }
}
