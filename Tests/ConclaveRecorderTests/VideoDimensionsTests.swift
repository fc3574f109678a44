import ConclaveCore
import ConclaveMedia
import ConclaveRecorder
import Testing

@Suite("Picture size from keyframes")
struct VideoDimensionsTests {
    @Test(
        "The size of real VP8 and H264 keyframes, cropping included",
        arguments: [
            (MediaCodec.vp8, 320, 240), (.vp8, 160, 120), (.h264, 320, 240), (.h264, 320, 180), (.h264, 640, 360),
        ]
    )
    func realKeyframes(codec: MediaCodec, width: Int, height: Int) throws {
        let source = EncodingVideoSource(
            raw: try PatternSource(width: width, height: height, frameRate: 30, frameLimit: 3),
            encoder: try VideoEncoderSettings(codec: codec, width: width, height: height, bitrate: 200_000)
                .makeEncoder()
        )
        let keyframe = try #require(try source.nextFrame()?.frame)
        #expect(keyframe.isKeyframe)
        #expect(VideoDimensions.of(keyframe) == VideoDimensions(width: width, height: height))
        let next = try #require(try source.nextFrame()?.frame)
        #expect(VideoDimensions.of(next) == nil, "not a keyframe")
    }

    @Test("Random and mutated keyframe headers give a size or nil, never a crash")
    func fuzz() throws {
        let source = EncodingVideoSource(
            raw: try PatternSource(width: 320, height: 180, frameRate: 30, frameLimit: 1),
            encoder: try VideoEncoderSettings(codec: .h264, width: 320, height: 180, bitrate: 200_000).makeEncoder()
        )
        let h264 = try #require(try source.nextFrame()?.frame).data
        var random = SplitMix64(seed: 5)
        var sizes = 0
        for iteration in 0..<3_000 {
            var bytes: [UInt8]
            if iteration % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                if iteration % 4 == 0 { bytes = [0, 0, 0, 1, 0x67] + bytes }
            } else {
                bytes = Array(h264.prefix(64))
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            }
            for codec in [MediaCodec.vp8, .h264] {
                if let size = VideoDimensions.of(
                    EncodedFrame(codec: codec, data: bytes, rtpTimestamp: 0, isKeyframe: true)
                ) {
                    #expect(size.width > 0 && size.height > 0 && size.width <= 16_384 && size.height <= 16_384)
                    sizes += 1
                }
            }
        }
        #expect(sizes > 0)
    }
}
