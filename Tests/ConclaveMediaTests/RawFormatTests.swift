import ConclaveAV
import ConclaveCore
import ConclaveMedia
import ConclaveOpus
import ConclaveTestSupport
import Foundation
import Testing

/// Y4M and WAV round trips, their agreement with ffmpeg, fuzzing of the readers and the demuxer,
/// and the media clock.
@Suite("Raw formats and fuzzing")
struct RawFormatTests {
    @Test("Y4M and WAV written by us read back identically and are accepted by ffmpeg")
    func roundTrip() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let y4m = directory.appendingPathComponent("p.y4m").path
        let pattern = try PatternSource(width: 128, height: 96, frameRate: 25, frameLimit: 10)
        let writer = try Y4MWriter(path: y4m, width: 128, height: 96, frameRate: 25)
        var pictures: [VideoFrame] = []
        while let picture = try pattern.nextFrame() {
            pictures.append(picture)
            try writer.write(picture)
        }
        try writer.close()
        let reader = try Y4MReader(path: y4m)
        var read: [VideoFrame] = []
        while let picture = try reader.nextFrame() { read.append(picture) }
        #expect(read == pictures)
        #expect(try FFmpeg.frameCount(y4m) == 10)

        let wav = directory.appendingPathComponent("t.wav").path
        let tone = try ToneSource(channels: 2, frameLimit: 10)
        let wavWriter = try WAVWriter(path: wav, channels: 2)
        var blocks: [AudioFrame] = []
        while let block = try tone.nextFrame() {
            blocks.append(block)
            try wavWriter.write(block)
        }
        try wavWriter.close()
        let wavReader = try WAVReader(path: wav)
        var readBlocks: [AudioFrame] = []
        while let block = try wavReader.nextFrame() { readBlocks.append(block) }
        #expect(readBlocks == blocks)
        let probe = try runProcess(
            try which("ffprobe"),
            ["-v", "error", "-show_entries", "stream=sample_rate,channels,duration_ts", "-of", "csv=p=0", wav]
        )
        #expect(probe.output.trimmingCharacters(in: .whitespacesAndNewlines) == "48000,2,9600")
    }

    @Test("Y4M and WAV readers survive random and mutated bytes with typed errors")
    func fuzzReaders() throws {
        var random = SeededGenerator(seed: 0x4D4D)
        var y4m = Array("YUV4MPEG2 W16 H16 F30:1 C420\n".utf8)
        for _ in 0..<2 { y4m += Array("FRAME\n".utf8) + [UInt8](repeating: 77, count: 384) }
        let wav =
            WAVHeader.bytes(channels: 1, rate: 48_000, bits: 16, dataBytes: 4_000) + [UInt8](repeating: 3, count: 4_000)
        for iteration in 0..<3_000 {
            let base = iteration % 2 == 0 ? y4m : wav
            var bytes: [UInt8]
            switch iteration % 3 {
            case 0:
                bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            case 1:
                bytes = Array(base.prefix(Int.random(in: 0...base.count, using: &random)))
            default:
                bytes = base
                for _ in 0..<Int.random(in: 1...12, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            }
            do {
                let reader = try Y4MReader(bytes: bytes, name: "fuzz")
                var frames = 0
                while frames < 10, try reader.nextFrame() != nil { frames += 1 }
            } catch {
                #expect(error.path == "fuzz")
            }
            do {
                let reader = try WAVReader(bytes: bytes, name: "fuzz")
                var frames = 0
                while frames < 10, try reader.nextFrame() != nil { frames += 1 }
            } catch {
                #expect(error.path == "fuzz")
            }
        }
    }

    @Test("The demuxer survives random and mutated files with typed errors")
    func fuzzDemuxer() throws {
        let directory = try TestPaths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Seeds: a small WebM (VP8 + Opus) and an Ogg Opus file made by our writer.
        var seeds: [[UInt8]] = []
        for name in ["seed.webm", "seed.ogg"] {
            let path = directory.appendingPathComponent(name).path
            let writer = try MediaFileWriter(path: path, tracks: [.opus(channels: 1)])
            for index in 0..<20 {
                try writer.write(
                    EncodedFrame(
                        codec: .opus,
                        data: [0x78, UInt8(index), 9, 9],
                        rtpTimestamp: UInt32(index * 960),
                        isKeyframe: true
                    ),
                    track: 0,
                    pts: Int64(index * 960)
                )
            }
            try writer.close()
            seeds.append(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        var random = SeededGenerator(seed: 0xDE_AD)
        let path = directory.appendingPathComponent("fuzz.bin").path
        for iteration in 0..<300 {
            var bytes: [UInt8]
            if iteration % 3 == 0 {
                bytes = (0..<Int.random(in: 0...2_000, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            } else {
                bytes = seeds[iteration % seeds.count]
                if iteration % 2 == 0 { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random))) }
                for _ in 0..<Int.random(in: 1...20, using: &random) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            do {
                let demuxer = try MediaDemuxer(path: path)
                var packets = 0
                while packets < 200, try demuxer.readPacket() != nil { packets += 1 }
            } catch {
                #expect(error.path == path)
            }
        }
    }

    @Test("Unpaced sources deliver every frame in order with exact RTP steps")
    func unpacedRun() async throws {
        let source = EncodingAudioSource(
            raw: try ToneSource(frameLimit: 25, initialTimestamp: UInt32.max - 1_000),
            encoder: try ConclaveOpus.OpusAudioEncoder()
        )
        var timestamps: [UInt32] = []
        try await source.run(pacer: MediaPacer(mode: .unpaced)) { frame in timestamps.append(frame.rtpTimestamp) }
        #expect(timestamps.count == 25)
        #expect(zip(timestamps.dropFirst(), timestamps).allSatisfy { $0 &- $1 == 960 })
        let timeline = FrameTimeline(clockRate: 90_000, rateNumerator: 30_000, rateDenominator: 1_001)
        #expect(timeline.rtpTimestamp(forFrame: 30_000) == 90_090_000)
        #expect((0..<120).filter { timeline.startsSecond(frame: $0) } == [0, 30, 60, 90])
    }
}
