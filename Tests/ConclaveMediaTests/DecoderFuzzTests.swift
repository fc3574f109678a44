import ConclaveCore
import ConclaveMedia
import ConclaveOpenH264
import ConclaveOpus
import ConclaveTestSupport
import ConclaveVPX
import Testing

/// The decoders take frames straight from the network: random and damaged frames must give typed
/// errors or garbage pictures, never a crash, and the decoder must recover at the next keyframe.
@Suite("Decoder fuzzing")
struct DecoderFuzzTests {
    func mutate(_ frames: [EncodedFrame], iteration: Int, random: inout SeededGenerator) -> EncodedFrame {
        guard iteration % 4 != 0, let base = frames.randomElement(using: &random) else {
            let bytes = (0..<Int.random(in: 1...600, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            return EncodedFrame(codec: frames.first?.codec ?? .vp8, data: bytes, rtpTimestamp: 0, isKeyframe: false)
        }
        var frame = base
        if iteration % 3 == 0 {
            frame.data = Array(frame.data.prefix(Int.random(in: 1...frame.data.count, using: &random)))
        }
        for _ in 0..<Int.random(in: 1...16, using: &random) {
            frame.data[Int.random(in: 0..<frame.data.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
        }
        return frame
    }

    func videoFrames(_ encoder: any VideoEncoding) throws -> [EncodedFrame] {
        let source = try PatternSource(width: 160, height: 120, frameRate: 30, frameLimit: 10)
        var frames: [EncodedFrame] = []
        var index = 0
        while let picture = try source.nextFrame() {
            frames += try encoder.encode(picture, forceKeyframe: index == 5)
            index += 1
        }
        return frames
    }

    @Test("VP8 and H264 decoders survive damaged frames and recover at a keyframe", arguments: [MediaCodec.vp8, .h264])
    func video(codec: MediaCodec) throws {
        let encoder = try VideoEncoderSettings(codec: codec, width: 160, height: 120, bitrate: 200_000).makeEncoder()
        let frames = try videoFrames(encoder)
        let decoder: any VideoDecoding = codec == .vp8 ? try VP8Decoder() : try H264Decoder()
        var random = SeededGenerator(seed: codec == .vp8 ? 8 : 264)
        for iteration in 0..<1_500 {
            let frame = mutate(frames, iteration: iteration, random: &random)
            do {
                if let picture = try decoder.decode(frame) {
                    #expect(picture.data.count == VideoFrame.byteCount(width: picture.width, height: picture.height))
                }
            } catch let error as VPXCodecError {
                #expect(!error.reason.isEmpty)
            } catch let error as H264CodecError {
                #expect(!error.reason.isEmpty)
            }
        }
        // A clean keyframe brings a fresh decoder state back to exact pictures.
        let keyframe = try #require(frames.first { $0.isKeyframe })
        let fresh: any VideoDecoding = codec == .vp8 ? try VP8Decoder() : try H264Decoder()
        let picture = try #require(try fresh.decode(keyframe))
        #expect(PatternReader.read(picture)?.frameNumber == 0)
    }

    @Test("The Opus decoder survives damaged packets")
    func opus() throws {
        let encoder = try OpusAudioEncoder()
        let tone = try ToneSource(frameLimit: 20)
        var packets: [EncodedFrame] = []
        while let block = try tone.nextFrame() { packets.append(try #require(try encoder.encode(block))) }
        let decoder = try OpusAudioDecoder(channels: 2)
        var random = SeededGenerator(seed: 0x0905)
        for iteration in 0..<3_000 {
            let packet = mutate(packets, iteration: iteration, random: &random)
            do {
                let pcm = try decoder.decode(packet)
                #expect(pcm.channels == 2 && pcm.samplesPerChannel <= 5_760)
            } catch {
                #expect(error.code < 0)
            }
        }
    }
}
